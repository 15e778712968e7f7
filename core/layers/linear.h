// y = x·W for row vectors (model.md §0: matrices act on row vectors, W stored [in, out]) and
// its backward. Thin wrappers over Backend::gemm so layer code reads like the math.
#pragma once

#include "kernels/backend.h"

namespace brt::core {

using kernels::Backend;
using kernels::Trans;

// y[n,out] = x[n,in]·W[in,out] + beta·y
template <typename T>
void linear_forward(Backend<T>& be, const T* x, int n, int in, const T* w, int out, T* y,
                    T beta = T(0)) {
  be.gemm(Trans::N, Trans::N, n, out, in, T(1), x, in, w, out, beta, y, out);
}

// dx[n,in] = dy·Wᵀ + dx_beta·dx (skipped when dx is null): dx_beta 1 accumulates, 0 overwrites
// (the product's first write, folding in the zero fill a separate kernel would do: one launch
// fewer); dW[in,out] += xᵀ·dy.
template <typename T>
void linear_backward(Backend<T>& be, const T* x, int n, int in, const T* w, int out,
                     const T* dy, T* dx, T* dw, T dx_beta = T(1)) {
  be.linear_backward(x, n, in, w, out, dy, dx, dw, dx_beta);
}

}  // namespace brt::core
