// The collectives of one process group on the layers' buffers, shared by tensor parallelism
// (core/sharding/tensor_parallel.h: the conjugate all-reduces, the all-gathers of sharded
// tensors) and context parallelism (core/sharding/context_parallel.h: the halo shifts and the
// S4D summaries' all-gather). Copies share one link (memory, device communicator, stream, host
// staging); a default-constructed one is a group of one, whose collectives are copies or no-ops.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "kernels/memory.h"
#include "parallel/communicator.h"

namespace brt::core {

namespace detail {
struct GroupLink;  // where the collectives' buffers live and how they reach the group (shared)
}

// Where the layers' collectives run (docs/parallelism.md, "Tensor parallelism on the GPU"):
//  - host-accessible memory (the CPU backend): the tp group's host communicator (MPI) works on
//    the buffers directly, as before;
//  - other memory with a device communicator (NCCL over the same ranks): the collective is
//    enqueued on the backend's stream on the device pointers, so the kernels issued after it
//    see its result without a host wait;
//  - other memory without one (tests' guarded memory, or a GPU build without NCCL): staged
//    through a host vector (Memory::to_host, the host collective, Memory::from_host).
class GroupCollectives {
 public:
  GroupCollectives() = default;  // a group of one
  // Uses `group` (a host communicator); a group of one rank does no communication.
  // Collectives take host-accessible buffers until bound_to() says otherwise.
  explicit GroupCollectives(parallel::Communicator& group);
  // The same, for buffers in `memory`. `device_group` (may be null): a communicator over the
  // same ranks in the same order that takes `memory`'s pointers (NCCL); its collectives are
  // ordered on `stream` (the backend's, not an overlap stream).
  GroupCollectives(parallel::Communicator& group, kernels::Memory& memory,
                   parallel::Communicator* device_group, parallel::Stream stream);

  // These collectives for buffers in `memory`: *this when already bound to `memory`, else a
  // copy that stages through the host (host-accessible memory needs no staging).
  GroupCollectives bound_to(kernels::Memory& memory) const;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool active() const { return comm_ != nullptr; }
  // The host communicator (host pointers only: checkpoints, statistics, generation).
  parallel::Communicator* group() const { return comm_; }
  // True when collectives run on a device communicator without staging.
  bool on_device_group() const;

  // In-place collectives over the group on buffers in the bound memory (host memory when
  // unbound); no-ops in a group of one.
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
  // context parallelism's halo exchange.
  template <typename T>
  void shift(const T* send, T* recv, int64_t n, int offset) const;
  // The same sum on host memory whatever the binding (statistics for the optimizer).
  template <typename T>
  void host_all_reduce_sum(T* data, int64_t n) const;

 private:
  template <typename T>
  void all_reduce(T* data, int64_t n, parallel::ReduceOp op) const;
  // A group of one: all_gather, reduce_scatter and shift are a copy of send into recv.
  template <typename T>
  void copy_alone(const T* send, T* recv, int64_t n) const;

  parallel::Communicator* comm_ = nullptr;
  int rank_ = 0, size_ = 1;
  std::shared_ptr<detail::GroupLink> link_;  // null: host memory, host communicator
};

}  // namespace brt::core
