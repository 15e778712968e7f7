// kernels::Memory on one CUDA device, ordered with one stream (internal to kernels/cuda; the
// CudaBackend hands it out as its memory()). Allocation is cudaMalloc at setup time only;
// copies are cudaMemcpyAsync on the backend's stream, and to_host waits for them (through the
// backend's wait watch, stream_wait.h).
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "kernels/cuda/device/stream_wait.h"
#include "kernels/memory.h"

namespace brt::kernels::cuda {

class DeviceMemory final : public Memory {
 public:
  // waits: the backend's watch for host waits (stream_wait.h); null: plain synchronisation.
  DeviceMemory(int device, cudaStream_t stream, std::shared_ptr<const WaitWatchSlot> waits = nullptr)
      : device_(device), stream_(stream), waits_(waits ? std::move(waits) : std::make_shared<WaitWatchSlot>()) {}
  ~DeviceMemory() override;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  std::string name() const override { return "cuda:" + std::to_string(device_); }
  bool host_accessible() const override { return false; }
  void* allocate(std::size_t bytes, const char* what) override;
  void release(void* p) noexcept override;
  void to_host(void* host_dst, const void* src, std::size_t bytes) override;
  // Through one pinned staging buffer (made at the first batch, kept): asynchronous copies on
  // the stream and one wait per buffer-full (kernels/memory.h copy_through_staging).
  void to_host_batch(const std::vector<HostCopy>& copies) override;
  void from_host(void* dst, const void* host_src, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void fill_zero(void* dst, std::size_t bytes) override;
  void synchronize() override;

 private:
  void wait(const char* what) { wait_for_stream(stream_, *waits_, what); }

  int device_;
  cudaStream_t stream_;
  std::shared_ptr<const WaitWatchSlot> waits_;
  std::size_t allocated_ = 0;
  char* staging_ = nullptr;  // pinned host memory for to_host_batch
  static constexpr std::size_t kStagingBytes = std::size_t{64} << 20;
};

}  // namespace brt::kernels::cuda
