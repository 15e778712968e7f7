#include "core/blocks.h"

#include <algorithm>

#include "core/linear.h"

namespace brt::core {

template <typename T>
int declare_norm(ParamStore<T>& store, const std::string& name, int d_model) {
  return store.declare({name, {d_model}, {InitKind::kOnes}, {}});
}

template <typename T>
int declare_matrix(ParamStore<T>& store, const std::string& name, int in, int out, double gain,
                   ShardSpec shard) {
  InitSpec init{InitKind::kTruncNormal};
  init.gain = gain;
  init.fan_in = in;  // the full fan-in: a shard is the slice of the TP = 1 initialisation
  return store.declare({name, {in, out}, init, shard});
}

template <typename T>
int declare_normal(ParamStore<T>& store, const std::string& name, std::vector<int64_t> shape,
                   double stddev, ShardSpec shard, double mean) {
  InitSpec init{InitKind::kNormal};
  init.stddev = stddev;
  init.value = mean;
  return store.declare({name, std::move(shape), init, shard});
}

template <typename T>
int declare_ones(ParamStore<T>& store, const std::string& name, std::vector<int64_t> shape,
                 ShardSpec shard) {
  return store.declare({name, std::move(shape), {InitKind::kOnes}, shard});
}

template <typename T>
void ProjectionActs<T>::allocate(kernels::Memory& memory, const ProjectionParams& p,
                                 const AttnShape& s, int rows) {
  h.allocate(memory, static_cast<size_t>(rows) * s.d_model, "projection input h");
  rstd.allocate(memory, size_t(rows), "projection rstd");
  out.clear();
  rnorm.clear();
  out.resize(p.weights.size());
  rnorm.resize(p.weights.size());
  for (size_t j = 0; j < p.weights.size(); ++j) {
    out[j].allocate(memory, static_cast<size_t>(rows) * s.width(), "projection output");
    if (p.normalised[j])
      rnorm[j].allocate(memory, static_cast<size_t>(rows) * s.heads, "projection rnorm");
  }
}

template <typename T>
int64_t ProjectionActs<T>::bytes() const {
  int64_t n = h.size() + rstd.size();
  for (const auto& o : out) n += o.size();
  for (const auto& r : rnorm) n += r.size();
  return n * static_cast<int64_t>(sizeof(T));
}

template <typename T>
void projections_forward(Backend<T>& be, ParamStore<T>& store, const ProjectionParams& p,
                         const AttnShape& s, const T* x, int rows, ProjectionActs<T>& acts) {
  const int D = s.d_model, A = s.width();
  be.rmsnorm_forward(x, store[p.norm].value, rows, D, acts.h.data(), acts.rstd.data());
  if (p.ids >= 0) be.add_rows_broadcast(acts.h.data(), store[p.ids].value, rows, p.id_rows, D);
  for (size_t j = 0; j < p.weights.size(); ++j) {
    T* out = acts.out[j].data();
    linear_forward(be, acts.h.data(), rows, D, store[p.weights[j]].value, A, out);
    if (p.normalised[j])
      be.head_l2norm_forward(out, rows, s.heads, s.head_dim, out, acts.rnorm[j].data());
  }
}

template <typename T>
void projections_backward(Backend<T>& be, ParamStore<T>& store, const ProjectionParams& p,
                          const AttnShape& s, const T* x, int rows,
                          const ProjectionActs<T>& acts, std::type_identity_t<std::span<const T* const>> dout,
                          T* dx, T* scratch_a, T* scratch_d) {
  const int D = s.d_model, A = s.width();
  T* dh = scratch_d;
  bool first = true;  // the first product overwrites dh (no zero fill), the others add
  for (size_t j = 0; j < p.weights.size(); ++j) {
    if (dout[j] == nullptr) continue;
    const T* draw = dout[j];
    if (p.normalised[j]) {
      be.fill(scratch_a, static_cast<int64_t>(rows) * A, T(0));
      be.head_l2norm_backward(acts.out[j].data(), acts.rnorm[j].data(), dout[j], rows, s.heads,
                              s.head_dim, scratch_a);
      draw = scratch_a;
    }
    auto& w = store[p.weights[j]];
    linear_backward(be, acts.h.data(), rows, D, w.value, A, draw, dh, w.grad, first ? T(0) : T(1));
    first = false;
  }
  if (first) be.fill(dh, static_cast<int64_t>(rows) * D, T(0));  // no projection had a gradient
  p.tp.reduce_input_grad(dh, static_cast<int64_t>(rows) * D);  // column-parallel conjugate
  if (p.ids >= 0) {
    // h = RMSNorm(x) + ids[row % id_rows]: the IDs receive the sum over the rows that used them.
    // Rows come in whole groups of id_rows (one group per stream).
    T* dids = store[p.ids].grad;
    const int64_t group = static_cast<int64_t>(p.id_rows) * D;
    for (int r = 0; r < rows; r += p.id_rows) be.add_inplace(dids, dh + static_cast<int64_t>(r) * D, group);
  }
  auto& g = store[p.norm];
  be.rmsnorm_backward(x, g.value, acts.rstd.data(), dh, rows, D, dx, g.grad);
}

template <typename T>
void MlpActs<T>::allocate(kernels::Memory& memory, const MlpParams& p, int rows) {
  h.allocate(memory, static_cast<size_t>(rows) * p.d_model, "mlp input h");
  rstd.allocate(memory, size_t(rows), "mlp rstd");
  m.allocate(memory, static_cast<size_t>(rows) * p.d_ff, "mlp hidden m");
  if (p.tp.active()) u.allocate(memory, static_cast<size_t>(rows) * p.d_model, "mlp partial u");
}

template <typename T>
int64_t MlpActs<T>::bytes() const {
  return static_cast<int64_t>(h.size() + rstd.size() + m.size() + u.size()) *
         static_cast<int64_t>(sizeof(T));
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

template <typename T>
void mlp_forward(Backend<T>& be, ParamStore<T>& store, const MlpParams& p, const T* y, int rows,
                 MlpActs<T>& acts, T* u, T beta) {
  const int D = p.d_model, F = p.d_ff;
  be.rmsnorm_forward(y, store[p.norm].value, rows, D, acts.h.data(), acts.rstd.data());
  linear_forward(be, acts.h.data(), rows, D, store[p.w1].value, F, acts.m.data());
  be.relu_forward(acts.m.data(), static_cast<int64_t>(rows) * F, acts.m.data());
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
                  T* scratch_d, const T* dm_extra) {
  const int D = p.d_model, F = p.d_ff;
  const int64_t nf = static_cast<int64_t>(rows) * F;
  T* dm = scratch_f;
  T* dpre = scratch_f + nf;
  auto& w2 = store[p.w2];
  linear_backward(be, acts.m.data(), rows, F, w2.value, D, du, dm, w2.grad, T(0));  // dm = du·W2ᵀ
  if (dm_extra != nullptr) be.add_inplace(dm, dm_extra, nf);
  be.fill(dpre, nf, T(0));
  be.relu_backward(acts.m.data(), dm, nf, dpre);
  T* dh = scratch_d;
  auto& w1 = store[p.w1];
  linear_backward(be, acts.h.data(), rows, D, w1.value, F, dpre, dh, w1.grad, T(0));
  p.tp.reduce_input_grad(dh, static_cast<int64_t>(rows) * D);  // column-parallel W1
  auto& g = store[p.norm];
  be.rmsnorm_backward(y, g.value, acts.rstd.data(), dh, rows, D, dy, g.grad);
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
  be.copy(y, nd, out);
  mlp_forward(be, store, mlp, y, rows, mlp_acts, out, T(1));
}

template <typename T>
void dual_output_backward(Backend<T>& be, ParamStore<T>& store, int wo, const MlpParams& mlp,
                          const MlpActs<T>& mlp_acts, const T* y, const T* a0, const T* a1,
                          int rows, int A, const T* dout, T* dx, BackwardScratch<T>& scratch,
                          T* da0, T* da1) {
  const int D = mlp.d_model;
  const int64_t nd = int64_t(rows) * D, na = int64_t(rows) * A;
  // out = y + MLP(y): dy = dout + MLP'(y)ᵀ·dout; y = x + ...: dx += dy.
  T* dy = scratch.d_model.data();
  be.copy(dout, nd, dy);
  mlp_backward(be, store, mlp, y, rows, mlp_acts, dout, dy, scratch.d_ff.data(),
               scratch.d_norm.data());
  be.add_inplace(dx, dy, nd);
  auto& w = store[wo];  // da0, da1 written by their products (no zero fills)
  linear_backward(be, a0, rows, A, w.value, D, dy, da0, w.grad, T(0));
  linear_backward(be, a1, rows, A, w.value + int64_t(A) * D, D, dy, da1, w.grad + int64_t(A) * D,
                  T(0));
}

#define BRT_INSTANTIATE_BLOCKS(T)                                                              \
  template int declare_norm<T>(ParamStore<T>&, const std::string&, int);                       \
  template int declare_matrix<T>(ParamStore<T>&, const std::string&, int, int, double,        \
                                 ShardSpec);                                                   \
  template int declare_normal<T>(ParamStore<T>&, const std::string&, std::vector<int64_t>,     \
                                 double, ShardSpec, double);                                   \
  template int declare_ones<T>(ParamStore<T>&, const std::string&, std::vector<int64_t>,       \
                               ShardSpec);                                                     \
  template struct ProjectionActs<T>;                                                           \
  template struct MlpActs<T>;                                                                  \
  template void projections_forward<T>(Backend<T>&, ParamStore<T>&, const ProjectionParams&,   \
                                       const AttnShape&, const T*, int, ProjectionActs<T>&);   \
  template void projections_backward<T>(Backend<T>&, ParamStore<T>&, const ProjectionParams&,  \
                                        const AttnShape&, const T*, int,                      \
                                        const ProjectionActs<T>&,                              \
                                        std::span<const T* const>, T*, T*, T*);                \
  template MlpParams declare_mlp<T>(ParamStore<T>&, const std::string&, const std::string&,    \
                                    int, int, const TensorParallel&);                          \
  template void mlp_forward<T>(Backend<T>&, ParamStore<T>&, const MlpParams&, const T*, int,   \
                               MlpActs<T>&, T*, T);                                            \
  template void mlp_backward<T>(Backend<T>&, ParamStore<T>&, const MlpParams&, const T*, int,  \
                                const MlpActs<T>&, const T*, T*, T*, T*, const T*);            \
  template void dual_output_forward<T>(Backend<T>&, ParamStore<T>&, const TensorParallel&, int, \
                                       const MlpParams&, MlpActs<T>&, const T*, const T*,      \
                                       const T*, int, int, T*, T*);                            \
  template void dual_output_backward<T>(Backend<T>&, ParamStore<T>&, int, const MlpParams&,    \
                                        const MlpActs<T>&, const T*, const T*, const T*, int,  \
                                        int, const T*, T*, BackwardScratch<T>&, T*, T*);

BRT_INSTANTIATE_BLOCKS(float)
BRT_INSTANTIATE_BLOCKS(double)

}  // namespace brt::core
