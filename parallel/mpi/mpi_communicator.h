// The MPI backend of Communicator (parallel/communicator.h).
//
// Every collective is built from point-to-point messages with a fixed schedule, because that
// buys three things MPI's own collectives do not promise:
//  - determinism: reductions sum element-wise in ascending group-rank order on one rank per
//    chunk (a reduce-scatter by pairwise exchange, then an all-gather), so the result is the
//    serial fold ((x0 + x1) + x2) + ... bit for bit, for every size and every message length;
//  - blame: when a collective times out, the requests still open name the peers that never
//    delivered their data (dead, stalled, or in a different collective);
//  - a bandwidth-optimal volume of 2 (P-1)/P bytes per byte reduced, like ring all-reduce.
// Progress happens inside test()/wait() (Open MPI has no progress thread for the shared-memory
// and TCP transports), so code that overlaps a collective with compute calls test() now and
// then.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace brt::parallel {

namespace detail {
struct MpiGroup;  // shared between a communicator and its in-flight ops
}

class MpiCommunicator final : public Communicator {
 public:
  // Collective over `comm`: duplicates it (this group's messages can never match anyone
  // else's), sets MPI_ERRORS_RETURN on the duplicate (errors become CommError), and gathers
  // every member's world rank and host name for messages.
  MpiCommunicator(MPI_Comm comm, std::string name, CommOptions options = {});
  ~MpiCommunicator() override;

  int rank() const override;
  int size() const override;
  const std::string& name() const override;
  int world_rank_of(int group_rank) const override;
  uint64_t sequence() const override { return sequence_; }

  const std::string& host_of(int group_rank) const;
  const CommOptions& options() const;
  // The duplicated communicator (for MPI-IO, e.g. parallel HDF5 over this group).
  MPI_Comm mpi_comm() const;

 protected:
  Request start_all_reduce(const void* send, void* recv, int64_t count, DataType type,
                           ReduceOp op, Stream stream) override;
  Request start_reduce_scatter(const void* send, void* recv, int64_t recv_count, DataType type,
                               ReduceOp op, Stream stream) override;
  Request start_all_gather(const void* send, void* recv, int64_t send_count, DataType type,
                           Stream stream) override;
  Request start_shift(const void* send, void* recv, int64_t count, DataType type, int offset,
                      Stream stream) override;
  Request start_broadcast(void* buf, int64_t count, DataType type, int root,
                          Stream stream) override;
  Request start_barrier(Stream stream) override;

 private:
  uint64_t next_sequence(Stream stream, const char* op);

  std::shared_ptr<detail::MpiGroup> group_;
  uint64_t sequence_ = 0;
};

}  // namespace brt::parallel
