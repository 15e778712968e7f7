#include "data/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace brt::data {

namespace fs = std::filesystem;

namespace {

constexpr size_t kBufferBytes = size_t(1) << 20;  // token losses run to millions of lines

// write(2) until all of `bytes` is written; 0, or the errno of the failed call.
int write_all(int fd, const char* bytes, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, bytes, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    bytes += n;
    size -= size_t(n);
  }
  return 0;
}

// Makes the rename itself durable. Some file systems cannot fsync a directory (EINVAL): the
// rename has happened, and that is all they offer.
int sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int rc = ::fsync(fd) == 0 || errno == EINVAL || errno == ENOTSUP ? 0 : errno;
  ::close(fd);
  return rc;
}

}  // namespace

std::string error_text(int error) {
  char buf[256];
  // GNU strerror_r: returns the text (maybe a static string, maybe buf).
  return ::strerror_r(error, buf, sizeof buf);
}

AtomicOutputFile::AtomicOutputFile(fs::path path) : path_(std::move(path)), tmp_(path_.string() + ".tmp") {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw OutputError("cannot write " + path_.string() + ": " + error_text(errno) + " (creating " + tmp_.string() + ")");
  buffer_.reserve(kBufferBytes);
}

AtomicOutputFile::~AtomicOutputFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicOutputFile::fail(const std::string& what, int error) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  buffer_.clear();
  throw OutputError("cannot " + what + " " + path_.string() + ": " + error_text(error) + " (the partial " +
                    tmp_.string() + " was removed; " + path_.string() + " is unchanged)");
}

void AtomicOutputFile::flush_buffer() {
  if (const int error = write_all(fd_, buffer_.data(), buffer_.size()); error != 0) fail("write", error);
  buffer_.clear();
}

void AtomicOutputFile::write(std::string_view bytes) {
  if (fd_ < 0) throw OutputError("cannot write " + path_.string() + ": the file is already closed");
  if (buffer_.size() + bytes.size() > kBufferBytes) flush_buffer();
  if (bytes.size() >= kBufferBytes) {
    if (const int error = write_all(fd_, bytes.data(), bytes.size()); error != 0) fail("write", error);
    return;
  }
  buffer_.append(bytes);
}

void AtomicOutputFile::commit() {
  if (fd_ < 0) throw OutputError("cannot write " + path_.string() + ": the file is already closed");
  flush_buffer();
  // A network or full file system may report a lost write only here: both are checked.
  if (::fsync(fd_) != 0 && errno != EINVAL) fail("sync", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(tmp_.c_str());
    throw OutputError("cannot close " + path_.string() + ": " + error_text(error) + " (the partial " +
                      tmp_.string() + " was removed; " + path_.string() + " is unchanged)");
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp_.c_str());
    throw OutputError("cannot rename " + tmp_.string() + " to " + path_.string() + ": " + error_text(error) +
                      " (" + tmp_.string() + " was removed)");
  }
  if (const int error = sync_directory(path_.parent_path()); error != 0)
    throw OutputError("cannot sync the directory of " + path_.string() + ": " + error_text(error));
}

void write_file_atomically(const fs::path& path, std::string_view bytes) {
  AtomicOutputFile out(path);
  out.write(bytes);
  out.commit();
}

RecordLog::RecordLog(fs::path path) : path_(std::move(path)) {
  std::error_code ec;
  if (path_.has_parent_path()) fs::create_directories(path_.parent_path(), ec);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw OutputError("cannot open " + path_.string() + " for appending: " + error_text(errno));
}

RecordLog::~RecordLog() {
  if (fd_ >= 0) ::close(fd_);
}

std::string RecordLog::append(std::string_view record) {
  // The end before this record: a write cut short by a full disk is cut back to it.
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  const int error = write_all(fd_, record.data(), record.size());
  if (error == 0) return "";
  if (before >= 0 && ::ftruncate(fd_, before) != 0) {
    return error_text(error) + "; and the partial record could not be cut off (" + error_text(errno) + ")";
  }
  return error_text(error);
}

}  // namespace brt::data
