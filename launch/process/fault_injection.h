// Faults the fault suite injects at exact points (tests/faults, docs/reliability.md), chosen by
// the environment variable BRT_FAULT_INJECT; unset, nothing happens. Items separated by ';',
// each an action and its place separated by '@':
//   kill@checkpoint save: renaming          SIGKILL when that phase begins (prefix match)
//   stop@checkpoint save: writing /model/embed@rank=1     SIGSTOP world rank 1 there
//   kill@checkpoint save: writing@nth=3     the third time such a phase begins
//   nonfinite@step=5                        step 5's loss and a gradient become NaN
//   nangrad@step=5                          a gradient of step 5 becomes NaN, its loss stays finite
//                                           (what the enqueued update's own check must catch)
//   gradspike@step=9                        step 9's gradients are scaled by 1000
//   stop@step=4@rank=1                      SIGSTOP world rank 1 as step 4 begins
//   throw@step=4@rank=1                     an exception on world rank 1 only (a fatal error)
//   segv@step=3                             a real segmentation fault (a store to address 0)
//   abort@checkpoint save: writing          std::abort() there (a failed assertion)
//   terminate@step=3                        an exception no one catches (leaving a noexcept call)
//   mpierror@step=3                         an MPI call on MPI_COMM_WORLD with an invalid rank
//                                           (the raw MPI error of a broken job)
// The last four test the crash report (launch/cli/crash_report.h).
//   pause@step=5@rank=0@ms=2000             this rank sleeps 2 s there, after printing its line:
//                                           the window in which tests/cluster cuts a link
//                                           "during a step" or "during a save"
//   kill@step=4@rank=1@attempt=1            only in brt-dist launch's first attempt (BRT_LAUNCH_ATTEMPT):
//                                           a restart's relaunch trains past it
//   wrongblas@rank=1                        world rank 1's BLAS self-check reports wrong results
//                                           (launch/preflight/numerics_agreement.h); every rank
//                                           without @rank
// Steps count from 1 as the progress lines do. Every injection prints one line on stderr.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace brt::launch {

class FaultInjection {
 public:
  // Parses BRT_FAULT_INJECT (an empty spec injects nothing). Throws std::invalid_argument
  // naming the item it cannot read.
  static FaultInjection from_environment();
  // `attempt`: brt-dist launch's attempt (BRT_LAUNCH_ATTEMPT, 1 without it); an item with
  // @attempt=N is injected in attempt N only.
  explicit FaultInjection(const std::string& spec = "", int attempt = 1);
  FaultInjection(const FaultInjection& other);
  FaultInjection& operator=(const FaultInjection& other);

  // Called as a phase begins ("checkpoint save: writing /model/embed"): may kill or stop.
  void at_phase(const std::string& phase, int world_rank) const;
  // Called as step `step` (from 1) begins: may stop or kill.
  void at_step(int64_t step, int world_rank) const;
  bool nonfinite_at(int64_t step) const { return nonfinite_steps_.count(step) != 0; }
  bool nan_grad_at(int64_t step) const { return nan_grad_steps_.count(step) != 0; }
  // Whether some step's gradients are poisoned after its backward (nonfinite, nangrad).
  bool poisons_steps() const { return !nonfinite_steps_.empty() || !nan_grad_steps_.empty(); }
  bool grad_spike_at(int64_t step) const { return grad_spike_steps_.count(step) != 0; }
  bool wrong_blas_on(int world_rank) const {
    return wrong_blas_ranks_.count(-1) != 0 || wrong_blas_ranks_.count(world_rank) != 0;
  }

 private:
  struct Fault {
    std::string action;  // "kill" | "stop" | "throw" | "segv" | "abort" | "terminate" | "mpierror"
    std::string phase;   // prefix of the phase text; empty for a step fault
    int64_t step = 0;
    int rank = -1;       // -1: every rank
    int nth = 1;
    int64_t ms = 0;      // pause: how long
  };
  void fire(const Fault& fault, const std::string& where, int world_rank) const;
  static void crash(const std::string& action);
  std::vector<Fault> faults_;
  std::set<int64_t> nonfinite_steps_, nan_grad_steps_, grad_spike_steps_;
  std::set<int> wrong_blas_ranks_;
  mutable std::mutex mutex_;
  mutable std::vector<int> hits_;  // per fault: how often its place was reached
};

}  // namespace brt::launch
