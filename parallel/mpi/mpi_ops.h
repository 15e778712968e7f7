// Internal to the MPI backend: the shared group record and the in-flight collective state
// machines (parallel/mpi/mpi_ops.cpp). Not part of the public API.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "parallel/health/comm_error.h"
#include "parallel/communicator.h"
#include "parallel/mpi/mpi_communicator.h"

namespace brt::parallel::detail {

// What a communicator and its in-flight ops share. Frees the duplicated MPI_Comm when the
// last holder goes (MPI allows freeing with operations pending; they still complete).
struct MpiGroup {
  MPI_Comm comm = MPI_COMM_NULL;
  std::string name;
  int rank = 0;
  int size = 1;
  int tag_ub = 32767;                   // largest tag MPI allows here (at least 32767)
  std::vector<int> world_ranks;         // by group rank
  std::vector<std::string> hosts;       // by group rank
  CommOptions options;

  MpiGroup() = default;
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;
  ~MpiGroup();

  RankLocation location(int group_rank) const {
    return {world_ranks[group_rank], hosts[group_rank]};
  }
};

// Throws CommError "<what> failed on world rank R (host) in <collective>: <MPI message>".
void check_mpi(int rc, const char* what, const MpiGroup& group, const CollectiveInfo& info);

std::unique_ptr<PendingOp> start_all_reduce_op(std::shared_ptr<const MpiGroup> group,
                                               uint64_t seq, const void* send, void* recv,
                                               int64_t count, DataType type, ReduceOp op);
std::unique_ptr<PendingOp> start_reduce_scatter_op(std::shared_ptr<const MpiGroup> group,
                                                   uint64_t seq, const void* send, void* recv,
                                                   int64_t recv_count, DataType type,
                                                   ReduceOp op);
std::unique_ptr<PendingOp> start_all_gather_op(std::shared_ptr<const MpiGroup> group,
                                               uint64_t seq, const void* send, void* recv,
                                               int64_t send_count, DataType type);
std::unique_ptr<PendingOp> start_shift_op(std::shared_ptr<const MpiGroup> group, uint64_t seq,
                                          const void* send, void* recv, int64_t count, DataType type,
                                          int offset);
std::unique_ptr<PendingOp> start_broadcast_op(std::shared_ptr<const MpiGroup> group,
                                              uint64_t seq, void* buf, int64_t count,
                                              DataType type, int root);
std::unique_ptr<PendingOp> start_barrier_op(std::shared_ptr<const MpiGroup> group, uint64_t seq);

}  // namespace brt::parallel::detail
