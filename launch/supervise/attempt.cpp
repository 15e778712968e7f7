#include "launch/supervise/attempt.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "launch/supervise/heartbeat_watch.h"
#include "launch/supervise/line_stream.h"
#include "parallel/health/comm_error.h"
#include "parallel/health/heartbeat.h"

namespace brt::launch {

using Clock = std::chrono::steady_clock;

void say(const std::string& text) {
  const std::string line = "brt-dist launch: " + text + "\n";
  const ssize_t n = ::write(2, line.data(), line.size());
  (void)n;
}

namespace {

// The launcher, started in a process group of its own (the supervisor signals the group), its
// stdout and stderr into the pipes, its stdin /dev/null when ours is a terminal (a background
// group reading the terminal would be stopped by SIGTTIN), SIGTERM if the supervisor dies.
pid_t start_launcher(const std::vector<std::string>& command, const std::vector<std::pair<std::string, std::string>>& env,
                     int out_write, int err_write, const SignalSetup& setup) {
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
  ::dup2(out_write, 1);
  ::dup2(err_write, 2);
  if (::isatty(0)) {
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
  }
  const int taken[4] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};
  for (int k = 0; k < 4; ++k) ::sigaction(taken[k], &setup.inherited[k], nullptr);
  ::sigprocmask(SIG_SETMASK, &setup.old_mask, nullptr);
  for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  const std::string why = "brt-dist launch: cannot start " + command[0] + ": " + std::strerror(errno) + "\n";
  const ssize_t n = ::write(2, why.data(), why.size());
  (void)n;
  ::_exit(127);
}

// One attempt's state: the launcher, its streams, the watch, and the decisions taken.
struct Attempt {
  Attempt(const SupervisorOptions& o, const std::function<void(const AttemptResult&)>& first_step)
      : o(o), on_first_step(first_step), beats(o.heartbeat_timeout_s) {}
  const SupervisorOptions& o;
  const std::function<void(const AttemptResult&)>& on_first_step;
  AttemptResult r;
  HeartbeatWatch beats;
  pid_t child = 0;
  std::optional<int> silent_status;
  Clock::time_point end_at{}, kill_at{};
  bool ending = false, killing = false;

  // A line of either stream: its signs read; false for a heartbeat read whole (kept out).
  bool judge(const std::string& line, bool whole) {
    const auto now = Clock::now();
    const std::optional<parallel::HeartbeatReport> beat = parallel::parse_heartbeat(line);
    if (beat) beats.beat(*beat, now);
    const bool had_abort = r.signs.abort().has_value();
    if (r.signs.line(line, now) && on_first_step) on_first_step(r);
    if (!had_abort && r.signs.abort()) end_at = now + std::chrono::milliseconds(int64_t(o.grace_s * 1000));
    return !(beat && whole && beat_alone(line));
  }

  // Whether a heartbeat line is the beat alone: the marker first, or after mpirun's
  // --tag-output tag ("[1,3]<stderr>:"). Otherwise another rank's unfinished line precedes it
  // in the merged stream, and the line goes to the log whole.
  static bool beat_alone(const std::string& line) {
    const size_t at = line.find(parallel::kHeartbeatMarker);
    if (at == 0) return true;
    const std::string prefix = line.substr(0, at);
    const size_t colon = prefix.find_last_not_of(' ');
    return prefix[0] == '[' && colon != std::string::npos && prefix[colon] == ':' &&
           prefix.find(']') != std::string::npos;
  }

  void end_group(const std::string& why) {
    if (ending) return;
    say(why + ": ending its process group (SIGTERM, SIGKILL after " + std::to_string(int(o.kill_after_s)) + " s)");
    ending = r.ended_by_us = true;
    r.decided = Clock::now();
    ::killpg(child, SIGTERM);
    kill_at = Clock::now() + std::chrono::milliseconds(int64_t(o.kill_after_s * 1000));
  }

  void on_signal(int signal) {
    const std::string name = signal == SIGINT    ? "SIGINT"
                             : signal == SIGTERM ? "SIGTERM"
                             : signal == SIGUSR1 ? "SIGUSR1"
                                                 : "SIGHUP";
    if (++r.signals == 1) {
      say(name + ": asking the ranks to stop cleanly (SIGUSR1 to " + o.command[0] +
          ", which forwards it: they save a checkpoint and exit 75); again to end the job now");
      ::kill(child, SIGUSR1);
    } else if (r.signals == 2) {
      end_group(name + " again");
    } else {
      say(name + " a third time: SIGKILL to the launcher's process group");
      ::killpg(child, SIGKILL);
    }
  }

  // Ends the job for a rank silent past the timeout (once; not while the job already ends).
  void check_heartbeats(Clock::time_point& last_check) {
    const auto now = Clock::now();
    // The supervisor itself stopped or starved (the loop turns at least once a second): the
    // ranks are not to blame for the gap.
    if (now - last_check > std::chrono::seconds(3)) beats.forgive(now);
    last_check = now;
    if (o.heartbeat_timeout_s <= 0 || ending || r.signs.abort()) return;
    if (const auto silent = beats.silent(now)) {
      silent_status = parallel::kCollectiveTimeoutExitCode;
      r.signs.blame(silent->host, silent->text, silent->last_heard);
      end_group(silent->text + "; ending the job (exit " + std::to_string(*silent_status) + ")");
    }
  }

  void check_deadlines() {
    const auto abort = r.signs.abort();
    if (abort && !ending && Clock::now() >= end_at)
      end_group(o.command[0] + " (pid " + std::to_string(child) + ") has not ended " + std::to_string(int(o.grace_s)) +
                " s after world rank " + std::to_string(abort->world_rank) + " (host " + abort->host +
                ") aborted the job (exit status " + std::to_string(abort->exit_code) + ")");
    if (ending && !killing && Clock::now() >= kill_at) {
      say(o.command[0] + " survived SIGTERM: SIGKILL to its process group");
      ::killpg(child, SIGKILL);
      killing = true;
    }
  }

  int wait_ms() const {
    const auto now = Clock::now();
    auto until = [&](Clock::time_point t) {
      return int(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count()));
    };
    int ms = 1000;
    if (r.signs.abort() && !ending) ms = std::min(ms, until(end_at));
    if (ending && !killing) ms = std::min(ms, until(kill_at));
    return ms;
  }

  int exit_status(int status) const {
    // Every rank finished (the run's end came while the job was being ended): a success.
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    if (r.ended_by_us && silent_status) return *silent_status;
    if (r.ended_by_us && r.signs.abort()) return r.signs.abort()->exit_code;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
  }
};

// Reads what is ready on `fd` into `stream`; false at its end.
bool pump(int fd, LineStream& stream) {
  char buf[65536];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0) {
    stream.feed(buf, size_t(n));
    return true;
  }
  if (n < 0 && errno == EINTR) return true;
  stream.flush_partial();
  return false;
}

// The streams until their end, at most `seconds` (a process the launcher left may hold them).
void drain(int (&fds)[2], bool (&open)[2], LineStream* (&streams)[2], double seconds) {
  const auto until = Clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
  while ((open[0] || open[1]) && Clock::now() < until) {
    pollfd p[2] = {{open[0] ? fds[0] : -1, POLLIN, 0}, {open[1] ? fds[1] : -1, POLLIN, 0}};
    if (::poll(p, 2, 100) <= 0) continue;
    for (int k = 0; k < 2; ++k)
      if (p[k].revents && !pump(fds[k], *streams[k])) open[k] = false;
  }
  for (LineStream* s : streams) s->flush_partial();
}

}  // namespace

AttemptResult run_attempt(const SupervisorOptions& o, const std::vector<std::string>& command,
                          const std::vector<std::pair<std::string, std::string>>& env, const SignalSetup& setup,
                          const std::function<void(const AttemptResult&)>& on_first_step) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("supervisor: ") + std::strerror(errno));
  Attempt a(o, on_first_step);
  LineStream out_stream(1, [&a](const std::string& line, bool whole) { return a.judge(line, whole); });
  LineStream err_stream(2, [&a](const std::string& line, bool whole) { return a.judge(line, whole); });
  a.r.started = Clock::now();
  a.child = start_launcher(command, env, out[1], err[1], setup);
  ::close(out[1]);
  ::close(err[1]);
  int fds[2] = {out[0], err[0]};
  bool open[2] = {true, true};
  LineStream* streams[2] = {&out_stream, &err_stream};
  int status = 0;
  Clock::time_point last_check = Clock::now();
  for (;;) {
    pollfd p[3] = {{setup.signals_fd, POLLIN, 0}, {open[0] ? fds[0] : -1, POLLIN, 0}, {open[1] ? fds[1] : -1, POLLIN, 0}};
    if (::poll(p, 3, a.wait_ms()) == 0)
      for (LineStream* s : streams) s->flush_partial();  // the launcher paused mid-line
    for (int k = 0; k < 2; ++k)
      if (p[k + 1].revents && !pump(fds[k], *streams[k])) open[k] = false;
    a.check_heartbeats(last_check);
    if (p[0].revents & POLLIN) {
      signalfd_siginfo info{};
      if (::read(setup.signals_fd, &info, sizeof info) == ssize_t(sizeof info) && int(info.ssi_signo) != SIGCHLD)
        a.on_signal(int(info.ssi_signo));
    }
    if (::waitpid(a.child, &status, WNOHANG) == a.child) break;
    a.check_deadlines();
  }
  if (!a.r.ended_by_us) a.r.decided = Clock::now();
  drain(fds, open, streams, 2.0);
  if (a.ending) ::killpg(a.child, SIGKILL);  // whatever of the group outlived the launcher
  ::close(fds[0]);
  ::close(fds[1]);
  a.r.gone = Clock::now();
  a.r.status = a.exit_status(status);
  return std::move(a.r);
}

}  // namespace brt::launch
