#include "launch/supervise/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "parallel/health/comm_error.h"

namespace brt::launch {

namespace {

using Clock = std::chrono::steady_clock;

void say(const std::string& text) {
  const std::string line = "brt-dist launch: " + text + "\n";
  const ssize_t n = ::write(2, line.data(), line.size());
  (void)n;
}

// Writes all of `data` to fd 2 (the supervisor's stderr: the job's log).
void pass_through(const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(2, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= size_t(n);
  }
}

// The launcher, started in a process group of its own (the supervisor signals the group), its
// stderr into `err_write`, its stdin /dev/null when ours is a terminal (a background group
// reading the terminal would be stopped by SIGTTIN), SIGTERM if the supervisor dies.
pid_t start_launcher(const std::vector<std::string>& command, int err_write, const sigset_t& old_mask,
                     const struct sigaction (&inherited)[3]) {
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("cannot fork: ") + std::strerror(errno));
  if (child > 0) {
    ::setpgid(child, child);  // both sides: no race with the first signal
    return child;
  }
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(1);  // the supervisor died before prctl
  ::dup2(err_write, 2);
  if (::isatty(0)) {
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
  }
  const int taken[3] = {SIGINT, SIGTERM, SIGHUP};
  for (int k = 0; k < 3; ++k) ::sigaction(taken[k], &inherited[k], nullptr);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  const std::string why = "brt-dist launch: cannot start " + command[0] + ": " + std::strerror(errno) + "\n";
  const ssize_t n = ::write(2, why.data(), why.size());
  (void)n;
  ::_exit(127);
}

// What the supervisor has seen and done; decides the exit status.
struct Watch {
  pid_t child = 0;
  std::string line;                    // the stderr line being read
  std::optional<AbortReport> abort;    // the first abort report
  Clock::time_point end_at{}, kill_at{};
  bool ending = false, killing = false, ended_by_us = false;
  int signals = 0;
};

void scan_lines(Watch& w, const char* data, size_t size, double grace_s) {
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != '\n') {
      if (w.line.size() < 4096) w.line.push_back(data[i]);
      continue;
    }
    if (!w.abort)
      if ((w.abort = parse_abort_report(w.line)))
        w.end_at = Clock::now() + std::chrono::milliseconds(int64_t(grace_s * 1000));
    w.line.clear();
  }
}

void end_group(Watch& w, const SupervisorOptions& o, const std::string& why) {
  if (w.ending) return;
  say(why + ": ending its process group (SIGTERM, SIGKILL after " + std::to_string(int(o.kill_after_s)) + " s)");
  w.ending = w.ended_by_us = true;
  ::killpg(w.child, SIGTERM);
  w.kill_at = Clock::now() + std::chrono::milliseconds(int64_t(o.kill_after_s * 1000));
}

void on_signal(Watch& w, const SupervisorOptions& o, int signal) {
  const std::string name = signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "SIGHUP";
  if (++w.signals == 1) {
    say(name + ": asking the ranks to stop cleanly (SIGUSR1 to " + o.command[0] +
        ", which forwards it: they save a checkpoint and exit 75); again to end the job now");
    ::kill(w.child, SIGUSR1);
  } else if (w.signals == 2) {
    end_group(w, o, name + " again");
  } else {
    say(name + " a third time: SIGKILL to the launcher's process group");
    ::killpg(w.child, SIGKILL);
  }
}

int exit_status(const Watch& w, int status) {
  if (w.ended_by_us && w.abort) return w.abort->exit_code;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// The launcher's stderr until EOF, at most `seconds` (a process it left may hold the pipe open).
void drain(Watch& w, int fd, double seconds, double grace_s) {
  const auto until = Clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
  char buf[65536];
  while (Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return;
    pass_through(buf, size_t(n));
    scan_lines(w, buf, size_t(n), grace_s);
  }
}

}  // namespace

std::optional<AbortReport> parse_abort_report(std::string_view line) {
  const std::string_view marker = parallel::kJobAbortMarker;
  const size_t at = line.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string text(line.substr(at + marker.size()));
  AbortReport r;
  char host[256] = {};
  if (std::sscanf(text.c_str(), "world rank %d (host %255[^)]), exit status %d", &r.world_rank, host, &r.exit_code) != 3)
    return std::nullopt;
  r.host = host;
  return r;
}

int supervise(const SupervisorOptions& o) {
  if (o.command.empty()) throw std::invalid_argument("no launcher command");
  sigset_t handled, old_mask;
  sigemptyset(&handled);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&handled, s);
  // A shell starts a background job with SIGINT ignored, and an ignored signal never reaches a
  // signalfd: the supervisor takes these itself (the launcher keeps what it inherited).
  struct sigaction previous[3];
  const int taken[3] = {SIGINT, SIGTERM, SIGHUP};
  for (int k = 0; k < 3; ++k) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(taken[k], &dfl, &previous[k]);
  }
  ::sigprocmask(SIG_BLOCK, &handled, &old_mask);
  const int signals = ::signalfd(-1, &handled, SFD_CLOEXEC);
  int err[2];
  if (signals < 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error(std::string("supervisor: ") + std::strerror(errno));
  Watch w;
  w.child = start_launcher(o.command, err[1], old_mask, previous);
  ::close(err[1]);
  int status = 0;
  bool stderr_open = true;
  char buf[65536];
  for (;;) {
    int wait_ms = 1000;
    const auto now = Clock::now();
    if (w.abort && !w.ending) wait_ms = int(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(w.end_at - now).count()));
    if (w.ending && !w.killing) wait_ms = int(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(w.kill_at - now).count()));
    pollfd fds[2] = {{signals, POLLIN, 0}, {stderr_open ? err[0] : -1, POLLIN, 0}};
    ::poll(fds, 2, std::min(wait_ms, 1000));
    if (fds[1].revents) {
      const ssize_t n = ::read(err[0], buf, sizeof buf);
      if (n > 0) {
        pass_through(buf, size_t(n));
        scan_lines(w, buf, size_t(n), o.grace_s);
      } else {
        stderr_open = false;
      }
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info{};
      if (::read(signals, &info, sizeof info) == ssize_t(sizeof info) && int(info.ssi_signo) != SIGCHLD)
        on_signal(w, o, int(info.ssi_signo));
    }
    if (::waitpid(w.child, &status, WNOHANG) == w.child) break;
    if (w.abort && !w.ending && Clock::now() >= w.end_at)
      end_group(w, o, o.command[0] + " (pid " + std::to_string(w.child) + ") has not ended " +
                          std::to_string(int(o.grace_s)) + " s after world rank " + std::to_string(w.abort->world_rank) +
                          " (host " + w.abort->host + ") aborted the job (exit status " +
                          std::to_string(w.abort->exit_code) + ")");
    if (w.ending && !w.killing && Clock::now() >= w.kill_at) {
      say(o.command[0] + " survived SIGTERM: SIGKILL to its process group");
      ::killpg(w.child, SIGKILL);
      w.killing = true;
    }
  }
  if (stderr_open) drain(w, err[0], 2.0, o.grace_s);
  if (w.ending) ::killpg(w.child, SIGKILL);  // whatever of the group outlived the launcher
  ::close(err[0]);
  ::close(signals);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  for (int k = 0; k < 3; ++k) ::sigaction(taken[k], &previous[k], nullptr);
  return exit_status(w, status);
}

}  // namespace brt::launch
