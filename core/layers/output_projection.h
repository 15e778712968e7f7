// The attention's output projection onto the residual stream, then the MLP block (model.md §4):
//   one source (§4):            y = x + a·Wo                 Wo [A, D]
//   two sources (§5.2, §7.2):   y = x + concat(a0, a1)·Wo    Wo [2A, D];  out = y + MLP(y)
// Under tensor parallelism Wo is row-parallel: the ranks' partial products are all-reduced
// before the replicated residual x is added.
#pragma once

#include "core/layer.h"
#include "core/layers/mlp.h"
#include "core/param_store.h"
#include "core/sharding/tensor_parallel.h"

namespace brt::core {

// y = x + a·W with W [in, D] row-parallel over tp (a: this rank's columns): the partial
// products are all-reduced before the residual x is added (x is replicated; summing it over
// ranks would count it TP times). Backward needs no communication (Megatron's g).
template <typename T>
void add_row_parallel(kernels::Backend<T>& be, const TensorParallel& tp, const T* a, int rows,
                      int in, const T* w, int D, const T* x, T* y);

// The output of a layer whose attention reads two sources (recurrent §5.2: window + state;
// BST §7.2: window + context): y = x + concat(a0, a1)·Wo with Wo [2A, D] — under TP this
// rank's rows of both halves, so the partial products are summed over TP before x is added —
// then out = y + MLP(y) (§4).
template <typename T>
void dual_output_forward(Backend<T>& be, ParamStore<T>& store, const TensorParallel& tp, int wo,
                         const MlpParams& mlp, MlpActs<T>& mlp_acts, const T* x, const T* a0,
                         const T* a1, int rows, int A, T* y, T* out);
// Its backward: accumulates the Wo and MLP gradients, OVERWRITES da0, da1 [rows, A] (which
// must not be scratch.d_model, d_ff or d_norm: those it uses) and returns dy, the gradient
// w.r.t. y in scratch.d_model: the residual path's share of dx, which the caller adds in its
// input norm's backward (projections_backward's dx_residual) before scratch.d_model is reused.
template <typename T>
const T* dual_output_backward(Backend<T>& be, ParamStore<T>& store, int wo, const MlpParams& mlp,
                              const MlpActs<T>& mlp_acts, const T* y, const T* a0, const T* a1,
                              int rows, int A, const T* dout, BackwardScratch<T>& scratch,
                              T* da0, T* da1);

}  // namespace brt::core
