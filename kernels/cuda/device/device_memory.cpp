#include "kernels/cuda/device/device_memory.h"

#include <stdexcept>

#include "kernels/cuda/cuda_check.h"

namespace brt::kernels::cuda {

void* DeviceMemory::allocate(std::size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status != cudaSuccess) {
    std::size_t free_bytes = 0, total_bytes = 0;
    cudaGetLastError();  // clear the error so the report can query the device
    cudaMemGetInfo(&free_bytes, &total_bytes);
    throw std::runtime_error(std::string("out of device memory on ") + name() + " allocating " +
                             what + " (" + std::to_string(bytes) + " bytes; " +
                             std::to_string(free_bytes >> 20) + " MiB free of " +
                             std::to_string(total_bytes >> 20) + " MiB, " +
                             std::to_string(allocated_ >> 20) +
                             " MiB held by this model): " + cudaGetErrorString(status));
  }
  // cudaMalloc memory is already resident; zeroing keeps the host-memory contract.
  BRT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
  allocated_ += bytes;
  return p;
}

void DeviceMemory::release(void* p) noexcept {
  // The size is not tracked per pointer; allocated_ is a high-water figure for reports.
  cudaFree(p);
}

void DeviceMemory::to_host(void* host_dst, const void* src, std::size_t bytes) {
  BRT_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  wait("to_host");
}

DeviceMemory::~DeviceMemory() {
  if (staging_ != nullptr) cudaFreeHost(staging_);
}

void DeviceMemory::to_host_batch(const std::vector<HostCopy>& copies) {
  if (staging_ == nullptr) {
    void* pinned = nullptr;
    if (cudaMallocHost(&pinned, kStagingBytes) != cudaSuccess) {
      (void)cudaGetLastError();  // no pinned memory to spare: copy tensor by tensor instead
      Memory::to_host_batch(copies);
      return;
    }
    staging_ = static_cast<char*>(pinned);
  }
  copy_through_staging(
      copies, staging_, kStagingBytes,
      [this](void* dst, const void* src, std::size_t bytes) {
        BRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
      },
      [this] { wait("to_host_batch"); });
}

void DeviceMemory::from_host(void* dst, const void* host_src, std::size_t bytes) {
  BRT_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  // The host buffer may be reused by the caller as soon as this returns.
  wait("from_host");
}

void DeviceMemory::copy(void* dst, const void* src, std::size_t bytes) {
  BRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void DeviceMemory::fill_zero(void* dst, std::size_t bytes) {
  BRT_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
}

void DeviceMemory::synchronize() { wait("synchronize"); }

}  // namespace brt::kernels::cuda
