#include "core/layers/output_projection.h"

#include "core/layers/linear.h"

namespace brt::core {

template <typename T>
void add_row_parallel(kernels::Backend<T>& be, const TensorParallel& tp, const T* a, int rows,
                      int in, const T* w, int D, const T* x, T* y) {
  const int64_t nd = static_cast<int64_t>(rows) * D;
  if (!tp.active()) {
    be.linear_forward_residual(a, rows, in, w, D, x, y);  // x read as the product's C: no copy
    return;
  }
  linear_forward(be, a, rows, in, w, D, y);
  tp.reduce_output(y, nd);  // row-parallel: the ranks' partial products, summed
  be.add_inplace(y, x, nd);
}

template <typename T>
void dual_output_forward(Backend<T>& be, ParamStore<T>& store, const TensorParallel& tp, int wo,
                         const MlpParams& mlp, MlpActs<T>& mlp_acts, const T* x, const T* a0,
                         const T* a1, int rows, int A, T* y, T* out) {
  const int D = mlp.d_model;
  const int64_t nd = int64_t(rows) * D;
  const T* w = store[wo].value;
  linear_forward(be, a0, rows, A, w, D, y);
  linear_forward(be, a1, rows, A, w + int64_t(A) * D, D, y, T(1));
  tp.reduce_output(y, nd);  // row-parallel Wo (a no-op at TP = 1)
  be.add_inplace(y, x, nd);
  mlp_residual_forward(be, store, mlp, y, rows, mlp_acts, out);
}

template <typename T>
const T* dual_output_backward(Backend<T>& be, ParamStore<T>& store, int wo, const MlpParams& mlp,
                              const MlpActs<T>& mlp_acts, const T* y, const T* a0, const T* a1,
                              int rows, int A, const T* dout, BackwardScratch<T>& scratch,
                              T* da0, T* da1) {
  const int D = mlp.d_model;
  // out = y + MLP(y): dy = dout + MLP'(y)ᵀ·dout, written by the MLP norm's backward.
  T* dy = scratch.d_model.data();
  mlp_backward(be, store, mlp, y, rows, mlp_acts, dout, dy, scratch.d_ff.data(),
               scratch.d_norm.data(), nullptr, dout);
  auto& w = store[wo];  // da0, da1 written by their products (no zero fills)
  linear_backward(be, a0, rows, A, w.value, D, dy, da0, w.grad, T(0));
  linear_backward(be, a1, rows, A, w.value + int64_t(A) * D, D, dy, da1, w.grad + int64_t(A) * D,
                  T(0));
  return dy;  // y = x + ...: the caller's dx gets dy in its input norm's backward
}

#define BRT_INSTANTIATE_OUTPUT_PROJECTION(T)                                                   \
  template void add_row_parallel<T>(kernels::Backend<T>&, const TensorParallel&, const T*, int, \
                                    int, const T*, int, const T*, T*);                         \
  template void dual_output_forward<T>(Backend<T>&, ParamStore<T>&, const TensorParallel&, int, \
                                       const MlpParams&, MlpActs<T>&, const T*, const T*,      \
                                       const T*, int, int, T*, T*);                            \
  template const T* dual_output_backward<T>(Backend<T>&, ParamStore<T>&, int, const MlpParams&, \
                                            const MlpActs<T>&, const T*, const T*, const T*, int, \
                                            int, const T*, BackwardScratch<T>&, T*, T*);

BRT_INSTANTIATE_OUTPUT_PROJECTION(float)
BRT_INSTANTIATE_OUTPUT_PROJECTION(double)

}  // namespace brt::core
