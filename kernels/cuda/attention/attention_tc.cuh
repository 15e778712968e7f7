// Shared by the tensor-core attentions (attention_tc.cu: window; cross_attention_tc.cu): the
// row-major strided-batched bf16 GEMM through cuBLAS, and a grid-stride loop.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/cuda_check.h"

namespace brt::kernels::cuda {

// Row-major strided-batched C[M×N] = op(A)·op(B) + beta·C, bf16 A and B, fp32 C: cuBLAS is
// column-major, so it computes Cᵀ = op(B)ᵀ·op(A)ᵀ with the operands swapped.
inline void batched_gemm(cublasHandle_t handle, bool ta, bool tb, int M, int N, int K,
                  const __nv_bfloat16* A, int lda, int64_t sa, const __nv_bfloat16* B, int ldb,
                  int64_t sb, float beta, float* C, int ldc, int64_t sc, int64_t batch) {
  const float alpha = 1.0f;
  BRT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B,
      CUDA_R_16BF, ldb, sb, A, CUDA_R_16BF, lda, sa, &beta, C, CUDA_R_32F, ldc, sc,
      static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

#define BRT_GRID_STRIDE(e, total)                                                 \
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < (total); \
       e += int64_t{gridDim.x} * blockDim.x)

}  // namespace brt::kernels::cuda
