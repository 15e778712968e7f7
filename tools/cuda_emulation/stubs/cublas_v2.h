// Host emulation of the cuBLAS calls kernels/cuda makes: column-major GEMM exactly as cuBLAS
// defines it (so the backend's row-major → column-major operand swap is really exercised),
// in double accumulation; GemmEx reads bf16 operands. Types for cuda_check.h too.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>
#include "cuda_bf16.h"
#include "cuda_runtime.h"
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_PEDANTIC_MATH = 2 };
enum cudaDataType { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
struct cublasContext { int unused; };
using cublasHandle_t = cublasContext*;
inline const char* cublasGetStatusName(cublasStatus_t) { return "err"; }
inline cublasStatus_t cublasCreate(cublasHandle_t* h) { *h = new cublasContext{0}; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasDestroy(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetWorkspace(cublasHandle_t, void*, size_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
namespace emu {
// C (m×n, ldc) = alpha op(A) op(B) + beta C, all column-major; element (i, j) of X at X[i + j*ld].
template <typename LoadA, typename LoadB>
cublasStatus_t gemm_col_major(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              float alpha, LoadA a, int lda, LoadB b, int ldb, float beta, float* c,
                              int ldc) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int p = 0; p < k; ++p) {
        const double av = ta == CUBLAS_OP_N ? a(i + int64_t(p) * lda) : a(p + int64_t(i) * lda);
        const double bv = tb == CUBLAS_OP_N ? b(p + int64_t(j) * ldb) : b(j + int64_t(p) * ldb);
        s += av * bv;
      }
      float& out = c[i + int64_t(j) * ldc];
      out = float(alpha * s + (beta == 0.0f ? 0.0 : double(beta) * out));
    }
  return CUBLAS_STATUS_SUCCESS;
}
inline float bf16_to_float(const void* base, int64_t i) {
  uint16_t bits; std::memcpy(&bits, static_cast<const char*>(base) + 2 * i, 2);
  const uint32_t u = uint32_t(bits) << 16; float f; std::memcpy(&f, &u, 4); return f;
}
}  // namespace emu
inline cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                                  int n, int k, const float* alpha, const float* A, int lda,
                                  const float* B, int ldb, const float* beta, float* C, int ldc) {
  // Host scalars are read at the call, as cuBLAS's host pointer mode does (a graph keeps them).
  const float a = *alpha, b = *beta;
  emu::enqueue(emu::NodeKind::kKernel, "cublasSgemm", [=] {
    auto la = [A](int64_t i) { return A[i]; };
    auto lb = [B](int64_t i) { return B[i]; };
    emu::gemm_col_major(ta, tb, m, n, k, a, la, lda, lb, ldb, b, C, ldc);
  });
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                                   int n, int k, const void* alpha, const void* A, cudaDataType at,
                                   int lda, const void* B, cudaDataType bt, int ldb, const void* beta,
                                   void* C, cudaDataType ct, int ldc, cublasComputeType_t,
                                   cublasGemmAlgo_t) {
  if (at != CUDA_R_16BF || bt != CUDA_R_16BF || ct != CUDA_R_32F) return CUBLAS_STATUS_INVALID_VALUE;
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  emu::enqueue(emu::NodeKind::kKernel, "cublasGemmEx", [=] {
    auto la = [A](int64_t i) { return emu::bf16_to_float(A, i); };
    auto lb = [B](int64_t i) { return emu::bf16_to_float(B, i); };
    emu::gemm_col_major(ta, tb, m, n, k, a, la, lda, lb, ldb, b, static_cast<float*>(C), ldc);
  });
  return CUBLAS_STATUS_SUCCESS;
}

// Strided-batched GemmEx (bf16 operands, fp32 output, fp32 compute only: the tensor-core
// attention's calls, kernels/cuda/attention_tc.cu). Every call is recorded so the emulator
// check can assert the types the GPU will see.
namespace emu {
struct BatchedGemmRecord { cudaDataType a, b, c; cublasComputeType_t compute; int m, n, k, batch; };
inline std::vector<BatchedGemmRecord>& batched_gemm_calls() { static std::vector<BatchedGemmRecord> v; return v; }
}  // namespace emu
inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb,
                                                 int m, int n, int k, const void* alpha, const void* A,
                                                 cudaDataType at, int lda, long long sa, const void* B,
                                                 cudaDataType bt, int ldb, long long sb, const void* beta,
                                                 void* C, cudaDataType ct, int ldc, long long sc, int batch,
                                                 cublasComputeType_t compute, cublasGemmAlgo_t) {
  emu::batched_gemm_calls().push_back({at, bt, ct, compute, m, n, k, batch});
  if (at != CUDA_R_16BF || bt != CUDA_R_16BF || ct != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F)
    return CUBLAS_STATUS_INVALID_VALUE;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  emu::enqueue(emu::NodeKind::kKernel, "cublasGemmStridedBatchedEx", [=] {
    for (int i = 0; i < batch; ++i) {
      const char* a = static_cast<const char*>(A) + 2 * sa * i;
      const char* b = static_cast<const char*>(B) + 2 * sb * i;
      auto la = [a](int64_t e) { return emu::bf16_to_float(a, e); };
      auto lb = [b](int64_t e) { return emu::bf16_to_float(b, e); };
      emu::gemm_col_major(ta, tb, m, n, k, al, la, lda, lb, ldb, be, static_cast<float*>(C) + sc * i, ldc);
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}
