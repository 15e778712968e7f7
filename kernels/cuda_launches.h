// How many device launches (kernels, cuBLAS and cuFFT calls, copies and fills) the CUDA backend
// makes per backend call of each kernel class: the
// planner's launch term (launch/plan/counted_step.h) is calls × these × the launch cost. The
// counting backend counts backend calls (kernels/counting_backend.h); these turn them into the
// launches the device sees, as the strict emulator measured them on micro models of five
// variants (tests/cuda_emulation/launches.cpp, which fails when a class is off by > 25%).
#pragma once

#include "kernels/counting_backend.h"

namespace brt::kernels {

// Measured (launches.cpp, micro models, every variant the same to ~20%): a GEMM is one cuBLAS
// call (in bf16 its operands' conversions are counted apart: CountingBackend::bf16_conversions,
// the planner's "bf16 conversions" line); the attentions are several kernels per call, more in bf16 (the
// tensor-core path's conversions and batched products); the loss 3; the SSM's FFT convolutions
// and S4D passes ~4; a few elementwise calls are two kernels.
inline double cuda_launches_per_call(KernelClass c, bool bf16) {
  switch (c) {
    case KernelClass::kGemm: return 1.0;
    case KernelClass::kWindowAttention: return bf16 ? 11.0 : 3.5;
    case KernelClass::kCrossAttention: return bf16 ? 10.0 : 2.5;
    case KernelClass::kElementwise: return 1.17;
    case KernelClass::kCrossEntropy: return 3.0;
    case KernelClass::kSsm: return 4.0;
  }
  return 1.0;
}

// The optimizer's launches are listed per step, tensor by tensor: kernels/cuda_optimizer_launches.h.

}  // namespace brt::kernels
