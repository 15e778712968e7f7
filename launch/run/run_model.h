// The spine of a run (docs/architecture.md, "The spine"): what one rank needs to compute,
// communicate and update its model — the backend (where every buffer lives), the device
// communicators over the tp, cp and dp groups (NCCL on the GPU) with their DeviceWaitWatch,
// the tensor- and context-parallel contexts, the model, and for training the optimizer with
// its kernels and TP statistics reducer and the data parallelism — built once, in one order,
// from a resolved config. `brt-dist train`, `eval` and `generate` and the benchmarks build
// this; nothing else assembles the set.
//
// The order is the one that keeps runs bit-identical and collectives matched across ranks:
// device settings checked, backend, TP context (NCCL over the tp group, collective), CP
// context (this rank's chunk of each segment; NCCL over the cp group, collective), model,
// parameters initialised, their count checked against model.md §9, then for training the dp
// group's NCCL communicator (collective; under context parallelism the dp_cp group spans DP x CP,
// parallel/layout.h) and DataParallel (its backward hook), the watch of the device
// communicators, the optimizer (ZeRO-1: the parameters this rank owns) and this rank's memory
// report, whose optimizer state is checked against model.md §10c.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/data_parallel.h"
#include "core/model.h"
#include "core/optim/optimizer.h"
#include "core/sharding/tensor_parallel.h"
#include "kernels/backend.h"
#include "kernels/optimizer_kernels.h"
#include "launch/config/config.h"
#include "parallel/communicator.h"

namespace brt::parallel {
class ProcessGroups;
}

namespace brt::launch {

class DeviceWaitWatch;

// Where this rank's model runs.
struct RunPlace {
  // The run's process groups (launch/run/run_groups.h); null: one process, no MPI needed.
  const parallel::ProcessGroups* groups = nullptr;
  // The CUDA device this rank is bound to (launch/run/gpu_binding.h); -1: none. Used when
  // train.device = "cuda" (launch/run/device_backend.h).
  int gpu_device = -1;
  int world_rank() const;
};

// What to build.
struct RunModelOptions {
  int streams = 1;          // B: streams per rank
  bool training = true;     // the optimizer and data parallelism (eval, generate: the model alone)
  bool initialize = true;   // parameters drawn from `seed` (eval and generate load theirs)
  uint64_t seed = 1;
  // A training run of `cfg`: train.batch streams, parameters from train.seed.
  static RunModelOptions train(const RunConfig& cfg);
  // Evaluation or generation at `streams` streams: the model alone, its parameters loaded after.
  static RunModelOptions inference(int streams);
};

template <typename T>
class RunModel {
 public:
  // Collective over place.groups' tp group (and dp_cp group when training) on the GPU. Throws
  // naming the key on a bad device setting, std::logic_error on a model that declares other
  // parameters than model.md §9's or an optimizer with other state than model.md §10c's.
  RunModel(const RunConfig& cfg, const RunPlace& place, const RunModelOptions& options);
  ~RunModel();
  RunModel(const RunModel&) = delete;
  RunModel& operator=(const RunModel&) = delete;

  kernels::Backend<T>& backend() { return *backend_; }
  const core::TensorParallel& tp() const { return tp_; }
  const core::ContextParallel& cp() const { return cp_; }
  core::Model<T>& model() { return *model_; }
  const core::Model<T>& model() const { return *model_; }
  // Training only (std::logic_error otherwise).
  core::Optimizer<T>& optimizer();
  // Data parallelism over place.groups' dp_cp group; null: one process, or not training.
  core::DataParallel<T>* data_parallel() { return data_parallel_.get(); }
  const core::DataParallel<T>* data_parallel() const { return data_parallel_.get(); }
  int dp_cp_rank() const { return data_parallel_ ? data_parallel_->rank() : 0; }
  int dp_cp_size() const { return data_parallel_ ? data_parallel_->size() : 1; }
  // The streams this rank reads (data_rank of data_size): the dp_cp group's without context
  // parallelism; under CP the cp ranks of a segment share them (parallel/layout.h).
  int data_rank() const { return data_rank_; }
  int data_size() const { return data_size_; }
  // The parameters this rank's optimizer updates (empty: all; ZeRO-1 shards them).
  const std::vector<bool>& owned_mask() const;
  bool on_gpu() const { return on_gpu_; }

  // Parameters the model declares, by their full logical shapes (under TP each rank holds its
  // slices of them): equal to model.md §9's count.
  int64_t parameters() const { return parameters_; }
  // This rank's memory as allocated (the optimizer's state checked against model.md §10c; zero
  // without an optimizer): what the trainer prints and `brt-dist plan` predicts.
  const core::DpMemoryReport& memory() const { return memory_; }

 private:
  void check_parameters();
  void build_data_parallel(const RunConfig& cfg, const parallel::ProcessGroups& groups);
  void build_optimizer(const RunConfig& cfg);

  bool on_gpu_ = false;
  std::unique_ptr<kernels::Backend<T>> backend_;
  // NCCL over the tp and dp groups (cuda, TP > 1 / DP > 1); they outlive what uses them.
  std::unique_ptr<parallel::Communicator> device_tp_, device_dp_cp_, device_cp_;
  core::TensorParallel tp_;
  core::ContextParallel cp_;
  int data_rank_ = 0, data_size_ = 1;
  std::unique_ptr<core::Model<T>> model_;
  std::unique_ptr<core::DataParallel<T>> data_parallel_;
  std::unique_ptr<DeviceWaitWatch> device_waits_;  // after the communicators it watches
  std::unique_ptr<kernels::OptimizerKernels<T>> optimizer_kernels_;
  std::unique_ptr<core::Optimizer<T>> optimizer_;
  std::unique_ptr<core::TensorParallelStatReducer<T>> tp_reducer_;
  int64_t parameters_ = 0;
  core::DpMemoryReport memory_;
};

}  // namespace brt::launch
