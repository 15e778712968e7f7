#include "core/layers/projections.h"

#include <array>
#include <stdexcept>
#include <string>

#include "core/layers/linear.h"

namespace brt::core {

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
  // h is read only by the products below and their backward, unless IDs are added to it.
  if (p.ids < 0) be.rmsnorm_forward_for_products(x, store[p.norm].value, rows, D, acts.h.data(), acts.rstd.data());
  if (p.ids >= 0) {
    be.rmsnorm_forward(x, store[p.norm].value, rows, D, acts.h.data(), acts.rstd.data());
    be.add_rows_broadcast(acts.h.data(), store[p.ids].value, rows, p.id_rows, D);
  }
  // The projections of h, then their head norms (§3.1): one call, so a backend can share h
  // (pointers on the stack: the step loop allocates nothing).
  constexpr size_t kMaxProjections = 8;
  if (p.weights.size() > kMaxProjections)
    throw std::logic_error("projections_forward: " + std::to_string(p.weights.size()) + " projections, at most 8");
  std::array<const T*, kMaxProjections> weights{};
  std::array<T*, kMaxProjections> outs{};
  for (size_t j = 0; j < p.weights.size(); ++j) {
    weights[j] = store[p.weights[j]].value;
    outs[j] = acts.out[j].data();
  }
  be.linear_forward_shared(acts.h.data(), rows, D, int(p.weights.size()), weights.data(), A, outs.data());
  for (size_t j = 0; j < p.weights.size(); ++j)
    if (p.normalised[j])
      be.head_l2norm_forward(outs[j], rows, s.heads, s.head_dim, outs[j], acts.rnorm[j].data());
}

template <typename T>
void projections_backward(Backend<T>& be, ParamStore<T>& store, const ProjectionParams& p,
                          const AttnShape& s, const T* x, int rows,
                          const ProjectionActs<T>& acts, std::type_identity_t<std::span<const T* const>> dout,
                          T* dx, T* scratch_a, T* scratch_d, std::type_identity_t<const T*> dx_residual,
                          bool accumulate_dx) {
  const int D = s.d_model, A = s.width();
  T* dh = scratch_d;
  bool first = true;  // the first product overwrites dh (no zero fill), the others add
  for (size_t j = 0; j < p.weights.size(); ++j) {
    if (dout[j] == nullptr) continue;
    const T* draw = dout[j];
    if (p.normalised[j]) {  // written into scratch_a (no zero fill), read only by the product below
      be.head_l2norm_backward_for_product(acts.out[j].data(), acts.rnorm[j].data(), dout[j], rows, s.heads,
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
  be.rmsnorm_backward_residual(x, g.value, acts.rstd.data(), dh, dx_residual, accumulate_dx, rows, D, dx, g.grad);
}

#define BRT_INSTANTIATE_PROJECTIONS(T)                                                         \
  template struct ProjectionActs<T>;                                                           \
  template void projections_forward<T>(Backend<T>&, ParamStore<T>&, const ProjectionParams&,   \
                                       const AttnShape&, const T*, int, ProjectionActs<T>&);   \
  template void projections_backward<T>(Backend<T>&, ParamStore<T>&, const ProjectionParams&,  \
                                        const AttnShape&, const T*, int,                      \
                                        const ProjectionActs<T>&,                              \
                                        std::span<const T* const>, T*, T*, T*, const T*, bool);

BRT_INSTANTIATE_PROJECTIONS(float)
BRT_INSTANTIATE_PROJECTIONS(double)

}  // namespace brt::core
