#include "kernels/cuda/gemm/epilogue_gemm.h"

#include <algorithm>
#include <stdexcept>

#include "kernels/cuda/cuda_check.h"

namespace brt::kernels::cuda {

namespace {

// The largest power of two (≤ 256) dividing the address: what cuBLASLt's heuristic may assume
// (its preference defaults to 256 bytes, and an algorithm picked for more would misread).
uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

// One call's cuBLASLt descriptors, destroyed with it.
struct Descriptors {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descriptors() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    for (cublasLtMatrixLayout_t l : {a, b, c, d})
      if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

template <typename V>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const V& value) {
  BRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}
template <typename V>
void set(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const V& value) {
  BRT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

}  // namespace

EpilogueGemm::EpilogueGemm(void* workspace, std::size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  BRT_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

EpilogueGemm::~EpilogueGemm() {
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

bool EpilogueGemm::relu_aux(const Product& p, void* mask, cudaStream_t stream) {
  return run(CUBLASLT_EPILOGUE_RELU_AUX, p, mask, stream);
}

bool EpilogueGemm::drelu(const Product& p, const void* mask, cudaStream_t stream) {
  return run(CUBLASLT_EPILOGUE_DRELU, p, mask, stream);
}

bool EpilogueGemm::residual(const Product& p, cudaStream_t stream) {
  if (p.c == nullptr || p.c == p.d) throw std::invalid_argument("EpilogueGemm::residual: C must be another buffer than D");
  return run(CUBLASLT_EPILOGUE_DEFAULT, p, nullptr, stream);
}

bool EpilogueGemm::run(cublasLtEpilogue_t epilogue, const Product& p, const void* mask, cudaStream_t stream) {
  Descriptors x;
  BRT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&x.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = p.transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  set(x.desc, CUBLASLT_MATMUL_DESC_TRANSA, ta);
  set(x.desc, CUBLASLT_MATMUL_DESC_TRANSB, tb);
  set(x.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) {  // the ReLU's bit-mask
    set(x.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, mask);
    set(x.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, relu_mask_ld(p.m));
  }
  const int a_rows = p.transa ? p.k : p.m, a_cols = p.transa ? p.m : p.k;
  BRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&x.a, CUDA_R_16BF, uint64_t(a_rows), uint64_t(a_cols), a_rows));
  BRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&x.b, CUDA_R_16BF, uint64_t(p.k), uint64_t(p.n), p.k));
  const cudaDataType out_type = p.d_bf16 ? CUDA_R_16BF : CUDA_R_32F;
  BRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&x.c, out_type, uint64_t(p.m), uint64_t(p.n), p.m));
  BRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&x.d, out_type, uint64_t(p.m), uint64_t(p.n), p.m));
  const float* c = p.c != nullptr ? p.c : p.d;
  const uint32_t align[4] = {alignment(p.a), alignment(p.b), alignment(c), alignment(p.d)};
  uint64_t aligns = mask != nullptr ? alignment(mask) : 0;
  for (uint32_t al : align) aligns = aligns * 512 + al;
  Plan& plan = plans_[{int(epilogue), p.m, p.n, p.k, p.transa, p.c != nullptr, p.d_bf16, aligns}];
  if (!plan.asked) {
    plan.asked = true;
    BRT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&x.pref));
    set(x.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(workspace_bytes_));
    set(x.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[0]);
    set(x.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[1]);
    set(x.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2]);
    set(x.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[3]);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(handle_, x.desc, x.a, x.b, x.c, x.d, x.pref, 1, &result, &found);
    // Not supported is an answer (the caller falls back), as is a workspace it cannot have; any
    // other failure is a misuse of cuBLASLt and throws.
    if (s != CUBLAS_STATUS_NOT_SUPPORTED) BRT_CUBLAS_CHECK(s);
    plan.available = s == CUBLAS_STATUS_SUCCESS && found >= 1 && result.state == CUBLAS_STATUS_SUCCESS &&
                     result.workspaceSize <= workspace_bytes_;
    plan.algo = result.algo;
  }
  if (!plan.available) return false;
  const float one = 1.0f, beta = p.c != nullptr ? 1.0f : 0.0f;
  BRT_CUBLAS_CHECK(cublasLtMatmul(handle_, x.desc, &one, p.a, x.a, p.b, x.b, &beta, c, x.c, p.d, x.d, &plan.algo,
                                  workspace_, workspace_bytes_, stream));
  return true;
}

std::string EpilogueGemm::describe() const {
  constexpr int kKinds = 3;
  const int epilogues[kKinds] = {int(CUBLASLT_EPILOGUE_RELU_AUX), int(CUBLASLT_EPILOGUE_DRELU),
                                 int(CUBLASLT_EPILOGUE_DEFAULT)};
  const char* names[kKinds] = {"RELU_AUX", "DRELU", "residual"};
  int asked[kKinds] = {}, available[kKinds] = {};
  for (const auto& [key, plan] : plans_)
    for (int i = 0; i < kKinds; ++i)
      if (std::get<0>(key) == epilogues[i]) {
        asked[i] += plan.asked ? 1 : 0;
        available[i] += plan.available ? 1 : 0;
      }
  std::string s;
  bool all = true;
  for (int i = 0; i < kKinds; ++i) {
    if (asked[i] == 0) continue;
    s += std::string(s.empty() ? "" : ", ") + names[i] + " at " + std::to_string(available[i]) + " of " +
         std::to_string(asked[i]) + " problems";
    all = all && available[i] == asked[i];
  }
  return s.empty() || all ? s : s + " (the others: the products and their own kernels)";
}

}  // namespace brt::kernels::cuda
