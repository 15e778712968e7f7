// In-job restart (`brt-dist launch --restarts N`, docs/reliability.md "In-job restart"): after a
// fault ends an attempt, the supervisor checks the hosts (launch/supervise/host_check.h), writes
// the next host list without the host the fault was on (a spare in its place: --spare-hosts),
// and relaunches the same command, which resumes from the newest good checkpoint of its
// checkpoint.dir (launch/train/checkpoint/resume.h). Bounded: at most N restarts, then exit 75
// (a requeue may continue); K restarts in a row without a newer checkpoint, exit 93 (do not
// requeue: the fault repeats). Every decision is one line in the log and one JSONL record
// (--restart-log): the fault and its host, and the seconds of each phase from its first sign to
// the first new step (detect, teardown, checks, relaunch and load, first step).
#pragma once

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "launch/supervise/attempt.h"
#include "launch/supervise/host_check.h"
#include "launch/supervise/host_list.h"

namespace brt::launch {

inline constexpr int kRestartsExhaustedExitCode = 75;  // as a clean stop: the scheduler may requeue
inline constexpr int kNoRequeueExitCode = 93;          // NVIDIA's resiliency extension's "do not requeue"
// The attempt's number (1, 2, ...) in every rank's environment (forwarded like the heartbeat's).
inline constexpr const char* kAttemptEnv = "BRT_LAUNCH_ATTEMPT";

// Whether an attempt's status is a fault to restart after: not success (0), a usage error or
// refused start (2), a clean stop (75) or a second Ctrl-C (130).
bool is_fault(int status);

class Restarter {
 public:
  using Clock = std::chrono::steady_clock;
  Restarter(const RestartOptions& options, std::vector<std::string> command);
  ~Restarter();
  Restarter(const Restarter&) = delete;
  Restarter& operator=(const Restarter&) = delete;

  const std::vector<std::string>& command() const { return command_; }
  int attempt() const { return attempt_; }
  // After a faulty attempt: nullopt to relaunch (command() is the next one), or the exit status.
  std::optional<int> after_fault(const AttemptResult& result);
  // The relaunched attempt trains again (its first new step): the restart's timings.
  void training_again(const AttemptResult& result);
  // The attempt ended: a restart still pending (no new step came) is recorded as such.
  void attempt_ended(const AttemptResult& result);

 private:
  struct Pending;  // the restart whose first new step is awaited
  // The next host list after `result`'s fault (command_ rewritten), checking every host.
  struct NextHosts {
    bool rewritten = false;  // the command had a host list
    std::string hosts;       // its new value
    std::string refused;     // why no list can be made (a failed host without a spare)
  };
  NextHosts next_hosts(const AttemptResult& result, std::vector<std::string>& excluded, double& checks_s);
  NextHosts srun_next(const AttemptResult& result, std::vector<std::string>& excluded, double& checks_s);
  using HostCheck = HostHealth (*)(const std::string&, const std::string&, double);
  std::set<std::string> healthy_of(const std::vector<std::string>& names, HostCheck check, double& checks_s) const;
  std::set<std::string> healthy_hosts(const std::vector<HostSlots>& hosts, double& checks_s) const;
  const HostSlots* free_spare(const std::vector<HostSlots>& hosts, const std::set<std::string>& healthy) const;
  // `nodes`: srun's new node count (0 for mpirun).
  std::string shrink(int dropped, int nodes);
  std::optional<int> give_up(int status, const std::string& why, const AttemptResult& result);
  void record(const std::string& json);

  RestartOptions options_;
  std::vector<std::string> command_;
  std::string checkpoint_dir_;
  int ranks_ = 0;  // the launch's ranks now (--min-dp)
  int attempt_ = 1, restarts_done_ = 0, no_progress_ = 0;
  int64_t best_step_ = -1;
  std::vector<std::string> used_spares_;
  std::set<std::string> excluded_nodes_;  // srun: every node left out so far
  std::unique_ptr<Pending> pending_;
  std::FILE* log_ = nullptr;
};

}  // namespace brt::launch
