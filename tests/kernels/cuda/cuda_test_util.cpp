#include "tests/kernels/cuda/cuda_test_util.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace brt::kernels::cuda::test {

namespace {
void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("tests/kernels/cuda: ") + what + ": " + cudaGetErrorName(status) +
                             " (" + cudaGetErrorString(status) + ")");
  }
}
}  // namespace

void copy_to_device(void* dst, const void* src, std::size_t bytes, CUstream_st* stream) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream), "upload");
  check(cudaStreamSynchronize(stream), "synchronize after upload");
}

void copy_to_host(void* dst, const void* src, std::size_t bytes, CUstream_st* stream) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream), "download");
  check(cudaStreamSynchronize(stream), "synchronize after download");
}

}  // namespace brt::kernels::cuda::test
