// What a training run's checkpoints save and restore, bound once when its RunCheckpoints is
// built (as torchtitan's CheckpointManager(states=...)): every save, load and rollback reads and
// fills the same objects, so no call can pass another model or data stream than the run's.
// The objects belong to the trainer and outlive its RunCheckpoints.
#pragma once

#include <string>
#include <vector>

#include "core/model.h"
#include "core/optim/optimizer.h"
#include "launch/config/config.h"
#include "launch/feed/batch_source.h"
#include "launch/train/metrics_log.h"
#include "launch/train/step_guard.h"

namespace brt::launch {

// The carried state a checkpoint holds under /state: empty = the model's own (B streams per
// rank); gradient accumulation passes every stream group's ([train.grad_accum·B, ...],
// launch/train/grad_accum.h), the layout of train.batch = grad_accum·B.
template <typename T>
using CarriedTensors = std::vector<core::TensorRef<T>>;

template <typename T>
struct TrainState {
  const RunConfig& config;  // the resolved config: saved with the run, checked on load
  core::Model<T>& model;
  core::Optimizer<T>& optimizer;
  BatchSource& data;  // the training stream: its cursor is saved and restored
  // The step guard's skip counters, z-score windows and batches to skip travel with the run.
  StepGuard& guard;
  // The training data's tokenizer: saved, and a checkpoint of another tokenizer is refused.
  const std::string& tokenizer_hash;
  // Where saves, confirmations and refusals are recorded. The log is opened after the start (a
  // resume decides the run's metrics id), so it is null until RunCheckpoints::set_metrics_log.
  MetricsLog* log = nullptr;
  // Every stream group's carried state under gradient accumulation; empty: the model's own.
  CarriedTensors<T> carried{};

  const CarriedTensors<T>* carried_or_null() const { return carried.empty() ? nullptr : &carried; }
};

}  // namespace brt::launch
