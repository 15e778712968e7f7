// Output files that never fail silently (docs/reliability.md "Outputs"). Every file
// brt-dist writes for a user or a program — eval's JSON and token losses, prepare's shards,
// metas, index, manifest and tokenizer, the metrics JSONL — goes through one of these two, so a
// full disk, a quota or an I/O error is always reported with the path and the system's reason
// (strerror(errno)), and never leaves a file that looks complete but is not:
//  - AtomicOutputFile: written to PATH.tmp; every write, the flush, fsync and close checked;
//    renamed over PATH only when all succeeded. On failure the .tmp is removed and PATH is left
//    as it was (absent, or the previous complete file).
//  - RecordLog: an append-only log of whole records (JSONL). One write per record; a record
//    that cannot be written whole is cut back off the file, so a reader never meets half a line.
// It lives in data/ (the lowest layer that writes user-visible files: prepare), and launch/
// uses it from here.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace brt::data {

// A write, flush, fsync, close or rename failed. what() names the path and the reason.
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AtomicOutputFile {
 public:
  // Creates PATH.tmp (truncating a stale one). Throws OutputError naming it and the reason.
  explicit AtomicOutputFile(std::filesystem::path path);
  // Without commit() (an exception, an early return): the .tmp is closed and removed.
  ~AtomicOutputFile();
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

  // Buffered; a failed write throws OutputError (the .tmp removed, PATH untouched).
  void write(std::string_view bytes);
  // Flushes, fsyncs and closes the .tmp, renames it to PATH and syncs the directory. Throws
  // OutputError on any failure, after removing the .tmp.
  void commit();

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temporary() const { return tmp_; }

 private:
  void flush_buffer();
  [[noreturn]] void fail(const std::string& what, int error);
  std::filesystem::path path_, tmp_;
  int fd_ = -1;
  std::string buffer_;
};

// The whole of `bytes` as PATH, atomically (AtomicOutputFile).
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

class RecordLog {
 public:
  // Opens PATH for appending (created with its parent directories if missing). Throws
  // OutputError naming it and the reason.
  explicit RecordLog(std::filesystem::path path);
  ~RecordLog();
  RecordLog(const RecordLog&) = delete;
  RecordLog& operator=(const RecordLog&) = delete;

  // Appends `record` (one whole line, '\n' included) with one write. Returns "" when written;
  // else the reason (strerror), after truncating the file back to its length before the
  // record. Never throws: the caller decides whether a lost record matters.
  std::string append(std::string_view record);

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// "No space left on device": strerror(error), thread-safe.
std::string error_text(int error);

}  // namespace brt::data
