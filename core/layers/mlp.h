// The ReLU MLP of model.md §4: u = ReLU(RMSNorm(y)·W1)·W2 (mlp_residual_forward: with its
// residual, out = y + u), as a forward/backward pair with separate parameter and activation structs (the dual state MLP of
// §5.3 runs it once per block on one set of parameters).
#pragma once

#include <string>
#include <type_traits>

#include "core/param_store.h"
#include "core/sharding/tensor_parallel.h"
#include "kernels/backend.h"

namespace brt::core {

using kernels::Backend;

// u = ReLU(RMSNorm(y)·W1)·W2 + beta·u (model.md §4 without the residual). Under TP with beta = 1
// u must not be all-reduced by the caller: the row-parallel sum is formed here.
// Under TP: W1 column-parallel, W2 row-parallel; d_ff is this rank's F / TP hidden units and
// forward all-reduces m·W2 (model.md §4 unchanged, Megatron's MLP split).
struct MlpParams {
  int norm = -1, w1 = -1, w2 = -1;
  int d_model = 0, d_ff = 0;
  TensorParallel tp;
  // The hidden m is read only by the MLP's products, so a backend may keep it in the precision
  // they read (Backend::linear_relu_forward's y_for_products; CUDA in bf16: bf16). False where
  // something else reads m (the dual state MLP's gate, model.md §5.3).
  bool hidden_for_products = true;
};

template <typename T>
struct MlpActs {
  kernels::Buffer<T> h;     // [rows, D]
  kernels::Buffer<T> rstd;  // [rows]
  kernels::Buffer<T> m;     // [rows, F] after ReLU (F / TP under TP)
  kernels::Buffer<uint8_t> relu_mask;  // kernels::relu_mask_bytes(rows, F): the backend's ReLU mask
  kernels::Buffer<T> u;     // [rows, D] the row-parallel partial sum (TP > 1 only)
  void allocate(kernels::Memory& memory, const MlpParams& p, int rows);
  int64_t bytes() const;
};

template <typename T>
MlpParams declare_mlp(ParamStore<T>& store, const std::string& prefix_norm,
                      const std::string& prefix_w, int d_model, int d_ff,
                      const TensorParallel& tp = {});

template <typename T>
void mlp_forward(Backend<T>& be, ParamStore<T>& store, const MlpParams& p, const T* y, int rows,
                 MlpActs<T>& acts, T* u, T beta);
// The residual MLP block (model.md §4): out = y + MLP(y). Without TP its second product reads
// y as the residual (Backend::linear_forward_residual: no copy of y into out first); with TP,
// a copy of y, then mlp_forward with beta 1.
template <typename T>
void mlp_residual_forward(Backend<T>& be, ParamStore<T>& store, const MlpParams& p, const T* y, int rows,
                          MlpActs<T>& acts, T* out);
// du: gradient w.r.t. u; dm_extra (may be null): an extra gradient w.r.t. the hidden m
// (the dual state MLP's gate reads m, model.md §5.3). Accumulates dy, or with dy_residual
// (the residual path's gradient, u = y + MLP(y)) writes dy = dy_residual + MLP'(y)ᵀ·du in the
// norm's backward pass (no copy of its own); accumulates parameter grads.
// scratch_f: [rows, F], scratch_d: [rows, D].
template <typename T>
void mlp_backward(Backend<T>& be, ParamStore<T>& store, const MlpParams& p, const T* y,
                  int rows, const MlpActs<T>& acts, const T* du, T* dy, T* scratch_f,
                  T* scratch_d, std::type_identity_t<const T*> dm_extra = nullptr,
                  std::type_identity_t<const T*> dy_residual = nullptr);

}  // namespace brt::core
