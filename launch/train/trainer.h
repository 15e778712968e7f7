// `brt-dist train`: build the model, optimizer and data for a RunConfig and run the step loop
// (forward, backward, optimizer), logging progress, evaluating and checkpointing on schedule.
#pragma once

#include "launch/config.h"
#include "launch/fault_injection.h"
#include "launch/threads.h"

namespace brt::parallel {
class ProcessGroups;
class JobMonitor;
}

namespace brt::launch {

struct TrainOptions {
  RunConfig config;
  std::string config_path;  // for messages
  bool quiet = false;  // no progress lines (tests)
  // The run's process groups (launch/data_parallel.h); null = one process, no MPI needed.
  // Only world rank 0 prints and writes the metrics file.
  const parallel::ProcessGroups* groups = nullptr;
  // The CUDA device this rank is bound to (launch/gpu_binding.h); -1: none. Used when
  // train.device = "cuda" (launch/device_backend.h).
  int gpu_device = -1;
  // The process's watchdog (parallel/job_monitor.h): checkpoint saves and loads run under its
  // deadline, phase by phase. Null: no deadline (tests).
  parallel::JobMonitor* monitor = nullptr;
  FaultInjection faults;  // the fault suite's injection points (tests/faults)
  // OpenMP threads per rank (launch/threads.h); threads = 0: chosen for this process alone.
  ThreadChoice threads{0, ""};
};

struct TrainResult {
  int64_t steps_done = 0;
  double last_loss = 0;   // mean nats/target of the last step
  std::vector<double> losses;  // every step's loss (for tests and determinism checks)
  bool stopped_by_signal = false;
  int64_t skipped_steps = 0;   // steps the guard skipped (launch/step_guard.h)
  // CUDA graphs (train.cuda_graph, launch/step_graphs.h): steps replayed or captured.
  int64_t graph_steps = 0;
};

// Returns the result; throws with a clear message on bad input (config, data, checkpoint).
TrainResult run_training(const TrainOptions& options);

}  // namespace brt::launch
