// Error checks for CUDA runtime and library calls (internal to kernels/cuda). Every failure
// throws std::runtime_error naming the call site, so a broken launch is never silent.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace brt::kernels::cuda {

inline void check_cuda(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("kernels/cuda: ") + what + " failed at " + file + ":" +
                             std::to_string(line) + ": " + cudaGetErrorName(status) + " (" +
                             cudaGetErrorString(status) + ")");
  }
}

inline void check_cublas(cublasStatus_t status, const char* what, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("kernels/cuda: ") + what + " failed at " + file + ":" +
                             std::to_string(line) + ": " + cublasGetStatusName(status));
  }
}

}  // namespace brt::kernels::cuda

#define BRT_CUDA_CHECK(call) ::brt::kernels::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define BRT_CUBLAS_CHECK(call) \
  ::brt::kernels::cuda::check_cublas((call), #call, __FILE__, __LINE__)
// After every kernel launch: catches bad launch configurations at once.
#define BRT_CUDA_CHECK_LAUNCH(name) \
  ::brt::kernels::cuda::check_cuda(cudaGetLastError(), name, __FILE__, __LINE__)
