// Megatron-style tensor parallelism (docs/parallelism.md, "Tensor parallelism"): the context a
// layer needs to hold its slice of the heads / hidden units / vocabulary and to issue the
// conjugate collectives on its TP group. Passed explicitly (no globals); a default-constructed
// context is TP = 1 and every collective is a no-op without communication.
//
// The conjugate pairs (f and g of Megatron-LM):
//  - column-parallel linear (W [in, out] split by columns, replicated input): forward needs no
//    communication; backward all-reduces the input gradient (reduce_input_grad).
//  - row-parallel linear (W [in, out] split by rows, input split by columns): forward
//    all-reduces the output (reduce_output); backward needs no communication.
// Replicated parameters whose inputs are replicated after these all-reduces (norm gains, gate
// biases, state IDs, the learned initial state) receive identical gradients on every TP rank and
// need no reduction; sharded parameters' gradients are complete for their slice.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>
#include <utility>

#include "core/optim/optim_stats.h"
#include "core/param.h"
#include "core/param_store.h"
#include "core/sharding/group_collectives.h"
#include "kernels/memory.h"
#include "parallel/communicator.h"

namespace brt::core {

// The context of a tensor-parallel layer: its TP group's collectives (core/sharding/
// group_collectives.h, on the backend's memory) and how its declarations are sharded.
class TensorParallel : public GroupCollectives {
 public:
  TensorParallel() = default;  // TP = 1
  // Uses `group` (the tp group of parallel::ProcessGroups, a host communicator); a group of
  // one rank is TP = 1. Collectives take host-accessible buffers until bound_to() says
  // otherwise.
  explicit TensorParallel(parallel::Communicator& group);
  // The same, for buffers in `memory`; `device_group` and `stream` as for GroupCollectives.
  TensorParallel(parallel::Communicator& group, kernels::Memory& memory,
                 parallel::Communicator* device_group, parallel::Stream stream);

  // This context for buffers in `memory`: *this when it is already bound to `memory`, else a
  // copy that stages through the host (host-accessible memory needs no staging).
  TensorParallel bound_to(kernels::Memory& memory) const;

  // n / size(); throws naming `what` (a config key) when it does not divide.
  int local(int n, const std::string& what) const;

  // Shards for declarations. [in, out] matrices: columns() splits out (column-parallel),
  // rows(pieces) splits in block by block (row-parallel). Per-head tensors [H, ...]: heads().
  ShardSpec columns() const { return {1, rank(), size(), 1}; }
  ShardSpec rows(int pieces = 1) const { return {0, rank(), size(), pieces}; }
  ShardSpec heads() const { return {0, rank(), size(), 1}; }

  // The conjugate collectives, named for the call sites.
  template <typename T>
  void reduce_output(T* y, int64_t n) const { all_reduce_sum(y, n); }  // row-parallel forward
  template <typename T>
  void reduce_input_grad(T* dx, int64_t n) const { all_reduce_sum(dx, n); }  // column backward

 private:
  explicit TensorParallel(GroupCollectives collectives) : GroupCollectives(std::move(collectives)) {}
};

// Layout-independent views of sharded tensors (checkpoints, tests): `spec` describes this
// rank's slice (spec.shard) of the full spec.shape.
// full[spec.global_numel()] on every rank of tp = the ranks' slices put in place (all-gather).
// Replicated tensors are copied. `staging` is resized as needed. Host pointers only: stage
// backend memory through Memory::to_host first.
template <typename T>
void gather_shards(const TensorParallel& tp, const ParamSpec& spec, const T* local, T* full,
                   std::vector<T>& staging);
// local[spec.numel()] = this rank's slice of full[spec.global_numel()].
template <typename T>
void extract_shard(const ParamSpec& spec, const T* full, T* local);

// The StatReducer for tensor parallelism: per-parameter sums over sharded parameters are summed
// over the TP group (each shard counted once), replicated parameters' sums are kept as they are
// (counted once, not TP times). This gives the global gradient norm for clipping (model.md §10c)
// and Adafactor's RMS(param) and RMS(update). Adafactor's factored row/column sums and R means
// of a shard are summed over TP where they run along the split axis (StatBlock::spans_shard),
// so every rank's factors are the slice of the unsplit tensor's.
template <typename T>
class TensorParallelStatReducer : public StatReducer {
 public:
  TensorParallelStatReducer(const ParamStore<T>& store, const TensorParallel& tp,
                            StatReducer* next = nullptr);
  void reduce(StatKind kind, std::span<double> sums, std::span<const StatBlock> blocks) override;
  // On the device: the partial entries gathered into one run, all-reduced by the TP group's
  // collectives on the optimizer's memory (NCCL on the backend's stream on a GPU), put back.
  bool reduces_on_device() const override { return next_ == nullptr || next_->reduces_on_device(); }
  void reduce_on_device(StatKind kind, double* sums, int64_t n, std::span<const StatBlock> blocks,
                        kernels::StatKernels& moves) override;

 private:
  // Whether a block's sums are partial on this rank (summed over TP) or already whole.
  bool partial(const StatBlock& b) const;
  // One kind's partial entries in the optimizer's memory: their indices and a run to sum them
  // in, made at the kind's first reduction (and again if its blocks change).
  struct DeviceRun {
    std::vector<StatBlock> blocks;
    int64_t n = 0;
    kernels::Buffer<int64_t> index;
    kernels::Buffer<double> run;
  };
  DeviceRun& device_run(StatKind kind, int64_t n, std::span<const StatBlock> blocks, kernels::Memory& memory);

  const ParamStore<T>& store_;
  TensorParallel tp_;
  StatReducer* next_;
  std::vector<double> staging_;
  std::map<StatKind, DeviceRun> device_runs_;
  std::optional<TensorParallel> device_tp_;  // tp_ bound to the optimizer's memory
};

}  // namespace brt::core
