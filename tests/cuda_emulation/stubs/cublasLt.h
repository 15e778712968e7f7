// Host emulation of the cuBLASLt calls kernels/cuda makes (kernels/cuda/gemm/epilogue_gemm.cpp):
// bf16 A and B, fp32 or bf16 C and D (bf16: the fp32 result rounded to nearest even, as the
// backend's conversion kernel rounds), fp32 compute and scale, column-major, in double accumulation like
// the emulated cuBLAS (cublas_v2.h here); the DEFAULT, RELU_AUX and DRELU epilogues as the real
// cublasLt.h documents them. The ReLU bit-mask is this emulator's format (bit i + j·ld, least
// significant bit first in each byte): only cuBLASLt reads what cuBLASLt writes. Strict about what the header states:
// attribute sizes, the mask's leading dimension (a multiple of 128, at least D's rows) and that
// it is device memory, C's layout equal to D's; and an algorithm remembers the problem and the
// alignments its heuristic was told, so a call with other shapes or less aligned pointers fails.
// EMU_CUBLASLT_NO_EPILOGUE=1: the heuristic finds no algorithm for an epilogue (what a
// cuBLASLt without them answers), so the callers' fallbacks run; =all: none for any product
// (the residual products' fallback too); =bf16: none for an epilogue with a bf16 output.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include "cublas_v2.h"
enum cublasLtEpilogue_t {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_RELU = 2,
  CUBLASLT_EPILOGUE_RELU_AUX = 2 | 128,
  CUBLASLT_EPILOGUE_DRELU = 8 | 128,
};
enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
};
enum cublasLtMatmulPreferenceAttributes_t {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};
struct cublasLtContext {};
using cublasLtHandle_t = cublasLtContext*;
struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t compute;
  cudaDataType scale;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* aux = nullptr;
  int64_t aux_ld = 0;
};
using cublasLtMatmulDesc_t = cublasLtMatmulDescOpaque_t*;
struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
};
using cublasLtMatrixLayout_t = cublasLtMatrixLayoutOpaque_t*;
struct cublasLtMatmulPreferenceOpaque_t {
  uint64_t max_workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D: cublasLt.h's defaults
};
using cublasLtMatmulPreference_t = cublasLtMatmulPreferenceOpaque_t*;
typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) { *h = new cublasLtContext{}; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute, cudaDataType scale) {
  *d = new cublasLtMatmulDescOpaque_t{compute, scale};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { delete d; return CUBLAS_STATUS_SUCCESS; }
namespace emu {
// Copies an attribute of exactly `size` bytes, as cuBLASLt checks sizeInBytes.
inline cublasStatus_t lt_attribute(void* field, size_t size, const void* buf, size_t bytes, const char* name) {
  if (buf == nullptr || bytes != size)
    return cublas_fail(CUBLAS_STATUS_INVALID_VALUE, std::string(name) + ": " + std::to_string(bytes) + " bytes, the attribute has " + std::to_string(size));
  std::memcpy(field, buf, size);
  return CUBLAS_STATUS_SUCCESS;
}
}  // namespace emu
inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void* buf, size_t bytes) {
  switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return emu::lt_attribute(&d->transa, 4, buf, bytes, "TRANSA");
    case CUBLASLT_MATMUL_DESC_TRANSB: return emu::lt_attribute(&d->transb, 4, buf, bytes, "TRANSB");
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return emu::lt_attribute(&d->epilogue, 4, buf, bytes, "EPILOGUE");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return emu::lt_attribute(&d->aux, 8, buf, bytes, "EPILOGUE_AUX_POINTER");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return emu::lt_attribute(&d->aux_ld, 8, buf, bytes, "EPILOGUE_AUX_LD");
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}
inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
  if (ld < int64_t(rows)) return emu::cublas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate: ld under rows");
  *l = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { delete l; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) { *p = new cublasLtMatmulPreferenceOpaque_t{}; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { delete p; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a, const void* buf, size_t bytes) {
  if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) return emu::lt_attribute(&p->max_workspace, 8, buf, bytes, "MAX_WORKSPACE_BYTES");
  if (a >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES)
    return emu::lt_attribute(&p->align[a - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], 4, buf, bytes, "MIN_ALIGNMENT");
  return CUBLAS_STATUS_INVALID_VALUE;
}
namespace emu {
// Why this problem is outside what this emulation implements (the backend's use of cuBLASLt),
// or "" when it is inside.
inline std::string lt_problem(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                              cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D) {
  if (d->compute != CUBLAS_COMPUTE_32F || d->scale != CUDA_R_32F) return "compute and scale must be fp32";
  if (A->type != CUDA_R_16BF || B->type != CUDA_R_16BF || (D->type != CUDA_R_32F && D->type != CUDA_R_16BF) ||
      C->type != D->type)
    return "types must be bf16 A, B and C, D both fp32 or both bf16";
  if (C->rows != D->rows || C->cols != D->cols || C->ld != D->ld) return "C's layout differs from D's";
  const uint64_t m = D->rows, n = D->cols, k = d->transa == CUBLAS_OP_N ? A->cols : A->rows;
  const uint64_t a_m = d->transa == CUBLAS_OP_N ? A->rows : A->cols;
  const uint64_t b_k = d->transb == CUBLAS_OP_N ? B->rows : B->cols, b_n = d->transb == CUBLAS_OP_N ? B->cols : B->rows;
  if (a_m != m || b_k != k || b_n != n) return "op(A)·op(B) does not have D's shape";
  if (d->epilogue != CUBLASLT_EPILOGUE_DEFAULT && d->epilogue != CUBLASLT_EPILOGUE_RELU_AUX && d->epilogue != CUBLASLT_EPILOGUE_DRELU)
    return "epilogue " + std::to_string(d->epilogue) + " is not emulated";
  if (d->epilogue != CUBLASLT_EPILOGUE_DEFAULT && (d->aux == nullptr || d->aux_ld % 128 != 0 || d->aux_ld < int64_t(m)))
    return "a ReLU mask needs EPILOGUE_AUX_POINTER and EPILOGUE_AUX_LD a multiple of 128, at least D's rows";
  return "";
}
inline uint32_t lt_alignment(const void* p) {
  uint32_t a = 256;
  while (a > 1 && reinterpret_cast<uintptr_t>(p) % a != 0) a /= 2;
  return a;
}
}  // namespace emu
inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t A,
                                                     cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                                     cublasLtMatmulPreference_t pref, int requested,
                                                     cublasLtMatmulHeuristicResult_t* results, int* returned) {
  *returned = 0;
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  const std::string why = emu::lt_problem(d, A, B, C, D);
  if (!why.empty()) return emu::cublas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulAlgoGetHeuristic: " + why);
  const char* refuse = std::getenv("EMU_CUBLASLT_NO_EPILOGUE");
  const std::string refused = refuse != nullptr ? refuse : "";
  if ((refused == "1" && d->epilogue != CUBLASLT_EPILOGUE_DEFAULT) || refused == "all" ||
      (refused == "bf16" && d->epilogue != CUBLASLT_EPILOGUE_DEFAULT && D->type == CUDA_R_16BF))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  cublasLtMatmulHeuristicResult_t r{};
  r.algo.data[0] = d->epilogue;
  r.algo.data[1] = D->rows, r.algo.data[2] = D->cols, r.algo.data[3] = d->transa == CUBLAS_OP_N ? A->cols : A->rows;
  r.algo.data[4] = uint64_t(d->transa);
  for (int i = 0; i < 4; ++i) r.algo.data[5] = r.algo.data[5] * 512 + pref->align[i];
  r.workspaceSize = 0;
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  results[0] = r;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void* alpha, const void* A,
                                     cublasLtMatrixLayout_t Al, const void* B, cublasLtMatrixLayout_t Bl, const void* beta,
                                     const void* C, cublasLtMatrixLayout_t Cl, void* D, cublasLtMatrixLayout_t Dl,
                                     const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                                     cudaStream_t stream) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const std::string why = emu::lt_problem(d, Al, Bl, Cl, Dl);
  if (!why.empty()) return emu::cublas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: " + why);
  const int64_t m = int64_t(Dl->rows), n = int64_t(Dl->cols), k = int64_t(d->transa == CUBLAS_OP_N ? Al->cols : Al->rows);
  uint64_t aligns = 0;
  for (const void* p : {A, B, C, static_cast<const void*>(D)}) aligns = aligns * 512 + emu::lt_alignment(p);
  const uint64_t want = algo->data[5];
  for (int i = 0; i < 4; ++i)
    if (((aligns >> (9 * (3 - i))) & 511) < ((want >> (9 * (3 - i))) & 511))
      return emu::cublas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: an operand less aligned than its algorithm's heuristic was told");
  if (algo->data[0] != d->epilogue || int64_t(algo->data[1]) != m || int64_t(algo->data[2]) != n || int64_t(algo->data[3]) != k ||
      algo->data[4] != uint64_t(d->transa))
    return emu::cublas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: the algorithm was found for another problem");
  const bool mask = d->epilogue != CUBLASLT_EPILOGUE_DEFAULT;
  const int64_t mask_bytes = d->aux_ld / 8 * n;
  if (mask && !emu::is_device(d->aux, size_t(mask_bytes)))
    return emu::cublas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: the ReLU mask is not device memory of " + std::to_string(mask_bytes) + " bytes");
  if (workspace_bytes > 0 && !emu::is_device(workspace, workspace_bytes))
    return emu::cublas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: the workspace is not device memory of that size");
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  const bool ta = d->transa != CUBLAS_OP_N;
  const int64_t lda = Al->ld, ldb = Bl->ld, ldc = Cl->ld, ldd = Dl->ld, aux_ld = d->aux_ld;
  const bool out_bf16 = Dl->type == CUDA_R_16BF;
  const uint32_t epilogue = d->epilogue;
  auto* bits = static_cast<unsigned char*>(const_cast<void*>(d->aux));
  const cudaError_t e = emu::enqueue(stream, emu::NodeKind::kKernel, "cublasLtMatmul", [=] {
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += double(emu::bf16_to_float(A, ta ? p + i * lda : i + p * lda)) * double(emu::bf16_to_float(B, p + j * ldb));
        const float c = be == 0.0f ? 0.0f
                        : out_bf16 ? emu::bf16_to_float(C, i + j * ldc)
                                   : static_cast<const float*>(C)[i + j * ldc];
        const float pre = float(al * s + (be == 0.0f ? 0.0 : double(be) * c));
        const int64_t bit = i + j * aux_ld;
        float out = pre;
        if (epilogue == CUBLASLT_EPILOGUE_RELU_AUX) {
          out = pre > 0.0f ? pre : 0.0f;
          const unsigned char b = static_cast<unsigned char>(1u << (bit % 8));
          bits[bit / 8] = static_cast<unsigned char>(pre > 0.0f ? bits[bit / 8] | b : bits[bit / 8] & ~b);
        } else if (epilogue == CUBLASLT_EPILOGUE_DRELU) {
          out = (bits[bit / 8] >> (bit % 8)) & 1 ? pre : 0.0f;
        }
        if (out_bf16)
          static_cast<__nv_bfloat16*>(D)[i + j * ldd] = __float2bfloat16_rn(out);
        else
          static_cast<float*>(D)[i + j * ldd] = out;
      }
  });
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : emu::cublas_fail(CUBLAS_STATUS_EXECUTION_FAILED, std::string("cublasLtMatmul: ") + cudaGetErrorName(e));
}
