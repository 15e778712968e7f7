// One run per checkpoint directory (docs/reliability.md "One run per
// checkpoint directory"). Two runs on one checkpoint.dir destroy each other: one's retention or
// failure cleanup removes the other's files, both resume the same checkpoint and write the same
// names. So world rank 0 of `brt-dist train` holds an exclusive lock on
// <checkpoint.dir>/.brt-dist.lock for the whole run:
//  - an open-file-description lock (fcntl F_OFD_SETLK; NFS clients turn it into a POSIX lock on
//    the server). The kernel drops it when the holder's descriptor closes — on exit, SIGKILL or
//    an OOM kill — so a dead run never blocks the next start and no stale lock is ever removed by
//    hand or by us (the file stays; its one line describes the last holder);
//  - the holder writes "pid=N host=H since=TIME command=..." into it, so a refused start names
//    the run that has the directory;
//  - a start that finds it held retries for checkpoint.lock_wait_s (a Slurm job requeued while
//    the old one is still saving), printing what it waits for, then refuses: exit status 2 on
//    every rank, the message printed once;
//  - once held, the leftovers of saves that never finished (ckpt-*.h5.tmp, latest.tmp.*) are
//    removed: their writers are known to be gone (checkpoint/directory.h). No save ever removes
//    another process's file.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace brt::parallel {
class Communicator;
}

namespace brt::launch {

inline constexpr const char* kLockFileName = ".brt-dist.lock";

// An exclusive lock on <dir>/.brt-dist.lock, held while this object lives (move-only).
class DirectoryLock {
 public:
  DirectoryLock() = default;
  ~DirectoryLock();
  DirectoryLock(DirectoryLock&& other) noexcept;
  DirectoryLock& operator=(DirectoryLock&& other) noexcept;
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  enum class Attempt { kTaken, kHeldByOther, kUnsupported };
  // One attempt, never waiting. kTaken: this object holds it and `holder_line` is written into
  // the file. kHeldByOther: `holder` receives the file's line. kUnsupported: the file system
  // has no locks (`holder` says why). Throws std::runtime_error naming the file and the errno
  // when the lock file cannot be opened.
  Attempt try_take(const std::filesystem::path& dir, const std::string& holder_line, std::string& holder);
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// "pid=N host=H since=TIME command=CMD" for this process (the lock file's line).
std::string lock_holder_line(const std::string& command);
// "PID N on host H since TIME (CMD)" from a lock file's line, for messages.
std::string describe_lock_holder(const std::string& line);

struct CheckpointDirLock {
  DirectoryLock lock;               // world rank 0's; empty elsewhere
  std::vector<std::string> notes;   // world rank 0: what was removed, waited for or not checked
};

// World rank 0 takes the lock of `dir` (which must exist), retrying for up to `wait_s` seconds
// while another process holds it (progress on stderr when `print`); the other ranks wait for
// the outcome, kept alive by a broadcast every 0.25 s (so a wait longer than the communicator's
// deadline is not a stall). Throws parallel::LaunchRefused on every rank with the same message
// when it is still held, naming the holder's PID, host, start time and command.
// `world` null: one process.
CheckpointDirLock lock_checkpoint_dir(const std::filesystem::path& dir, double wait_s, const std::string& command,
                                      parallel::Communicator* world, bool print);

}  // namespace brt::launch
