// The Trainer's scheduled components (launch/train/trainer.h; docs/architecture.md, "One
// training step"): what happens around the step, each with its own schedule. After every step
// the trainer calls each component's on_step(); when the step guard gives up it rolls back and
// calls on_rollback() instead of the rest; otherwise on_step_end() in this order:
//   ProgressComponent     the metric window: a progress line and a "train" record every
//                         log.every steps, at the first step and at the last
//   EvalComponent         the held-out loss every train.eval_every steps
//   StopComponent         a stop signal (Ctrl-C, SIGTERM, SIGUSR1) seen by any rank stops all
//   CheckpointComponent   a save when one is due (launch/train/checkpoint/run_checkpoints.h)
// Every message, event and record they write is the one `brt-dist train` always wrote.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/flops.h"
#include "core/model.h"
#include "core/optim/optimizer.h"
#include "launch/config/config.h"
#include "launch/feed/batch_source.h"
#include "launch/run/run_model.h"
#include "launch/train/metrics_log.h"
#include "launch/train/mfu.h"
#include "launch/train/step_end.h"
#include "launch/train/checkpoint/run_checkpoints.h"
#include "launch/train/step_guard.h"
#include "launch/train/checkpoint/training_checkpoint.h"

namespace brt::launch {

class TrainComponent {
 public:
  virtual ~TrainComponent() = default;
  // Every step, before the step guard may roll the run back.
  virtual void on_step(const StepEnd&) {}
  // The run was rolled back and goes on from `position` (a reloaded checkpoint).
  virtual void on_rollback(const RunPosition&) {}
  // A step that stands, in the schedule's order.
  virtual void on_step_end(StepEnd& end) = 0;
};

// Progress lines and "train" records: the window of steps since the last line (loss of its
// applied steps, tokens/s, achieved GFLOP/s and MFU against the peak), the optimizer's last
// learning rate and gradient norm, the ETA.
class ProgressComponent : public TrainComponent {
 public:
  ProgressComponent(const RunConfig& cfg, MetricsLog& log, MfuPeak& peak, const core::FlopBreakdown& flops,
                    double tokens_per_step, int ranks, const StepGuard& guard, int64_t first_step);
  void on_step(const StepEnd& end) override;
  void on_rollback(const RunPosition& position) override;
  void on_step_end(StepEnd& end) override;
  bool due(const StepEnd& end) const;  // log.every, the first step of the run (or since a rollback), the last

 private:
  const RunConfig& cfg_;
  MetricsLog& log_;
  MfuPeak& peak_;
  double training_flops_per_token_, tokens_per_step_;
  int ranks_;  // every rank of the job: the MFU denominator counts each one's peak
  const StepGuard& guard_;
  int64_t first_step_;
  core::LossSums window_sums_;
  double skipped_loss_ = 0;  // the last skipped step's loss: a window of only skipped steps shows it
  double skipped_grad_norm_ = 0;  // and its gradient norm (not the last applied step's)
  double window_seconds_ = 0, total_seconds_ = 0;
  int64_t window_steps_ = 0;
  core::StepStats stats_;  // the last applied step's
};

// The held-out loss every train.eval_every steps: train.eval_batches batches (8 when 0 on
// synthetic data), or with shards and train.eval_batches = 0 the whole split
// (launch/eval/evaluator.h). The model's carried training state is saved and restored around it.
template <typename T>
class EvalComponent : public TrainComponent {
 public:
  // `source`: the held-out stream (null: no evaluation, train.eval_every = 0).
  EvalComponent(const RunConfig& cfg, RunModel<T>& run, std::unique_ptr<BatchSource> source, MetricsLog& log);
  void on_step_end(StepEnd& end) override;
  // Every train.eval_every steps, and at the last step whatever it is (a run always ends evaluated).
  bool due(const StepEnd& end) const { return source_ && (end.number % cfg_.train.eval_every == 0 || end.last); }
  double held_out_loss();

 private:
  const RunConfig& cfg_;
  RunModel<T>& run_;
  std::unique_ptr<BatchSource> source_;
  MetricsLog& log_;
};

// A stop signal on any rank stops every rank at this step boundary (collective over DP).
template <typename T>
class StopComponent : public TrainComponent {
 public:
  explicit StopComponent(RunModel<T>& run) : run_(run) {}
  void on_step_end(StepEnd& end) override;

 private:
  RunModel<T>& run_;
};

// Checkpoints on their schedule (checkpoint.every, the last step, a stop), confirmed by the
// steps applied after them (RunCheckpoints::after_step).
template <typename T>
class CheckpointComponent : public TrainComponent {
 public:
  explicit CheckpointComponent(RunCheckpoints<T>& checkpoints) : checkpoints_(checkpoints) {}
  void on_step_end(StepEnd& end) override { checkpoints_.after_step(end); }

 private:
  RunCheckpoints<T>& checkpoints_;
};

}  // namespace brt::launch
