#include "parallel/health/abort_fallback.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace brt::parallel {

namespace {

std::string read_parent_name() {
  std::ifstream in("/proc/" + std::to_string(::getppid()) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// Below: only async-signal-safe calls (the helper is forked from a multi-threaded process).

void sleep_seconds(double s) {
  timespec t;
  t.tv_sec = time_t(s);
  t.tv_nsec = long((s - double(t.tv_sec)) * 1e9);
  while (::nanosleep(&t, &t) != 0) {
  }
}

// Alive and not a zombie (a rank whose launcher hangs may stay unreaped); `stat` is
// /proc/<pid>/stat.
bool running(int pid, const std::string& stat) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  const int fd = ::open(stat.c_str(), O_RDONLY);
  if (fd < 0) return false;
  char buf[256];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  // "pid (comm) S ...": the state follows the last ')'.
  ssize_t close_paren = -1;
  for (ssize_t i = 0; i < n; ++i)
    if (buf[i] == ')') close_paren = i;
  return close_paren < 0 || close_paren + 2 >= n || buf[close_paren + 2] != 'Z';
}

void close_inherited_descriptors() {
  const int null_fd = ::open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    ::dup2(null_fd, 0);
    ::dup2(null_fd, 1);
    ::dup2(null_fd, 2);
  }
  rlimit lim{};
  const long last = (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < 65536)
                        ? long(lim.rlim_cur)
                        : 65536;
  if (::close_range(3, ~0U, 0) != 0)
    for (long fd = 3; fd < last; ++fd) ::close(int(fd));
}

// One line into the job's log: the launcher's stderr (mpirun's terminal or batch output), else
// the rank's own (srun's pipe). pidfd_getfd shares the process's own file description, so the
// line lands where its next write would (a log opened with `>` is not overwritten later);
// where that is refused, /proc/PID/fd/2 with O_APPEND. O_NONBLOCK: a pipe to a dead ssh must
// not block us.
void tell_log(const AbortFallbackPlan& plan, int pid, const std::string& stderr_path) {
  int fd = -1;
  const int pidfd = int(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    fd = int(::syscall(SYS_pidfd_getfd, pidfd, 2, 0));
    ::close(pidfd);
  }
  if (fd < 0) fd = ::open(stderr_path.c_str(), O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  const ssize_t written = ::write(fd, plan.message.data(), plan.message.size());
  (void)written;
  ::close(fd);
}

[[noreturn]] void run_helper(const AbortFallbackPlan& plan) {
  ::setsid();  // out of the rank's process group, which the launcher kills
  struct sigaction ignore{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, nullptr);
  close_inherited_descriptors();
  auto rank_running = [&] { return running(plan.rank_pid, plan.rank_stat); };
  auto launcher_running = [&] { return running(plan.launcher_pid, plan.launcher_stat); };
  constexpr double kPoll = 0.2;
  for (double waited = 0; waited < plan.grace_s; waited += kPoll) {
    if (!rank_running() && !launcher_running()) ::_exit(0);  // MPI_Abort worked
    sleep_seconds(kPoll);
  }
  const bool launcher_hung = launcher_running();
  if (launcher_hung)
    tell_log(plan, plan.launcher_pid, plan.launcher_stderr);
  else if (rank_running())
    tell_log(plan, plan.rank_pid, plan.rank_stderr);
  if (rank_running()) ::kill(plan.rank_pid, SIGKILL);
  if (!launcher_hung) ::_exit(0);
  if (plan.terminate_launcher) {
    ::kill(plan.launcher_pid, SIGTERM);
    for (int i = 0; i < 15 && launcher_running(); ++i) sleep_seconds(kPoll);
  }
  if (launcher_running()) ::kill(plan.launcher_pid, SIGKILL);
  ::_exit(0);
}

}  // namespace

AbortFallbackPlan plan_abort_fallback(int world_rank, const std::string& host, int exit_code, double grace_s,
                                      const std::string& parent_name) {
  AbortFallbackPlan plan;
  plan.rank_pid = int(::getpid());
  plan.grace_s = grace_s;
  const std::string parent = parent_name.empty() ? read_parent_name() : parent_name;
  if (parent == "mpirun" || parent == "orterun" || parent == "mpiexec") {
    plan.launcher_name = "mpirun";
  } else if (parent == "orted") {
    plan.launcher_name = "orted";
    plan.terminate_launcher = true;
  }
  if (!plan.launcher_name.empty()) plan.launcher_pid = int(::getppid());
  plan.rank_stat = "/proc/" + std::to_string(plan.rank_pid) + "/stat";
  plan.rank_stderr = "/proc/" + std::to_string(plan.rank_pid) + "/fd/2";
  plan.launcher_stat = "/proc/" + std::to_string(plan.launcher_pid) + "/stat";
  plan.launcher_stderr = "/proc/" + std::to_string(plan.launcher_pid) + "/fd/2";
  char grace[32];
  std::snprintf(grace, sizeof grace, "%.0f", grace_s);
  plan.message = "brt-dist: world rank " + std::to_string(world_rank) + " (host " + host +
                 "): the job has not ended " + grace + " s after MPI_Abort(" + std::to_string(exit_code) + ")";
  plan.message += plan.launcher_pid != 0
                      ? "; " + plan.launcher_name + " (pid " + std::to_string(plan.launcher_pid) +
                            ") cannot reach every host, so it is ended here, with this host's ranks.\n"
                      : "; this rank ends itself.\n";
  return plan;
}

void arm_abort_fallback(const AbortFallbackPlan& plan) {
  std::fflush(nullptr);  // nothing buffered is written twice by the child
  const pid_t child = ::fork();
  if (child == 0) run_helper(plan);
}

}  // namespace brt::parallel
