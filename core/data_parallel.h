// Data parallelism for the step loop (model.md §8, §10b).
//
// Each DP rank holds B = train.batch streams, the global streams [data_rank*B, (data_rank+1)*B).
// The loss is the mean over every unmasked target of the GLOBAL batch (model.md §10b): the target
// count is all-reduced before forward and the loss gradient scaled by 1 / global count, so the
// all-reduce SUM of the ranks' gradients is the gradient of the global mean. Gradients are
// reduced in buckets started from Model's backward hook (parallel/grad_buckets.h).
//
// ZeRO-1 (train.zero = 1): the parameters are cut into DP contiguous runs of whole parameters,
// balanced by size; rank r keeps optimizer state for run r only and updates those parameters,
// then every run is broadcast from its owner. Every rank still holds the whole reduced
// gradient, so the global-norm clip is the same as without ZeRO, and the weights are bit-identical
// to plain DP (the per-parameter update does not depend on which rank computes it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/model.h"
#include "core/optim/optimizer.h"
#include "parallel/communicator.h"
#include "parallel/grad_buckets.h"

namespace brt::core {

struct DpSettings {
  bool overlap = true;     // start bucket all-reduces during backward
  double bucket_mb = 4.0;  // bucket size in MiB of gradient
  bool zero = false;       // ZeRO-1: shard optimizer state over the group's ranks (dp_cp: DP x CP)
};

// Contiguous runs of whole parameters, one per rank, balanced by element count: the cut after
// run k is the parameter boundary nearest to (k+1)/ranks of the total. Deterministic.
struct ParamPartition {
  std::vector<int> owner;                                // per parameter
  std::vector<std::pair<int64_t, int64_t>> rank_ranges;  // per rank: [begin, end) of the arena
};
ParamPartition partition_parameters(const std::vector<int64_t>& param_numels, int ranks);

// Communication time of one step, seconds (benchmark: fraction of step time).
struct DpStepTimes {
  double grads_in_hooks = 0;   // starting/testing buckets between layers
  double grads_in_finish = 0;  // after backward: waiting for the gradient all-reduce
  double other = 0;            // counts, loss, ZeRO-1 broadcast, stop flag
  double total() const { return grads_in_hooks + grads_in_finish + other; }
};

// Per-rank memory, bytes.
struct DpMemoryReport {
  int64_t parameters = 0, gradients = 0, optimizer = 0, activations = 0, carried_state = 0;
  int64_t backward_scratch = 0;
  int64_t total() const {
    return parameters + gradients + optimizer + activations + carried_state + backward_scratch;
  }
};

// Optimizer-state elements the model.md §10c rules need for the owned parameters, counted from the
// parameter shapes alone (an independent check of what the optimizer allocated).
int64_t expected_optimizer_state_elems(const core::OptimConfig& config,
                                       const std::vector<core::ParamSpec>& specs,
                                       const std::vector<bool>& owned);

// This rank's memory: the model's arenas and buffers (Model::memory_report sums the vectors'
// sizes) and the optimizer state it holds. Throws std::logic_error if the optimizer's state
// differs from expected_optimizer_state_elems for `owned` (empty = all).
template <typename T>
DpMemoryReport rank_memory_report(const core::Model<T>& model, core::Optimizer<T>& optimizer,
                                  const std::vector<bool>& owned);

template <typename T>
class DataParallel {
 public:
  // Installs the backward hook on `model`. With group.size() == 1 nothing is communicated.
  // `device_group` (optional): the same group on the device's communicator (NCCL) for the
  // gradient arena and ZeRO-1 parameter broadcasts when the model lives in device memory,
  // ordered after the backend's `stream`; `group` (MPI) then carries only host scalars.
  DataParallel(parallel::Communicator& group, core::Model<T>& model, const DpSettings& settings,
               parallel::Communicator* device_group = nullptr, parallel::Stream stream = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return group_.rank(); }
  int size() const { return group_.size(); }
  parallel::Communicator& group() const { return group_; }
  const DpSettings& settings() const { return settings_; }
  // Parameters this rank updates (empty = all: ZeRO-1 off or one rank). Pass to make_optimizer.
  const std::vector<bool>& owned_mask() const { return owned_; }
  const ParamPartition& partition() const { return partition_; }

  // Step protocol: global_count -> forward(grad_scale = 1/global) -> begin_backward ->
  // backward -> end_backward -> optimizer.step -> after_update -> global_nats.
  int64_t global_count(int64_t local_count);
  void begin_backward();
  // Gradient accumulation (train.grad_accum, launch/train/grad_accum.h): instead of
  // begin_backward before a micro-step's backward that is not the step's last. Its hooks start
  // no all-reduce, since the arena holds only part of the step's gradient; the last
  // micro-step's begin_backward .. end_backward reduces the whole sum, once per optimizer step.
  void begin_partial_backward() { partial_ = true; }
  void end_backward();
  void after_update();
  double global_nats(double local_nats);
  // True on every rank if it is true on any (a stop signal seen by one rank stops all).
  bool any(bool flag);

  // Communication times of the last step (reset by global_count).
  const DpStepTimes& times() const { return times_; }
  int buckets() const;

 private:
  parallel::Communicator& group_;
  parallel::Communicator& arena_comm_;  // gradients and parameters: group_ or the device group
  parallel::Stream stream_;
  core::Model<T>& model_;
  DpSettings settings_;
  ParamPartition partition_;
  std::vector<bool> owned_;
  std::unique_ptr<parallel::GradBuckets<T>> buckets_;
  DpStepTimes times_;
  bool partial_ = false;  // begin_partial_backward .. begin_backward: the hooks start nothing
};

}  // namespace brt::core
