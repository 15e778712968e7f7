// A group of a given size seen from one rank, with no peers behind it: what a model needs to
// lay itself out as that rank of a TP or CP group (its slices, its chunk) without running. The
// planner builds models on it to count their memory (launch/plan/planner_memory.cpp); every
// collective throws, naming the group, because a model being counted never communicates.
#pragma once

#include <string>

#include "parallel/communicator.h"

namespace brt::parallel {

class UnconnectedCommunicator final : public Communicator {
 public:
  // name: e.g. "tp" (shown as "tp[unconnected 2]"); 0 <= rank < size.
  UnconnectedCommunicator(const std::string& name, int rank, int size);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  int world_rank_of(int group_rank) const override { return group_rank; }
  uint64_t sequence() const override { return 0; }

 protected:
  Request start_all_reduce(const void*, void*, int64_t, DataType, ReduceOp, Stream) override;
  Request start_reduce_scatter(const void*, void*, int64_t, DataType, ReduceOp, Stream) override;
  Request start_all_gather(const void*, void*, int64_t, DataType, Stream) override;
  Request start_broadcast(void*, int64_t, DataType, int, Stream) override;
  Request start_barrier(Stream) override;
  Request start_shift(const void*, void*, int64_t, DataType, int, Stream) override;

 private:
  [[noreturn]] void refuse(const char* op) const;
  std::string name_;
  int rank_, size_;
};

}  // namespace brt::parallel
