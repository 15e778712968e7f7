// The GPU side of a rank's numerics fingerprint (runtime/numerics.h): what decides the bits a
// CUDA rank computes besides our own kernels — the device and its compute capability (cuBLAS
// picks its kernels by it), the CUDA runtime, cuBLAS and cuFFT as loaded; the driver is shown
// (it JIT-compiles the PTX on newer GPUs) but is not decisive. Never throws: a field it cannot
// read says why.
#pragma once

#include <string>

namespace brt::kernels::cuda {

struct CudaVersions {
  std::string device;              // "NVIDIA H200"
  std::string compute_capability;  // "90"
  std::string driver, runtime;     // "13.0"
  std::string cublas, cufft;       // "13.0.0", "12000"
};

CudaVersions cuda_versions(int device);

}  // namespace brt::kernels::cuda
