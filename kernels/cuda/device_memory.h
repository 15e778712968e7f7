// kernels::Memory on one CUDA device, ordered with one stream (internal to kernels/cuda; the
// CudaBackend hands it out as its memory()). Allocation is cudaMalloc at setup time only;
// copies are cudaMemcpyAsync on the backend's stream, and to_host waits for them.
#pragma once

#include <cuda_runtime.h>

#include "kernels/memory.h"

namespace brt::kernels::cuda {

class DeviceMemory final : public Memory {
 public:
  DeviceMemory(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  std::string name() const override { return "cuda:" + std::to_string(device_); }
  bool host_accessible() const override { return false; }
  void* allocate(std::size_t bytes, const char* what) override;
  void release(void* p) noexcept override;
  void to_host(void* host_dst, const void* src, std::size_t bytes) override;
  void from_host(void* dst, const void* host_src, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void fill_zero(void* dst, std::size_t bytes) override;
  void synchronize() override;
  // Bytes currently allocated through this object (the memory report's device total).
  std::size_t allocated_bytes() const { return allocated_; }

 private:
  int device_;
  cudaStream_t stream_;
  std::size_t allocated_ = 0;
};

}  // namespace brt::kernels::cuda
