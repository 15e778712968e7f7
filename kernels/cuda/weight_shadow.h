// The bf16 shadow of a model's weights (Backend::weights_fixed; the CUDA backend in bf16): how
// many conversion launches make it, and which products' operands read it. Host-only, and shared
// by the CUDA backend and the counting backend, so that the planner counts what the device does.
#pragma once

#include <cstddef>
#include <cstdint>

namespace brt::kernels::cuda {

// The shadow is rounded in runs of this many elements, a conversion launch each (the
// conversion kernel's shape is in int rows × cols).
constexpr int64_t kWeightShadowRun = int64_t{1} << 30;
inline int64_t weight_shadow_launches(int64_t n) { return n <= 0 ? 0 : (n + kWeightShadowRun - 1) / kWeightShadowRun; }

// Where operand p ([rows, cols] with row stride ld, of elements of elem_bytes) lies in the
// weights [weights, weights + n), in elements, or -1 when a product must round it itself: it is
// not wholly inside, its rows are not contiguous (ld != cols), or its bf16 copy would not be
// 16-byte aligned (offset a multiple of 8). With these the product reads the shadow with the
// same shapes, leading dimensions and alignment cuBLAS sees for a copy rounded per call.
inline int64_t weight_shadow_offset(const void* weights, int64_t n, const void* p, int64_t rows, int64_t cols,
                                    int64_t ld, std::size_t elem_bytes) {
  if (weights == nullptr || n <= 0 || rows <= 0 || cols <= 0 || ld != cols) return -1;
  const auto at = reinterpret_cast<std::uintptr_t>(p), begin = reinterpret_cast<std::uintptr_t>(weights);
  if (at < begin || (at - begin) % elem_bytes != 0) return -1;
  const auto offset = int64_t((at - begin) / elem_bytes);
  if (offset >= n || rows * cols > n - offset || offset % 8 != 0) return -1;
  return offset;
}

}  // namespace brt::kernels::cuda
