// The non-finite and spike guard of the step loop (docs/reliability.md).
//
// After backward, before the optimizer: a step whose loss or global gradient norm is not
// finite is skipped (no update; the carried state it produced is reset at the next step, as at
// a document boundary, since it came from the same bad forward). Optionally, as llm.c's -sl/-sg,
// a step whose loss or gradient norm lies more than skip_loss_z / skip_grad_z standard
// deviations above the mean of the last kWindow applied steps is skipped too (its carried state
// is kept: it is finite). After max_skipped_steps consecutive skips the run stops, or rolls
// back to the last good checkpoint and from then on skips the batches of those steps.
// Everything here is saved in checkpoints, so resume stays bit-exact with skips in the history.
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace brt::launch {

enum class StepVerdict { kApply, kSkipNonFinite, kSkipLossSpike, kSkipGradSpike };
const char* verdict_reason(StepVerdict v);  // "non-finite loss or gradient norm", ...

struct StepGuardSettings {
  int max_skipped_steps = 5;
  double skip_loss_z = 0;  // 0: off
  double skip_grad_z = 0;
};

// A running window of the last kWindow values, for z-scores.
class ZWindow {
 public:
  static constexpr int kWindow = 128;
  static constexpr int kMinHistory = 32;  // no z-score before this many values
  // (x - mean) / std over the window; 0 while there is too little history or std is 0.
  double z(double x) const;
  void push(double x);
  int count() const { return count_; }
  // Checkpoint form: count, position, then the kWindow values.
  void save(std::vector<int64_t>& ints, std::vector<double>& doubles) const;
  void restore(const int64_t* ints, const double* doubles);

 private:
  std::array<double, kWindow> values_{};
  int count_ = 0, position_ = 0;
};

class StepGuard {
 public:
  explicit StepGuard(StepGuardSettings settings = {}) : settings_(settings) {}

  // The verdict on step `step` (from 1) with this global loss and gradient norm; updates the
  // counters and, for an applied step, the windows.
  StepVerdict judge(int64_t step, double loss, double grad_norm);
  bool exhausted() const { return consecutive_ >= settings_.max_skipped_steps; }
  int consecutive_skips() const { return consecutive_; }
  int64_t total_skipped() const { return total_skipped_; }
  // The steps of the current run of consecutive skips (what a rollback skips from then on).
  const std::vector<int64_t>& recent_skips() const { return recent_; }

  // Reset the carried state at the next step (after a non-finite step or a skipped batch).
  bool take_reset() {
    const bool r = reset_pending_;
    reset_pending_ = false;
    return r;
  }
  void request_reset() { reset_pending_ = true; }

  // Rollback: batches whose steps are skipped whole (no forward) from now on.
  void add_skip_batches(const std::vector<int64_t>& steps) { skip_batches_.insert(steps.begin(), steps.end()); }
  bool skips_batch(int64_t step) const { return skip_batches_.count(step) != 0; }
  // A step skipped whole (rollback): counts as skipped, not toward the consecutive limit.
  void note_skipped_batch() { ++total_skipped_; }
  int rollbacks() const { return rollbacks_; }
  void note_rollback() {
    ++rollbacks_;
    consecutive_ = 0;
    recent_.clear();
  }

  // Checkpoint form (training_checkpoint.cpp: /data/guard_counters, /data/guard_windows,
  // /data/skip_batches).
  std::vector<int64_t> counters() const;
  std::vector<double> windows() const;
  std::vector<int64_t> skip_batches() const { return {skip_batches_.begin(), skip_batches_.end()}; }
  // Throws std::invalid_argument if the arrays have the wrong size (a damaged or foreign file).
  void restore(const std::vector<int64_t>& counters, const std::vector<double>& windows,
               const std::vector<int64_t>& skip_batches);

 private:
  StepGuardSettings settings_;
  ZWindow loss_, grad_;
  int consecutive_ = 0;
  int64_t total_skipped_ = 0;
  bool reset_pending_ = false;
  int rollbacks_ = 0;
  std::vector<int64_t> recent_;
  std::set<int64_t> skip_batches_;
};

}  // namespace brt::launch
