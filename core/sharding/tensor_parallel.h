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
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/optim/optim_stats.h"
#include "core/param.h"
#include "core/param_store.h"
#include "kernels/memory.h"
#include "parallel/communicator.h"

namespace brt::core {

namespace detail {
struct TpLink;  // where the collectives' buffers live and how they reach the group (shared)
}

// Where the layers' collectives run (docs/parallelism.md, "Tensor parallelism on the GPU"):
//  - host-accessible memory (the CPU backend): the tp group's host communicator (MPI) works on
//    the buffers directly, as before;
//  - other memory with a device communicator (NCCL over the same ranks): the collective is
//    enqueued on the backend's stream on the device pointers, so the kernels issued after it
//    see its result without a host wait;
//  - other memory without one (tests' guarded memory, or a GPU build without NCCL): staged
//    through a host vector (Memory::to_host, the host collective, Memory::from_host).
class TensorParallel {
 public:
  TensorParallel() = default;  // TP = 1
  // Uses `group` (the tp group of parallel::ProcessGroups, a host communicator); a group of
  // one rank is TP = 1. Collectives take host-accessible buffers until bound_to() says
  // otherwise.
  explicit TensorParallel(parallel::Communicator& group);
  // The same, for buffers in `memory`. `device_group` (may be null): a communicator over the
  // same ranks in the same order that takes `memory`'s pointers (NCCL); its collectives are
  // ordered on `stream` (the backend's, not an overlap stream).
  TensorParallel(parallel::Communicator& group, kernels::Memory& memory,
                 parallel::Communicator* device_group, parallel::Stream stream);

  // This context for buffers in `memory`: *this when it is already bound to `memory`, else a
  // copy that stages through the host (host-accessible memory needs no staging).
  TensorParallel bound_to(kernels::Memory& memory) const;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool active() const { return comm_ != nullptr; }
  // The host communicator (host pointers only: checkpoints, statistics, generation).
  parallel::Communicator* group() const { return comm_; }
  // True when collectives run on a device communicator without staging.
  bool on_device_group() const;

  // n / size(); throws naming `what` (a config key) when it does not divide.
  int local(int n, const std::string& what) const;

  // Shards for declarations. [in, out] matrices: columns() splits out (column-parallel),
  // rows(pieces) splits in block by block (row-parallel). Per-head tensors [H, ...]: heads().
  ShardSpec columns() const { return {1, rank_, size_, 1}; }
  ShardSpec rows(int pieces = 1) const { return {0, rank_, size_, pieces}; }
  ShardSpec heads() const { return {0, rank_, size_, 1}; }

  // In-place collectives over the TP group on buffers in the bound memory (host memory when
  // unbound); no-ops at TP = 1.
  template <typename T>
  void all_reduce_sum(T* data, int64_t n) const { all_reduce(data, n, parallel::ReduceOp::kSum); }
  template <typename T>
  void all_reduce_max(T* data, int64_t n) const { all_reduce(data, n, parallel::ReduceOp::kMax); }
  // recv [size() * n] = every rank's send [n], rank-major (bound memory).
  template <typename T>
  void all_gather(const T* send, T* recv, int64_t n) const;
  // recv [n] = the sum over ranks of their send block rank() (send [size() * n]; bound memory).
  template <typename T>
  void reduce_scatter(const T* send, T* recv, int64_t n) const;
  // recv [n] = the send [n] of rank (rank() − offset) mod size() (a cyclic shift; bound memory):
  // context parallelism's halo exchange (core/sharding/context_parallel.h), on the same machinery.
  template <typename T>
  void shift(const T* send, T* recv, int64_t n, int offset) const;
  // The same sum on host memory whatever the binding (statistics for the optimizer).
  template <typename T>
  void host_all_reduce_sum(T* data, int64_t n) const;

  // The conjugate collectives, named for the call sites.
  template <typename T>
  void reduce_output(T* y, int64_t n) const { all_reduce_sum(y, n); }  // row-parallel forward
  template <typename T>
  void reduce_input_grad(T* dx, int64_t n) const { all_reduce_sum(dx, n); }  // column backward

 private:
  template <typename T>
  void all_reduce(T* data, int64_t n, parallel::ReduceOp op) const;
  // TP = 1: all_gather and reduce_scatter are a copy of send into recv (bound memory).
  template <typename T>
  void copy_alone(const T* send, T* recv, int64_t n) const;

  parallel::Communicator* comm_ = nullptr;
  int rank_ = 0, size_ = 1;
  std::shared_ptr<detail::TpLink> link_;  // null: host memory, host communicator
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

 private:
  const ParamStore<T>& store_;
  TensorParallel tp_;
  StatReducer* next_;
  std::vector<double> staging_;
};

}  // namespace brt::core
