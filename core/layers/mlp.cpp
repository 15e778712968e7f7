#include "core/layers/mlp.h"

#include "core/layers/linear.h"

namespace brt::core {

template <typename T>
void MlpActs<T>::allocate(kernels::Memory& memory, const MlpParams& p, int rows) {
  h.allocate(memory, static_cast<size_t>(rows) * p.d_model, "mlp input h");
  rstd.allocate(memory, size_t(rows), "mlp rstd");
  m.allocate(memory, static_cast<size_t>(rows) * p.d_ff, "mlp hidden m");
  relu_mask.allocate(memory, size_t(kernels::relu_mask_bytes(rows, p.d_ff)), "mlp relu mask");
  if (p.tp.active()) u.allocate(memory, static_cast<size_t>(rows) * p.d_model, "mlp partial u");
}

template <typename T>
int64_t MlpActs<T>::bytes() const {
  return static_cast<int64_t>(h.size() + rstd.size() + m.size() + u.size()) *
             static_cast<int64_t>(sizeof(T)) +
         static_cast<int64_t>(relu_mask.size());
}

template <typename T>
MlpParams declare_mlp(ParamStore<T>& store, const std::string& norm_name,
                      const std::string& prefix_w, int d_model, int d_ff,
                      const TensorParallel& tp) {
  MlpParams p;
  p.d_model = d_model;
  p.d_ff = tp.local(d_ff, "model.d_ff");
  p.tp = tp;
  p.norm = declare_norm(store, norm_name, d_model);
  p.w1 = declare_matrix(store, prefix_w + "w1", d_model, d_ff, 1.0, tp.columns());
  p.w2 = declare_matrix(store, prefix_w + "w2", d_ff, d_model, 1.0, tp.rows());
  return p;
}

namespace {

// h = RMSNorm(y), m = relu(h·W1) and its mask.
template <typename T>
void mlp_hidden_forward(Backend<T>& be, ParamStore<T>& store, const MlpParams& p, const T* y, int rows,
                        MlpActs<T>& acts) {
  be.rmsnorm_forward_for_products(y, store[p.norm].value, rows, p.d_model, acts.h.data(), acts.rstd.data());
  be.linear_relu_forward(acts.h.data(), rows, p.d_model, store[p.w1].value, p.d_ff, acts.m.data(),
                         acts.relu_mask.data(), p.hidden_for_products);
}

}  // namespace

template <typename T>
void mlp_residual_forward(Backend<T>& be, ParamStore<T>& store, const MlpParams& p, const T* y, int rows,
                          MlpActs<T>& acts, T* out) {
  if (p.tp.active()) {
    be.copy(y, static_cast<int64_t>(rows) * p.d_model, out);
    mlp_forward(be, store, p, y, rows, acts, out, T(1));
    return;
  }
  mlp_hidden_forward(be, store, p, y, rows, acts);
  be.linear_forward_residual(acts.m.data(), rows, p.d_ff, store[p.w2].value, p.d_model, y, out);
}

template <typename T>
void mlp_forward(Backend<T>& be, ParamStore<T>& store, const MlpParams& p, const T* y, int rows,
                 MlpActs<T>& acts, T* u, T beta) {
  const int D = p.d_model, F = p.d_ff;
  mlp_hidden_forward(be, store, p, y, rows, acts);
  if (!p.tp.active()) {
    linear_forward(be, acts.m.data(), rows, F, store[p.w2].value, D, u, beta);
    return;
  }
  // Row-parallel W2: sum the ranks' partial products, then add to u (not u itself, which may
  // already hold the replicated residual).
  const int64_t nd = static_cast<int64_t>(rows) * D;
  linear_forward(be, acts.m.data(), rows, F, store[p.w2].value, D, acts.u.data());
  p.tp.reduce_output(acts.u.data(), nd);
  if (beta == T(0)) {
    be.copy(acts.u.data(), nd, u);
  } else {
    if (beta != T(1)) be.scale_inplace(u, nd, beta);
    be.add_inplace(u, acts.u.data(), nd);
  }
}

template <typename T>
void mlp_backward(Backend<T>& be, ParamStore<T>& store, const MlpParams& p, const T* y,
                  int rows, const MlpActs<T>& acts, const T* du, T* dy, T* scratch_f,
                  T* scratch_d, std::type_identity_t<const T*> dm_extra,
                  std::type_identity_t<const T*> dy_residual) {
  const int D = p.d_model, F = p.d_ff;
  // Through both products: the gradient before the ReLU, (du·W2ᵀ + dm_extra)·(m > 0), in
  // scratch_f (the backend's own precision), W2's and W1's gradients, and dh.
  T* dh = scratch_d;
  auto& w1 = store[p.w1];
  auto& w2 = store[p.w2];
  be.mlp_products_backward(acts.h.data(), w1.value, acts.m.data(), acts.relu_mask.data(), rows, D, F, w2.value, D,
                           du, dm_extra, scratch_f, dh, w1.grad, w2.grad);
  p.tp.reduce_input_grad(dh, static_cast<int64_t>(rows) * D);  // column-parallel W1
  auto& g = store[p.norm];
  be.rmsnorm_backward_residual(y, g.value, acts.rstd.data(), dh, dy_residual, dy_residual == nullptr, rows, D,
                               dy, g.grad);
}

#define BRT_INSTANTIATE_MLP(T)                                                                 \
  template struct MlpActs<T>;                                                                  \
  template MlpParams declare_mlp<T>(ParamStore<T>&, const std::string&, const std::string&,    \
                                    int, int, const TensorParallel&);                          \
  template void mlp_forward<T>(Backend<T>&, ParamStore<T>&, const MlpParams&, const T*, int,   \
                               MlpActs<T>&, T*, T);                                            \
  template void mlp_residual_forward<T>(Backend<T>&, ParamStore<T>&, const MlpParams&, const T*, \
                                        int, MlpActs<T>&, T*);                                 \
  template void mlp_backward<T>(Backend<T>&, ParamStore<T>&, const MlpParams&, const T*, int,  \
                                const MlpActs<T>&, const T*, T*, T*, T*, const T*, const T*);

BRT_INSTANTIATE_MLP(float)
BRT_INSTANTIATE_MLP(double)

}  // namespace brt::core
