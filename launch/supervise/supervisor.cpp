#include "launch/supervise/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "launch/supervise/attempt.h"
#include "launch/supervise/heartbeat_watch.h"
#include "launch/supervise/host_list.h"
#include "launch/supervise/restarts.h"
#include "parallel/health/comm_error.h"
#include "parallel/health/heartbeat.h"

namespace brt::launch {

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

namespace {

// The supervisor takes SIGINT, SIGTERM and SIGHUP through a signalfd for as long as it runs
// (a shell starts a background job with SIGINT ignored, and an ignored signal never reaches a
// signalfd: the supervisor resets them to the default; the launcher gets back what it inherited).
class SignalScope {
 public:
  SignalScope() {
    sigset_t handled;
    sigemptyset(&handled);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGCHLD}) sigaddset(&handled, s);
    for (int k = 0; k < kSignals; ++k) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(kTaken[k], &dfl, &setup_.inherited[k]);
    }
    ::sigprocmask(SIG_BLOCK, &handled, &setup_.old_mask);
    setup_.signals_fd = ::signalfd(-1, &handled, SFD_CLOEXEC);
    if (setup_.signals_fd < 0) throw std::runtime_error(std::string("supervisor: signalfd: ") + std::strerror(errno));
  }
  ~SignalScope() {
    ::close(setup_.signals_fd);
    ::sigprocmask(SIG_SETMASK, &setup_.old_mask, nullptr);
    for (int k = 0; k < kSignals; ++k) ::sigaction(kTaken[k], &setup_.inherited[k], nullptr);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;
  const SignalSetup& setup() const { return setup_; }

 private:
  static constexpr int kSignals = 4;
  static constexpr int kTaken[kSignals] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};
  SignalSetup setup_;
};

}  // namespace

int supervise(const SupervisorOptions& o) {
  if (o.command.empty()) throw std::invalid_argument("no launcher command");
  SignalScope signals;
  std::vector<std::string> command = o.command;
  std::vector<std::pair<std::string, std::string>> env;
  if (o.heartbeat_timeout_s > 0) {
    std::string note;
    command = with_variable_forwarded(o.command, parallel::kHeartbeatEnv, note);
    if (!note.empty()) say("heartbeats: " + note);
    env.emplace_back(parallel::kHeartbeatEnv, std::to_string(heartbeat_interval_for(o.heartbeat_timeout_s)));
  }
  if (o.restart.restarts > 0) {
    std::string note;
    command = with_variable_forwarded(command, kAttemptEnv, note);
  }
  Restarter restarter(o.restart, command);
  env.emplace_back(kAttemptEnv, "1");
  for (;;) {
    env.back().second = std::to_string(restarter.attempt());
    const AttemptResult r = run_attempt(o, restarter.command(), env, signals.setup(),
                                        [&restarter](const AttemptResult& a) { restarter.training_again(a); });
    // The operator's own stop (a signal to the supervisor) is never undone by a restart.
    if (o.restart.restarts == 0 || r.signals > 0 || !is_fault(r.status)) {
      restarter.attempt_ended(r);
      return r.status;
    }
    if (const std::optional<int> status = restarter.after_fault(r)) return *status;
  }
}

}  // namespace brt::launch
