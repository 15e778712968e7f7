// One run of the launcher under the supervisor (launch/supervise/supervisor.h): started in a
// process group of its own with the supervisor's variables set, its stdout and stderr copied
// to the supervisor's through LineStreams (the heartbeats taken out), the signs in its lines
// read (launch/supervise/job_signs.h); an abort report's grace, a silent rank and the
// supervisor's signals acted on; the result and what it saw returned when the launcher ends.
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "launch/supervise/job_signs.h"
#include "launch/supervise/supervisor.h"

namespace brt::launch {

// What every attempt shares: the supervisor's signal handling, set up once.
struct SignalSetup {
  int signals_fd = -1;  // signalfd of SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGCHLD
  sigset_t old_mask{};
  struct sigaction inherited[4]{};  // SIGINT, SIGTERM, SIGHUP, SIGUSR1 as the supervisor found them
};

struct AttemptResult {
  using Clock = std::chrono::steady_clock;
  int status = 0;             // the launcher's, or the abort report's / 124 when we ended it
  int signals = 0;            // the supervisor's own SIGINT/SIGTERM/SIGHUP/SIGUSR1 during the attempt
  bool ended_by_us = false;
  JobSigns signs;             // what its lines said
  Clock::time_point started{}, decided{}, gone{};  // launch; the fault known; the launcher gone
};

// Runs `command` with `env` set (NAME, VALUE); `on_first_step` is called as the first new
// step's line arrives (a restart's "training again").
AttemptResult run_attempt(const SupervisorOptions& o, const std::vector<std::string>& command,
                          const std::vector<std::pair<std::string, std::string>>& env, const SignalSetup& setup,
                          const std::function<void(const AttemptResult&)>& on_first_step);

// "brt-dist launch: TEXT" on the supervisor's stderr, one write.
void say(const std::string& text);

}  // namespace brt::launch
