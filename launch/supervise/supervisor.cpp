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

#include "launch/supervise/heartbeat_watch.h"
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
                     const struct sigaction (&inherited)[3], const std::string& heartbeat_interval) {
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
  if (!heartbeat_interval.empty()) ::setenv(parallel::kHeartbeatEnv, heartbeat_interval.c_str(), 1);
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
  explicit Watch(double heartbeat_timeout_s) : beats(heartbeat_timeout_s) {}
  pid_t child = 0;
  std::string head;                    // the first 4 KiB of the stderr line being read, parsed
  std::string pending;                 // what of that line is not yet written to the log
  bool line_flushed = false;           // part of the line was written before its newline
  std::optional<AbortReport> abort;    // the first abort report
  HeartbeatWatch beats;
  std::optional<int> silent_status;    // the job ended for a silent rank
  Clock::time_point end_at{}, kill_at{};
  bool ending = false, killing = false, ended_by_us = false;
  int signals = 0;
};

// Whether a heartbeat line is the beat alone: the marker first, or after mpirun's
// --tag-output tag ("[1,3]<stderr>:"). Otherwise another rank's unfinished line precedes it in
// the merged stream, and the line goes to the log whole.
bool beat_alone(const std::string& line) {
  const size_t at = line.find(parallel::kHeartbeatMarker);
  if (at == 0) return true;
  const std::string prefix = line.substr(0, at);
  const size_t colon = prefix.find_last_not_of(' ');
  return prefix[0] == '[' && colon != std::string::npos && prefix[colon] == ':' && prefix.find(']') != std::string::npos;
}

// The end of a stderr line: a heartbeat goes to the watch (and, read whole and alone, not to
// the log), any other line to the log, and an abort report starts the grace.
void finish_line(Watch& w, double grace_s) {
  const std::optional<parallel::HeartbeatReport> beat = parallel::parse_heartbeat(w.head);
  if (beat) w.beats.beat(*beat, Clock::now());
  if (!beat || w.line_flushed || !beat_alone(w.head)) pass_through(w.pending.data(), w.pending.size());
  if (!w.abort)
    if ((w.abort = parse_abort_report(w.head)))
      w.end_at = Clock::now() + std::chrono::milliseconds(int64_t(grace_s * 1000));
  w.head.clear();
  w.pending.clear();
  w.line_flushed = false;
}

// What of the current line has arrived, written to the log: when the launcher pauses mid-line
// (a prompt, a progress line), or the line grows past 64 KiB.
void flush_partial(Watch& w) {
  if (w.pending.empty()) return;
  pass_through(w.pending.data(), w.pending.size());
  w.pending.clear();
  w.line_flushed = true;
}

void scan_lines(Watch& w, const char* data, size_t size, double grace_s) {
  for (size_t i = 0; i < size; ++i) {
    w.pending.push_back(data[i]);
    if (data[i] != '\n') {
      if (w.head.size() < 4096) w.head.push_back(data[i]);
      if (w.pending.size() > 65536) flush_partial(w);
      continue;
    }
    finish_line(w, grace_s);
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
  if (w.ended_by_us && w.silent_status) return *w.silent_status;
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
    if (n <= 0) break;
    scan_lines(w, buf, size_t(n), grace_s);
  }
  flush_partial(w);
}

// Ends the job for a rank silent past the timeout (once; not while the job already ends).
void check_heartbeats(Watch& w, const SupervisorOptions& o, Clock::time_point& last_check) {
  const auto now = Clock::now();
  // The supervisor itself stopped or starved (the loop turns at least once a second): the
  // ranks are not to blame for the gap.
  if (now - last_check > std::chrono::seconds(3)) w.beats.forgive(now);
  last_check = now;
  if (o.heartbeat_timeout_s <= 0 || w.ending || w.abort) return;
  if (const auto silent = w.beats.silent(now)) {
    w.silent_status = parallel::kCollectiveTimeoutExitCode;
    end_group(w, o, *silent + "; ending the job (exit " + std::to_string(*w.silent_status) + ")");
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
  Watch w(o.heartbeat_timeout_s);
  std::vector<std::string> command = o.command;
  std::string interval;
  if (o.heartbeat_timeout_s > 0) {
    std::string note;
    command = with_heartbeat_forwarded(o.command, note);
    if (!note.empty()) say("heartbeats: " + note);
    interval = std::to_string(heartbeat_interval_for(o.heartbeat_timeout_s));
  }
  w.child = start_launcher(command, err[1], old_mask, previous, interval);
  ::close(err[1]);
  int status = 0;
  bool stderr_open = true;
  Clock::time_point last_check = Clock::now();
  char buf[65536];
  for (;;) {
    int wait_ms = 1000;
    const auto now = Clock::now();
    if (w.abort && !w.ending) wait_ms = int(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(w.end_at - now).count()));
    if (w.ending && !w.killing) wait_ms = int(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(w.kill_at - now).count()));
    pollfd fds[2] = {{signals, POLLIN, 0}, {stderr_open ? err[0] : -1, POLLIN, 0}};
    if (::poll(fds, 2, std::min(wait_ms, 1000)) == 0) flush_partial(w);  // the launcher paused mid-line
    if (fds[1].revents) {
      const ssize_t n = ::read(err[0], buf, sizeof buf);
      if (n > 0) {
        scan_lines(w, buf, size_t(n), o.grace_s);
      } else {
        flush_partial(w);
        stderr_open = false;
      }
    }
    check_heartbeats(w, o, last_check);
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
