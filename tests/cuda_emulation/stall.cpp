// Host emulation check (tests/cuda_emulation/run.sh nccl_stall; docs/gpu.md "NCCL
// communicator"): what a host that waits on the CUDA backend's stream behind an NCCL collective
// does when the collective never completes or NCCL reports an error. Under mpirun -np 2, each
// rank issues an all-reduce on the backend's stream the way the tensor-parallel layers do (no
// wait on its request), then reads the buffer back through the backend's memory, with the
// communicator's health check installed as the backend's wait watch (launch's DeviceWaitWatch).
//   stall: every rank's collective never completes (EMU_NCCL_STALL_AT=1: a dead peer) — the
//          wait must end the job with the timeout report naming the collective (exit 124),
//          not hang in a blocking synchronisation (the emulator aborts on that);
//   error: NCCL reports an asynchronous error (EMU_NCCL_ASYNC_ERROR_AT=1) — the wait must throw
//          CommError naming the collective; this program then prints it and exits 3.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "parallel/health/comm_error.h"
#include "parallel/nccl_communicator.h"

using namespace brt;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string mode = argc > 1 ? argv[1] : "stall";
  kernels::cuda::CudaOptions options;
  options.device = parallel::select_gpu_for_local_rank(rank);
  auto backend = kernels::cuda::make_cuda_backend(options);
  parallel::CommOptions comm_options;
  comm_options.timeout = std::chrono::seconds(2);
  parallel::NcclCommunicator comm(MPI_COMM_WORLD, "tp", comm_options);
  kernels::cuda::set_wait_watch(*backend, [&comm](double) { comm.check_health("the check's read-back"); });
  constexpr int kCount = 256;
  kernels::Buffer<float> buffer(backend->memory(), kCount, "stall check buffer");
  const parallel::Stream stream{kernels::cuda::stream_handle(*backend)};
  parallel::Request request =
      comm.all_reduce_async(std::span<float>(buffer.data(), kCount), parallel::ReduceOp::kSum, stream);
  std::vector<float> host(kCount);
  try {
    backend->memory().to_host(host.data(), buffer.data(), kCount * sizeof(float));
  } catch (const parallel::CommError& e) {
    std::printf("rank %d: CommError: %s\n", rank, e.what());
    std::fflush(stdout);
    std::_Exit(3);  // the communicator is aborted; MPI_Finalize would wait for the peer
  }
  std::printf("rank %d (%s): the read-back returned without an error\n", rank, mode.c_str());
  MPI_Finalize();
  return 0;
}
