// Context parallelism (docs/parallelism.md, "Context parallelism"): one segment of N tokens is
// cut into C chunks of L = N/C consecutive tokens (whole blocks of W), rank r of the cp group
// holding tokens [r·L, (r+1)·L) of every stream it reads. A layer whose tokens depend on earlier
// chunks receives exactly what it needs from the ranks before it:
//  - window attention (model.md §3.2): block 0 of chunk r attends to the last block of chunk r−1
//    (its keys and values, the "halo"); the halo's gradient goes back in backward;
//  - BST's S4D sublayer (§7.1, §7.3): the diagonal state everything before the chunk leaves,
//    an exclusive scan of per-chunk state summaries, and its reverse in backward
//    (kernels/ssm/s4d_state_passing.h).
// What a segment carries to the next is chunk 0's to keep: the last block's keys and values (and
// MF's last context states) reach it from the last chunk by the same cyclic shift that passes
// every halo to the right; the S4D state, computed from every chunk's summary, is the same on
// every rank. Checkpoints take chunk 0's carried state, so they do not depend on C. Parameters
// are replicated over the group; their gradients are partial sums that the gradient reduction
// adds up over DP × CP (launch/run: the dp_cp group spans both).
//
// The halos move by a cyclic shift (each rank sends one block to its right neighbour, or its
// gradient to the left: Communicator::shift_async, point-to-point on MPI and NCCL); the S4D
// summaries, a few KB whatever N, by an all-gather. Both on the backend's memory, by the
// machinery tensor parallelism uses too (core/sharding/group_collectives.h). A default-constructed context is CP = 1.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/model_config.h"
#include "core/sharding/group_collectives.h"

namespace brt::core {

class ContextParallel {
 public:
  ContextParallel() = default;  // CP = 1
  // `group`: the cp group (consecutive chunks in rank order). Host-accessible buffers until
  // bound_to(); the device communicator and stream as for GroupCollectives.
  explicit ContextParallel(parallel::Communicator& group) : link_(group) {}
  ContextParallel(parallel::Communicator& group, kernels::Memory& memory,
                  parallel::Communicator* device_group, parallel::Stream stream)
      : link_(group, memory, device_group, stream) {}
  ContextParallel bound_to(kernels::Memory& memory) const;

  bool active() const { return link_.active(); }
  int rank() const { return link_.rank(); }
  int size() const { return link_.size(); }
  bool first() const { return rank() == 0; }
  bool last() const { return rank() == size() - 1; }
  parallel::Communicator* group() const { return link_.group(); }

  // recv [size() · n] = every rank's send [n] in chunk order (bound memory).
  template <typename T>
  void all_gather(const T* send, T* recv, int64_t n) const {
    link_.all_gather(send, recv, n);
  }
  // recv [n] = the previous chunk's send [n] (chunk 0 receives the last chunk's: what the
  // segment carries to the next).
  template <typename T>
  void from_left(const T* send, T* recv, int64_t n) const {
    link_.shift(send, recv, n, +1);
  }
  // recv [n] = the next chunk's send [n] (the last chunk receives chunk 0's).
  template <typename T>
  void from_right(const T* send, T* recv, int64_t n) const {
    link_.shift(send, recv, n, -1);
  }

 private:
  explicit ContextParallel(GroupCollectives link) : link_(std::move(link)) {}
  GroupCollectives link_;  // the cp group's collectives on bound memory (core/sharding/group_collectives.h)
};

// Empty when `cfg` (resolved) can run with `cp` chunks per segment; otherwise why not, naming
// the key: the variants whose state is sequential block to block, N not a multiple of cp·W,
// kernels without a finite state. Used by the model and, before any work, by `brt-dist train`.
std::string context_parallel_problem(const ModelConfig& cfg, int cp);

// The config the layers of one chunk see: model.seq_len = N / cp (everything else unchanged).
ModelConfig chunk_config(const ModelConfig& cfg, int cp);

}  // namespace brt::core
