// What one training step did, as the trainer's components (launch/train/train_components.h) and
// the run's checkpoints (launch/train/checkpoint/run_checkpoints.h) see it.
#pragma once

#include <cstdint>

#include "core/model.h"
#include "core/optim/optimizer.h"
#include "launch/train/run_position.h"
#include "launch/train/step_guard.h"

namespace brt::launch {

// What one step did (Trainer::step).
struct StepOutcome {
  bool skipped_batch = false;   // rolled back past it (train.rollback): no forward
  StepVerdict verdict = StepVerdict::kApply;
  double loss = 0;              // mean nats per target of the global batch; NaN: never computed
  double grad_norm = 0;         // global, before clipping
  core::LossSums sums;          // global
  core::StepStats stats;        // the optimizer's, when applied
  bool applied() const { return !skipped_batch && verdict == StepVerdict::kApply; }
};

// A step as the components see it.
struct StepEnd {
  int64_t number = 0;       // the step just run, from 1 (as the progress lines count)
  bool last = false;        // number == train.steps
  StepOutcome outcome;
  double seconds = 0;       // its wall time, the device work it queued included
  RunPosition position;     // where the run stands after it
  bool stopping = false;    // set by StopComponent: the run stops after this step
};

}  // namespace brt::launch
