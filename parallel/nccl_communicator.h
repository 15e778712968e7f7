// The NCCL backend of Communicator (parallel/communicator.h), for device buffers on GPUs.
// Built only with the CUDA backend and NCCL (docs/gpu.md); the MPI backend stays the CPU path.
//
//  - Setup is collective over an MPI communicator (one per process group: world, dp_cp, tp, cp): rank
//    0 makes an ncclUniqueId, MPI broadcasts it, every member creates a non-blocking NCCL
//    communicator (ncclCommInitRankConfig, blocking = 0) on its current CUDA device (pick it
//    first with select_gpu_for_local_rank) and polls it under CommOptions::timeout: a member
//    that never joins ends the job with the timeout report instead of a hang.
//  - Collectives are enqueued on the caller's Stream (a cudaStream_t in Stream::handle); a
//    host Stream (null) uses the communicator's own stream. Buffers are device memory.
//  - A Request is backed by a CUDA event recorded after the collective: test() queries it,
//    wait() polls it. Collectives nobody waits on (the tensor-parallel layers' ones, ordered on
//    the backend's stream) are checked by check_health(), which the CUDA backend calls while
//    the host waits on that stream. While polling, ncclCommGetAsyncError is checked: an NCCL error aborts
//    the communicator (ncclCommAbort) and throws CommError naming the op, bytes, sequence
//    number, group and rank; a collective still incomplete after CommOptions::timeout aborts
//    the communicator and ends the job with the same timeout report as the MPI backend
//    (parallel/health/comm_error.h, exit status 124).
//  - Determinism: NCCL does not fold in rank order like the MPI backend, so sums can differ
//    from MPI's in the last bits; runs with the same topology and NCCL settings reproduce
//    (pin NCCL_ALGO / NCCL_PROTO for bit-identical reruns across NCCL tuning changes).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace brt::parallel {

namespace detail {
struct NcclGroup;  // shared between a communicator and its in-flight ops
}

// cudaSetDevice(local_rank % device count); returns the device. Throws CommError naming the
// local rank when the process sees no GPU. Call before creating any NcclCommunicator.
int select_gpu_for_local_rank(int local_rank);

// The linked NCCL library's version, e.g. "2.27.7" (ncclGetVersion).
std::string nccl_version_string();

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `comm` (every member calls it, each with its GPU already selected).
  NcclCommunicator(MPI_Comm comm, std::string name, CommOptions options = {});
  ~NcclCommunicator() override;

  int rank() const override;
  int size() const override;
  const std::string& name() const override;
  int world_rank_of(int group_rank) const override;
  uint64_t sequence() const override { return sequence_; }
  // True after an error or timeout aborted the NCCL communicator; later collectives throw.
  bool aborted() const;
  // For a host that waits on a stream behind this communicator's collectives (the CUDA
  // backend's wait watch, kernels/cuda/device/stream_wait.h): an asynchronous NCCL error aborts the
  // communicator and throws CommError naming the collective and `waiter`; a collective still
  // incomplete past CommOptions::timeout after it was issued aborts the communicator and ends
  // the job with the timeout report (exit 124). Cheap enough to call every millisecond.
  void check_health(const std::string& waiter);

 protected:
  Request start_all_reduce(const void* send, void* recv, int64_t count, DataType type,
                           ReduceOp op, Stream stream) override;
  Request start_reduce_scatter(const void* send, void* recv, int64_t recv_count, DataType type,
                               ReduceOp op, Stream stream) override;
  Request start_all_gather(const void* send, void* recv, int64_t send_count, DataType type,
                           Stream stream) override;
  Request start_broadcast(void* buf, int64_t count, DataType type, int root,
                          Stream stream) override;
  Request start_barrier(Stream stream) override;
  Request start_shift(const void* send, void* recv, int64_t count, DataType type, int offset,
                      Stream stream) override;

 private:
  std::shared_ptr<detail::NcclGroup> group_;
  uint64_t sequence_ = 0;
};

}  // namespace brt::parallel
