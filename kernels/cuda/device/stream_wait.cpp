#include "kernels/cuda/device/stream_wait.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "kernels/cuda/cuda_check.h"

namespace brt::kernels::cuda {

void wait_for_stream(cudaStream_t stream, const WaitWatchSlot& slot, const char* what) {
  if (!slot.watch) {
    check_cuda(cudaStreamSynchronize(stream), what, __FILE__, __LINE__);
    return;
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto pause = std::chrono::microseconds(0);
  for (;;) {
    const cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) check_cuda(status, what, __FILE__, __LINE__);
    slot.watch(std::chrono::duration<double>(Clock::now() - start).count());
    // Spin for the first polls (most waits end within microseconds), then back off to 1 ms.
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
    pause = std::min(std::chrono::microseconds(1000), pause + std::chrono::microseconds(20));
  }
}

}  // namespace brt::kernels::cuda
