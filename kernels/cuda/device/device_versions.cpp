#include "kernels/cuda/device/device_versions.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>

namespace brt::kernels::cuda {

namespace {

// 13000 -> "13.0" (CUDA's major * 1000 + minor * 10 encoding).
std::string cuda_version_text(int code) {
  return std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 10);
}

}  // namespace

CudaVersions cuda_versions(int device) {
  CudaVersions v;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
    v.device = prop.name;
    v.compute_capability = std::to_string(prop.major) + std::to_string(prop.minor);
  } else {
    v.device = "unreadable device " + std::to_string(device);
  }
  int code = 0;
  v.driver = cudaDriverGetVersion(&code) == cudaSuccess ? cuda_version_text(code) : "unknown";
  v.runtime = cudaRuntimeGetVersion(&code) == cudaSuccess ? cuda_version_text(code) : "unknown";
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    v.cublas = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  else
    v.cublas = "unknown";
  v.cufft = cufftGetVersion(&code) == CUFFT_SUCCESS ? std::to_string(code) : "unknown";
  return v;
}

}  // namespace brt::kernels::cuda
