#include "launch/preflight/run_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <span>
#include <stdexcept>
#include <thread>

#include "checkpoint/directory.h"
#include "launch/preflight/errno_text.h"
#include "parallel/communicator.h"
#include "parallel/launch_refused.h"

namespace brt::launch {

namespace fs = std::filesystem;

namespace {

// The outcome world rank 0 broadcasts while it tries: still waiting, held, or refused.
enum : int64_t { kWaiting = 0, kHeld = 1, kRefused = 2 };
constexpr auto kRetryPeriod = std::chrono::milliseconds(250);
constexpr double kReportEverySeconds = 10;

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "?";
  return host;
}

std::string now_text() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S %Z", &local);
  return buf;
}

std::string first_line_of(int fd) {
  char buf[1024];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string text(buf, n > 0 ? size_t(n) : 0);
  return text.substr(0, text.find('\n'));
}

// File systems without record locks (some FUSE mounts, NFS without a lock manager).
bool locks_unsupported(int error) {
  return error == ENOLCK || error == EOPNOTSUPP || error == EINVAL || error == ENOSYS;
}

std::string whole_seconds(double s) { return std::to_string(int64_t(std::ceil(s))) + " s"; }

std::string in_use_message(const fs::path& dir, const std::string& holder, double wait_s) {
  return "checkpoint.dir " + dir.string() + " is in use by " + describe_lock_holder(holder) +
         ": another run is training with its checkpoints there (lock " + (dir / kLockFileName).string() + "). " +
         (wait_s > 0 ? "Waited " + whole_seconds(wait_s) + " for it to end (checkpoint.lock_wait_s = " +
                           whole_seconds(wait_s) + "). "
                     : std::string("checkpoint.lock_wait_s = 0: not waiting. ")) +
         "Nothing was changed. Let that run end (or stop it), or choose another checkpoint.dir.";
}

// World rank 0: tries until the lock is taken, refused, or wait_s has passed, telling the other
// ranks the outcome of every attempt (their heartbeat).
int64_t take_or_refuse(const fs::path& dir, double wait_s, const std::string& command, parallel::Communicator* world,
                       bool print, CheckpointDirLock& result, std::string& refusal) {
  const std::string line = lock_holder_line(command);
  const auto start = std::chrono::steady_clock::now();
  bool waited_for_other = false;
  double next_report = 0;
  std::string holder;
  int64_t outcome = kWaiting;
  while (outcome == kWaiting) {
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    try {
      switch (result.lock.try_take(dir, line, holder)) {
        case DirectoryLock::Attempt::kTaken:
          outcome = kHeld;
          if (waited_for_other)
            result.notes.push_back("checkpoint.dir " + dir.string() + ": the run that held it ended after " +
                                   whole_seconds(waited) + "; this run takes the directory");
          break;
        case DirectoryLock::Attempt::kUnsupported:
          outcome = kHeld;
          result.notes.push_back("warning: checkpoint.dir " + dir.string() + ": cannot lock " + kLockFileName + " (" +
                                 holder + "): a second run on this directory would not be detected");
          break;
        case DirectoryLock::Attempt::kHeldByOther:
          if (waited >= wait_s) {
            outcome = kRefused;
            refusal = in_use_message(dir, holder, wait_s);
            break;
          }
          if (print && waited >= next_report) {
            const std::string what = waited_for_other ? "still waiting, " + whole_seconds(waited) + " of " +
                                                            whole_seconds(wait_s)
                                                      : "waiting up to " + whole_seconds(wait_s) +
                                                            " for it to end (checkpoint.lock_wait_s)";
            std::fprintf(stderr, "checkpoint.dir %s is in use by %s; %s\n", dir.c_str(),
                         describe_lock_holder(holder).c_str(), what.c_str());
            next_report = waited + kReportEverySeconds;
          }
          waited_for_other = true;
          break;
      }
    } catch (const std::exception& e) {
      outcome = kRefused;
      refusal = "checkpoint.dir " + dir.string() + ": " + e.what();
    }
    if (world != nullptr && world->size() > 1) world->broadcast(std::span<int64_t>(&outcome, 1), 0);
    if (outcome == kWaiting) std::this_thread::sleep_for(kRetryPeriod);
  }
  return outcome;
}

}  // namespace

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

DirectoryLock::DirectoryLock(DirectoryLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

DirectoryLock& DirectoryLock::operator=(DirectoryLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

DirectoryLock::Attempt DirectoryLock::try_take(const fs::path& dir, const std::string& holder_line,
                                               std::string& holder) {
  const fs::path path = dir / kLockFileName;
  // O_CLOEXEC: a program this process starts must not inherit (and so keep) the lock.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open the lock file " + path.string() + ": " + errno_text(errno));
  struct flock whole {};
  whole.l_type = F_WRLCK;
  whole.l_whence = SEEK_SET;  // l_start = l_len = 0: the whole file; l_pid must be 0 (OFD)
  if (::fcntl(fd, F_OFD_SETLK, &whole) == 0) {
    const std::string text = holder_line + "\n";
    const bool written = ::ftruncate(fd, 0) == 0 && ::pwrite(fd, text.data(), text.size(), 0) == ssize_t(text.size());
    (void)written;  // the line only describes the holder; the lock is what counts
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
    return Attempt::kTaken;
  }
  const int error = errno;
  if (error == EAGAIN || error == EACCES) {
    holder = first_line_of(fd);
    ::close(fd);
    return Attempt::kHeldByOther;
  }
  ::close(fd);
  if (locks_unsupported(error)) {
    holder = errno_text(error);
    return Attempt::kUnsupported;
  }
  throw std::runtime_error("cannot lock " + path.string() + ": " + errno_text(error));
}

std::string lock_holder_line(const std::string& command) {
  std::string cmd = command.substr(0, 300);
  for (char& c : cmd)
    if (c == '\n' || c == '\r') c = ' ';
  return "pid=" + std::to_string(::getpid()) + " host=" + host_name() + " since=" + now_text() + " command=" + cmd;
}

std::string describe_lock_holder(const std::string& line) {
  auto field = [&line](const std::string& key, const std::string& next) {
    const size_t at = line.find(key + "=");
    if (at == std::string::npos) return std::string();
    const size_t begin = at + key.size() + 1;
    const size_t end = next.empty() ? std::string::npos : line.find(" " + next + "=", begin);
    return line.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  };
  const std::string pid = field("pid", "host"), host = field("host", "since"), since = field("since", "command"),
                    command = field("command", "");
  if (pid.empty()) return "another process (it has not written its description yet: it is starting)";
  constexpr size_t kCommandShown = 100;
  const std::string shown = command.size() > kCommandShown ? command.substr(0, kCommandShown) + " ..." : command;
  return "PID " + pid + " on host " + host + " since " + since + (shown.empty() ? "" : " (" + shown + ")");
}

CheckpointDirLock lock_checkpoint_dir(const fs::path& dir, double wait_s, const std::string& command,
                                      parallel::Communicator* world, bool print) {
  CheckpointDirLock result;
  std::string refusal;
  int64_t outcome = kWaiting;
  if (world == nullptr || world->rank() == 0) {
    outcome = take_or_refuse(dir, wait_s, command, world, print, result, refusal);
  } else {
    while (outcome == kWaiting) world->broadcast(std::span<int64_t>(&outcome, 1), 0);
  }
  if (outcome == kRefused) {
    if (world != nullptr && world->size() > 1) parallel::broadcast_string(*world, refusal, 0);
    throw parallel::LaunchRefused(refusal);
  }
  // Held: every *.tmp here is a save that never finished, its writer gone.
  if (result.lock.held())
    for (const auto& file : checkpoint::remove_abandoned_partials(dir))
      result.notes.push_back("checkpoint.dir " + dir.string() + ": removed " + file.filename().string() +
                             ", left by a save that never finished");
  return result;
}

}  // namespace brt::launch
