#include "tests/cuda/cuda_test_util.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace brt::kernels::cuda::test {

namespace {
void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("tests/cuda: ") + what + ": " + cudaGetErrorString(status));
  }
}
}  // namespace

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  check(cudaDeviceSynchronize(), "synchronize before upload");
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "upload");
}

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  check(cudaDeviceSynchronize(), "synchronize before download");
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "download");
}

}  // namespace brt::kernels::cuda::test
