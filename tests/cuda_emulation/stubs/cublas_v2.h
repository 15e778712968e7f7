// Host emulation of the cuBLAS calls kernels/cuda makes: column-major GEMM exactly as cuBLAS
// defines it (so the backend's row-major → column-major operand swap is really exercised),
// in double accumulation; GemmEx reads bf16 operands. Strict about the handle, as the cuBLAS
// documentation states it: cublasSetStream resets the workspace to the default pool; a
// user workspace (cublasSetWorkspace) must be device memory, 256-byte aligned and at least
// the size the documentation recommends for the device (32 MiB on Hopper, this emulated
// sm_90), and a GEMM inside a stream capture needs one (the default pool would allocate
// during the capture). GEMMs run in stream order and scribble on the first 256 KiB of the
// workspace when they run, so memory shared with it shows.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>
#include "cuda_bf16.h"
#include "cuda_runtime.h"
enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_PEDANTIC_MATH = 2 };
enum cudaDataType { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
struct cublasContext {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;  // null: cuBLAS's default pool
  size_t workspace_bytes = 0;
};
using cublasHandle_t = cublasContext*;
inline const char* cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}
inline cublasStatus_t cublasCreate(cublasHandle_t* h) { *h = new cublasContext{}; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasDestroy(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
  h->stream = s;
  h->workspace = nullptr;  // "unconditionally resets the cuBLAS library workspace back to the default workspace pool"
  h->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}
namespace emu {
constexpr size_t kCublasWorkspaceRecommended = size_t(32) << 20;  // cuBLAS docs, Hopper
inline cublasStatus_t cublas_fail(cublasStatus_t s, const std::string& why) {
  std::fprintf(stderr, "[cuda emulator] %s: %s\n", cublasGetStatusName(s), why.c_str());
  return s;
}
}  // namespace emu
inline cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void* w, size_t bytes) {
  if (w != nullptr && (reinterpret_cast<uintptr_t>(w) % 256 != 0 || !emu::is_device(w, bytes)))
    return emu::cublas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetWorkspace: not 256-byte aligned device memory of that size");
  h->workspace = w;
  h->workspace_bytes = w == nullptr ? 0 : bytes;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
namespace emu {
// Queues a GEMM on the handle's stream after the handle checks.
inline cublasStatus_t cublas_enqueue(cublasHandle_t h, const char* name, std::function<void()> work) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (h->workspace != nullptr && h->workspace_bytes < kCublasWorkspaceRecommended)
    return cublas_fail(CUBLAS_STATUS_INVALID_VALUE, std::string(name) + ": user workspace of " + std::to_string(h->workspace_bytes) +
                                                        " bytes, under the 32 MiB cuBLAS recommends for Hopper");
  if (is_capturing(h->stream) && h->workspace == nullptr) {
    capture_of(resolve(h->stream))->invalidated = true;
    return cublas_fail(CUBLAS_STATUS_NOT_SUPPORTED, std::string(name) + " inside a stream capture without cublasSetWorkspace");
  }
  void* ws = h->workspace;
  const size_t scribble = std::min(h->workspace_bytes, size_t(256) << 10);
  const cudaError_t e = enqueue(h->stream, NodeKind::kKernel, name, [ws, scribble, work = std::move(work)] {
    if (ws != nullptr) std::memset(ws, 0xA5, scribble);
    work();
  });
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : cublas_fail(CUBLAS_STATUS_EXECUTION_FAILED, std::string(name) + ": " + cudaGetErrorName(e));
}
// C (m×n, ldc) = alpha op(A) op(B) + beta C, all column-major; element (i, j) of X at X[i + j*ld].
template <typename LoadA, typename LoadB>
void gemm_col_major(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, LoadA a, int lda,
                    LoadB b, int ldb, float beta, float* c, int ldc) {
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
}
inline float bf16_to_float(const void* base, int64_t i) {
  uint16_t bits; std::memcpy(&bits, static_cast<const char*>(base) + 2 * i, 2);
  const uint32_t u = uint32_t(bits) << 16; float f; std::memcpy(&f, &u, 4); return f;
}
}  // namespace emu
inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                  int n, int k, const float* alpha, const float* A, int lda,
                                  const float* B, int ldb, const float* beta, float* C, int ldc) {
  // Host scalars are read at the call, as cuBLAS's host pointer mode does (a graph keeps them).
  const float a = *alpha, b = *beta;
  return emu::cublas_enqueue(h, "cublasSgemm", [=] {
    auto la = [A](int64_t i) { return A[i]; };
    auto lb = [B](int64_t i) { return B[i]; };
    emu::gemm_col_major(ta, tb, m, n, k, a, la, lda, lb, ldb, b, C, ldc);
  });
}
inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                   int n, int k, const void* alpha, const void* A, cudaDataType at,
                                   int lda, const void* B, cudaDataType bt, int ldb, const void* beta,
                                   void* C, cudaDataType ct, int ldc, cublasComputeType_t,
                                   cublasGemmAlgo_t) {
  if (at != CUDA_R_16BF || bt != CUDA_R_16BF || ct != CUDA_R_32F) return CUBLAS_STATUS_INVALID_VALUE;
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  return emu::cublas_enqueue(h, "cublasGemmEx", [=] {
    auto la = [A](int64_t i) { return emu::bf16_to_float(A, i); };
    auto lb = [B](int64_t i) { return emu::bf16_to_float(B, i); };
    emu::gemm_col_major(ta, tb, m, n, k, a, la, lda, lb, ldb, b, static_cast<float*>(C), ldc);
  });
}

// Strided-batched GemmEx (bf16 operands, fp32 output, fp32 compute only: the tensor-core
// attention's calls, kernels/cuda/attention/attention_tc.cu). Every call is recorded so the emulator
// check can assert the types the GPU will see.
namespace emu {
struct BatchedGemmRecord { cudaDataType a, b, c; cublasComputeType_t compute; int m, n, k, batch; };
inline std::vector<BatchedGemmRecord>& batched_gemm_calls() { static std::vector<BatchedGemmRecord> v; return v; }
}  // namespace emu
inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                                 int m, int n, int k, const void* alpha, const void* A,
                                                 cudaDataType at, int lda, long long sa, const void* B,
                                                 cudaDataType bt, int ldb, long long sb, const void* beta,
                                                 void* C, cudaDataType ct, int ldc, long long sc, int batch,
                                                 cublasComputeType_t compute, cublasGemmAlgo_t) {
  emu::batched_gemm_calls().push_back({at, bt, ct, compute, m, n, k, batch});
  if (at != CUDA_R_16BF || bt != CUDA_R_16BF || ct != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F)
    return CUBLAS_STATUS_INVALID_VALUE;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  return emu::cublas_enqueue(h, "cublasGemmStridedBatchedEx", [=] {
    for (int i = 0; i < batch; ++i) {
      const char* a = static_cast<const char*>(A) + 2 * sa * i;
      const char* b = static_cast<const char*>(B) + 2 * sb * i;
      auto la = [a](int64_t e) { return emu::bf16_to_float(a, e); };
      auto lb = [b](int64_t e) { return emu::bf16_to_float(b, e); };
      emu::gemm_col_major(ta, tb, m, n, k, al, la, lda, lb, ldb, be, static_cast<float*>(C) + sc * i, ldc);
    }
  });
}
