// Host waits on a stream that collectives may block (internal to kernels/cuda; docs/gpu.md
// "NCCL communicator"). An NCCL kernel whose peer died never finishes, and a plain
// cudaStreamSynchronize behind it never returns: the deadline and the error checks of the
// communicator would never run. So every wait of the backend (synchronize, Memory::to_host)
// polls the stream and, between polls, calls the watch a run installs (set_wait_watch in
// cuda_backend.h): the NCCL communicators check their asynchronous errors and deadline there,
// and end the job with the named report. Without a watch the wait is cudaStreamSynchronize.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>

namespace brt::kernels::cuda {

// Called between polls with the seconds waited so far; may throw or end the job.
using WaitWatch = std::function<void(double waited_seconds)>;

// The watch one backend's waits share (its DeviceMemory holds the same object).
struct WaitWatchSlot {
  WaitWatch watch;
};

// Waits until `stream` is idle: cudaStreamSynchronize when slot has no watch, else a polling
// loop (cudaStreamQuery; spins briefly, then sleeps up to 1 ms between polls) that calls the
// watch. Throws std::runtime_error naming `what` and the CUDA error when the stream failed.
void wait_for_stream(cudaStream_t stream, const WaitWatchSlot& slot, const char* what);

}  // namespace brt::kernels::cuda
