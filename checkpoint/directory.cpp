#include "checkpoint/directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "checkpoint/types.h"

namespace brt::checkpoint {
namespace fs = std::filesystem;

namespace {
constexpr const char* kPrefix = "ckpt-";
constexpr const char* kSuffix = ".h5";
constexpr const char* kTmpSuffix = ".h5.tmp";

std::string errno_text(const std::string& what, const fs::path& path) {
  return what + " " + path.string() + ": " + std::strerror(errno);
}

void fsync_path(const fs::path& path, int flags, const char* what) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) throw SaveError(errno_text(std::string("cannot open for fsync (") + what + ")", path));
  if (::fsync(fd) != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    throw SaveError(errno_text(std::string("fsync failed (") + what + ")", path));
  }
  ::close(fd);
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

std::string checkpoint_file_name(int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "%s%08lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  return name;
}

std::optional<int64_t> step_of_checkpoint_name(const std::string& name) {
  const std::string prefix = kPrefix;
  if (name.rfind(prefix, 0) != 0 || !ends_with(name, kSuffix)) return std::nullopt;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - 3);
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

std::vector<CheckpointEntry> list_checkpoints(const fs::path& dir) {
  std::vector<CheckpointEntry> entries;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    if (auto step = step_of_checkpoint_name(it->path().filename().string())) {
      entries.push_back({*step, it->path()});
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step > b.step; });
  return entries;
}

std::vector<fs::path> list_partial_checkpoints(const fs::path& dir) {
  std::vector<fs::path> partial;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kPrefix, 0) == 0 && ends_with(name, kTmpSuffix)) partial.push_back(it->path());
  }
  std::sort(partial.begin(), partial.end());
  return partial;
}

std::vector<fs::path> remove_abandoned_partials(const fs::path& dir) {
  std::vector<fs::path> removed;
  std::vector<fs::path> candidates = list_partial_checkpoints(dir);
  std::error_code ec;
  const std::string pointer_tmp = std::string(kLatestPointerName) + ".tmp";
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // Open MPI's MPI-IO keeps a lock file beside a file open for collective writing
    // (ckpt-N.h5.tmp-<job>-<pid>.lock); a save killed mid-write leaves it behind.
    const bool mpi_io_lock = name.rfind(kPrefix, 0) == 0 && name.find(std::string(kTmpSuffix) + "-") != std::string::npos &&
                             ends_with(name, ".lock");
    if (name.rfind(pointer_tmp, 0) == 0 || mpi_io_lock) candidates.push_back(it->path());
  }
  for (const auto& file : candidates) {
    std::error_code remove_ec;  // only files: a directory of such a name is no save
    if (fs::is_regular_file(fs::symlink_status(file, remove_ec)) && fs::remove(file, remove_ec) && !remove_ec)
      removed.push_back(file);
  }
  return removed;
}

FileIdentity identify_file(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {uint64_t(st.st_dev), uint64_t(st.st_ino), true};
}

bool is_same_file(const fs::path& path, const FileIdentity& created) {
  const FileIdentity now = identify_file(path);
  return created.known && now.known && now.device == created.device && now.inode == created.inode;
}

void truncate_own_file(const fs::path& path, const FileIdentity& created) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  struct stat st {};
  if (created.known && ::fstat(fd, &st) == 0 && uint64_t(st.st_dev) == created.device &&
      uint64_t(st.st_ino) == created.inode)
    (void)::ftruncate(fd, 0);
  ::close(fd);
}

bool remove_own_file(const fs::path& path, const FileIdentity& created) {
  // A file swapped in between the check and the unlink could only come from a writer that
  // ignores the directory lock; the window is one system call.
  return is_same_file(path, created) && ::unlink(path.c_str()) == 0;
}

std::optional<fs::path> read_latest_pointer(const fs::path& dir) {
  std::FILE* file = std::fopen((dir / kLatestPointerName).c_str(), "r");
  if (file == nullptr) return std::nullopt;
  char line[512] = {0};
  const bool ok = std::fgets(line, sizeof line, file) != nullptr;
  std::fclose(file);
  if (!ok) return std::nullopt;
  std::string name(line);
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
  if (name.empty()) return std::nullopt;
  return dir / name;
}

void write_latest_pointer(const fs::path& dir, const std::string& file_name) {
  const fs::path tmp = dir / (std::string(kLatestPointerName) + ".tmp." + std::to_string(::getpid()));
  const fs::path target = dir / kLatestPointerName;
  std::FILE* file = std::fopen(tmp.c_str(), "w");
  if (file == nullptr) throw SaveError(errno_text("cannot create", tmp));
  const std::string line = file_name + "\n";
  const bool written = std::fwrite(line.data(), 1, line.size(), file) == line.size();
  const bool flushed = std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  const int saved = errno;
  std::fclose(file);
  if (!written || !flushed) {
    std::remove(tmp.c_str());
    errno = saved;
    throw SaveError(errno_text("cannot write", tmp));
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(tmp.c_str());
    errno = rename_errno;
    throw SaveError(errno_text("cannot rename latest pointer into place", target));
  }
  fsync_directory(dir);
}

void fsync_file(const fs::path& file) {
  fsync_path(file, O_RDONLY, "file");
}

void fsync_directory(const fs::path& dir) {
  fsync_path(dir.empty() ? fs::path(".") : dir, O_RDONLY | O_DIRECTORY, "directory");
}

}  // namespace brt::checkpoint
