// Products whose element-wise neighbours run inside them, through cuBLASLt (docs/gpu.md):
//  - the MLP's ReLU (model.md §4): the RELU_AUX epilogue on the first product writes relu(x·w)
//    and a bit-mask of where the product was positive, and DRELU on the second product's input
//    gradient multiplies by that mask (adding C first), so neither the ReLU nor its gradient is
//    a pass over the hidden activations of its own;
//  - the residual adds (§4): D = A·B + C with C another buffer than D (cublasGemmEx reads C
//    where it writes), so y = x + a·Wo needs no copy of x into y first.
// bf16 operands, fp32 output and compute, as the backend's cublasGemmEx. Whether cuBLASLt has an
// algorithm for a product at a shape and the operands' alignments is asked once and kept with
// the algorithm; where it has none, the caller runs the product and its own kernels.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

namespace brt::kernels::cuda {

// The bit-mask's leading dimension in bits for an output of `rows` (column-major) rows:
// cuBLASLt asks for a multiple of 128 (kernels::relu_mask_bytes sizes it).
inline int64_t relu_mask_ld(int64_t rows) { return (rows + 127) / 128 * 128; }

class EpilogueGemm {
 public:
  // The cuBLASLt workspace (the backend's cuBLAS workspace: its calls run in stream order).
  EpilogueGemm(void* workspace, std::size_t workspace_bytes);
  ~EpilogueGemm();
  EpilogueGemm(const EpilogueGemm&) = delete;
  EpilogueGemm& operator=(const EpilogueGemm&) = delete;

  // Column-major, as cuBLAS sees the backend's row-major products: D [m, n] = op(A)·B + beta·C
  // with A stored [m, k] (transa: [k, m]), B [k, n], C and D [m, n], each dense (ld = rows).
  struct Product {
    int m = 0, n = 0, k = 0;
    bool transa = false;
    const void* a = nullptr;  // bf16
    const void* b = nullptr;  // bf16
    const float* c = nullptr;  // null: beta = 0
    float* d = nullptr;
    bool d_bf16 = false;  // D (and C) hold bf16, in the first half of d's bytes
  };
  // D = relu(A·B) and the mask; false (nothing enqueued) where cuBLASLt has no algorithm.
  bool relu_aux(const Product& p, void* mask, cudaStream_t stream);
  // D = (op(A)·B + C)·mask; false (nothing enqueued) where cuBLASLt has no algorithm.
  bool drelu(const Product& p, const void* mask, cudaStream_t stream);
  // D = op(A)·B + C, C (not null) another buffer than D; false (nothing enqueued) where
  // cuBLASLt has no algorithm.
  bool residual(const Product& p, cudaStream_t stream);
  // What cuBLASLt answered so far, e.g. "RELU_AUX at 2 of 2 problems, DRELU at 1 of 2, residual
  // at 2 of 2 (the others: the products and their own kernels)"; "" before any product.
  std::string describe() const;

 private:
  struct Plan {
    bool asked = false, available = false;
    cublasLtMatmulAlgo_t algo{};
  };
  bool run(cublasLtEpilogue_t epilogue, const Product& p, const void* mask, cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  // (epilogue, m, n, k, transa, with C, D in bf16, the alignments of A, B, C, D and the mask)
  std::map<std::tuple<int, int, int, int, bool, bool, bool, uint64_t>, Plan> plans_;
};

}  // namespace brt::kernels::cuda
