// A communicator that forwards every collective to another and counts it: calls by kind and
// size, and the bytes this rank sends in them. For the checks that the planner's traffic model
// (launch/plan/planner.h) is the traffic the layers issue (tests/launch/plan, tests/core/cp) and for the
// benchmarks that report bytes per step (bench/cp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "parallel/communicator.h"

namespace brt::parallel {

class CountingCommunicator final : public Communicator {
 public:
  // kind: 'r' all-reduce, 's' reduce-scatter, 'g' all-gather, 'b' broadcast, 'x' shift;
  // bytes: the whole buffer (all-reduce, broadcast), the gathered / scattered whole (all-gather,
  // reduce-scatter) or the block moved (shift).
  using Key = std::tuple<char, int64_t>;

  explicit CountingCommunicator(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const std::string& name() const override { return inner_.name(); }
  int world_rank_of(int r) const override { return inner_.world_rank_of(r); }
  uint64_t sequence() const override { return inner_.sequence(); }

  const std::map<Key, int64_t>& calls() const { return calls_; }
  // Bytes this rank sent in shifts (its block, to one neighbour) and all-gathers (its block to
  // each of the others: the MPI communicator's algorithm; a ring sends the same total).
  int64_t sent_bytes() const { return sent_; }
  void reset() {
    calls_.clear();
    sent_ = 0;
  }

 protected:
  Request start_all_reduce(const void* send, void* recv, int64_t count, DataType type, ReduceOp op,
                           Stream s) override;
  Request start_reduce_scatter(const void* send, void* recv, int64_t recv_count, DataType type, ReduceOp op,
                               Stream s) override;
  Request start_all_gather(const void* send, void* recv, int64_t send_count, DataType type, Stream s) override;
  Request start_broadcast(void* buf, int64_t count, DataType type, int root, Stream s) override;
  Request start_barrier(Stream s) override { return inner_.barrier_async(s); }
  Request start_shift(const void* send, void* recv, int64_t count, DataType type, int offset,
                      Stream s) override;

 private:
  Communicator& inner_;
  std::map<Key, int64_t> calls_;
  int64_t sent_ = 0;
};

}  // namespace brt::parallel
