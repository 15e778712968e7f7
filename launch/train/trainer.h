// `brt-dist train` (docs/architecture.md, "One training step"): a Trainer owns the run's spine
// (RunModel: backend, device groups, tensor and data parallelism, model, optimizer), its data,
// metrics log, checkpoints and step guard, and runs the loop: step() — forward, backward, the
// step guard's verdict, the optimizer's update — then the scheduled components
// (launch/train/train_components.h: progress, evaluation, stop, checkpoints), or a rollback
// when the step guard gives up.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/flops.h"
#include "data/batch.h"
#include "launch/config/config.h"
#include "launch/feed/batch_source.h"
#include "launch/process/fault_injection.h"
#include "launch/run/run_model.h"
#include "launch/run/threads.h"
#include "launch/train/grad_accum.h"
#include "launch/train/metrics_log.h"
#include "launch/train/mfu.h"
#include "launch/train/checkpoint/run_checkpoints.h"
#include "launch/train/step_graphs.h"
#include "launch/train/step_guard.h"
#include "launch/train/train_components.h"
#include "launch/train/checkpoint/training_checkpoint.h"

namespace brt::parallel {
class ProcessGroups;
class JobMonitor;
}

namespace brt::launch {

struct TrainOptions {
  RunConfig config;
  std::string config_path;  // for messages
  bool quiet = false;  // no progress lines (tests)
  // The run's process groups (launch/run/run_groups.h); null = one process, no MPI needed.
  // Only world rank 0 prints and writes the metrics file.
  const parallel::ProcessGroups* groups = nullptr;
  // The CUDA device this rank is bound to (launch/run/gpu_binding.h); -1: none. Used when
  // train.device = "cuda" (launch/run/device_backend.h).
  int gpu_device = -1;
  // The process's watchdog (parallel/health/job_monitor.h): checkpoint saves and loads run under its
  // deadline, phase by phase. Null: no deadline (tests).
  parallel::JobMonitor* monitor = nullptr;
  FaultInjection faults;  // the fault suite's injection points (tests/faults)
  // OpenMP threads per rank (launch/run/threads.h); threads = 0: chosen for this process alone.
  ThreadChoice threads{0, ""};
  // The job's numerics record (launch/preflight/numerics_agreement.h), kept in every checkpoint
  // and compared on resume; "" = not recorded.
  std::string numerics_record;
};

struct TrainResult {
  int64_t steps_done = 0;
  double last_loss = 0;   // mean nats/target of the last step
  std::vector<double> losses;  // every step's loss (for tests and determinism checks)
  std::vector<double> grad_norms;  // and gradient norm (global, before clipping), applied steps
  bool stopped_by_signal = false;
  int64_t skipped_steps = 0;   // steps the guard skipped (launch/train/step_guard.h)
  // CUDA graphs (train.cuda_graph, launch/train/step_graphs.h): steps replayed or captured.
  int64_t graph_steps = 0;
};

// Returns the result; throws with a clear message on bad input (config, data, checkpoint).
// fp64 (the CPU reference) trains in double, fp32 and bf16 in float (fp32 master weights).
TrainResult run_training(const TrainOptions& options);

template <typename T>
class Trainer {
 public:
  // Builds the run (prints its start-up lines on the printing rank) and finds where it starts:
  // the newest good checkpoint, a given one, or step 0 (checkpoint.init_from's weights).
  explicit Trainer(const TrainOptions& options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // The loop from where the run starts to train.steps, or a stop signal.
  TrainResult train();
  // One step on `batch` (step `number`, from 1): forward and backward (from a CUDA graph when
  // there is one), the step guard's verdict on the global loss and gradient norm, and the
  // optimizer's update when it applies. A batch the run rolled back past is skipped whole.
  // `batch` holds this rank's train.batch x train.grad_accum streams, one micro-step per group
  // of train.batch (launch/train/grad_accum.h).
  StepOutcome step(int64_t number, data::Batch& batch);

 private:
  std::string graphs_setting();
  void print_start();
  void start();
  void open_metrics();
  StepEnd run_step(int64_t number);
  core::LossSums forward_backward(int64_t number, const data::Batch& batch, int64_t count);
  double micro_step(const data::Batch& batch, T grad_scale, bool reduce);
  void skip_step(int64_t number, StepOutcome& outcome);
  // How a step's update is made: after the guard's verdict (kJudged), enqueued behind backward
  // (kEnqueue), or inside the step's CUDA graph (kInGraph).
  enum class UpdatePath { kJudged, kEnqueue, kInGraph };
  bool enqueues_update();
  UpdatePath update_path();
  bool judge_and_update(int64_t number, StepOutcome& out, UpdatePath path);
  void roll_back(const StepEnd& end);

  const TrainOptions& options_;
  const RunConfig& cfg_;
  const bool print_;
  const int world_rank_;
  const std::string threads_line_;  // threads applied before anything is built
  RunModel<T> run_;
  const CheckpointRanks ck_ranks_;
  std::unique_ptr<StepGraphs> graphs_;  // CUDA graphs of the step (float, cuda)
  const std::string graph_line_;
  MfuPeak peak_;
  const core::FlopBreakdown flops_;
  const double tokens_per_step_;
  std::unique_ptr<BatchSource> train_source_;
  std::unique_ptr<MetricsLog> log_;
  std::string tokenizer_hash_;
  std::unique_ptr<StreamGroupState<T>> stream_groups_;  // every micro-step group's carried state
  std::unique_ptr<RunCheckpoints<T>> checkpoints_;
  StepGuard guard_;
  RunPosition pos_;
  std::vector<std::unique_ptr<TrainComponent>> components_;  // in schedule order
  data::Batch batch_;  // this rank's streams (its chunk of each segment under context parallelism)
  data::Batch micro_;  // gradient accumulation: one micro-step's streams of batch_
  TrainResult result_;
};

}  // namespace brt::launch
