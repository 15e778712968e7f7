#include "core/layers/bst_context.h"

#include <tuple>

namespace brt::core {

using kernels::Trans;

template <typename T>
void ContextProjActs<T>::allocate(kernels::Memory& memory, const ContextProjParams& p,
                                  const AttnShape& s, int64_t rows) {
  const size_t n = static_cast<size_t>(rows);
  h.allocate(memory, n * p.groups * s.d_model, "BST context norm output");
  rstd.allocate(memory, n * p.groups, "BST context norm rstd");
  k.allocate(memory, n * s.width(), "BST context keys");
  v.allocate(memory, n * s.width(), "BST context values");
  rnorm.allocate(memory, n * s.heads, "BST context key norms");
}

template <typename T>
int64_t ContextProjActs<T>::bytes() const {
  return int64_t(h.size() + rstd.size() + k.size() + v.size() + rnorm.size()) * int64_t(sizeof(T));
}

template <typename T>
void context_proj_forward(kernels::Backend<T>& be, ParamStore<T>& store, const ContextProjParams& p,
                          const AttnShape& s, const T* ctx, int64_t rows, ContextProjActs<T>& acts) {
  const int D = s.d_model, A = s.width(), G = p.groups, GL = p.local_groups(), cols = A / GL;
  const int all = static_cast<int>(rows * G), n = static_cast<int>(rows);
  be.rmsnorm_forward(ctx, store[p.norm].value, all, D, acts.h.data(), acts.rstd.data());
  if (p.ids >= 0) be.add_rows_broadcast(acts.h.data(), store[p.ids].value, all, p.id_rows, D);
  for (int g = 0; g < GL; ++g) {
    const T* hg = acts.h.data() + int64_t{p.first_group() + g} * rows * D;
    be.gemm(Trans::N, Trans::N, n, cols, D, T(1), hg, D, store[p.wk].value + g * cols, A, T(0),
            acts.k.data() + g * cols, A);
    be.gemm(Trans::N, Trans::N, n, cols, D, T(1), hg, D, store[p.wv].value + g * cols, A, T(0),
            acts.v.data() + g * cols, A);
  }
  be.head_l2norm_forward(acts.k.data(), n, s.heads, s.head_dim, acts.k.data(), acts.rnorm.data());
}

template <typename T>
void context_proj_backward(kernels::Backend<T>& be, ParamStore<T>& store,
                           const ContextProjParams& p, const AttnShape& s, const T* ctx,
                           int64_t rows, const ContextProjActs<T>& acts, const T* dk, const T* dv,
                           T* dctx, T* scratch_a, T* scratch_h) {
  const int D = s.d_model, A = s.width(), G = p.groups, GL = p.local_groups(), cols = A / GL;
  const int all = static_cast<int>(rows * G), n = static_cast<int>(rows);
  T* dk_raw = scratch_a;  // written by the norm's backward (no zero fill)
  be.head_l2norm_backward(acts.k.data(), acts.rnorm.data(), dk, n, s.heads, s.head_dim, dk_raw);
  T* dh = scratch_h;
  be.fill(dh, int64_t{all} * D, T(0));
  auto& wk = store[p.wk];
  auto& wv = store[p.wv];
  for (int g = 0; g < GL; ++g) {
    const T* hg = acts.h.data() + int64_t{p.first_group() + g} * rows * D;
    T* dhg = dh + int64_t{p.first_group() + g} * rows * D;
    const int c0 = g * cols;
    for (auto [w, dw, d] : {std::tuple{wk.value, wk.grad, static_cast<const T*>(dk_raw)},
                            std::tuple{wv.value, wv.grad, dv}}) {
      be.gemm(Trans::N, Trans::T, n, D, cols, T(1), d + c0, A, w + c0, A, T(1), dhg, D);
      be.gemm(Trans::T, Trans::N, D, cols, n, T(1), hg, D, d + c0, A, T(1), dw + c0, A);
    }
  }
  p.tp.reduce_input_grad(dh, int64_t{all} * D);  // column-parallel Wkc/Wvc (f of Megatron)
  if (p.ids >= 0) {
    T* dids = store[p.ids].grad;
    const int64_t group = int64_t{p.id_rows} * D;
    for (int r = 0; r < all; r += p.id_rows) be.add_inplace(dids, dh + int64_t{r} * D, group);
  }
  auto& g = store[p.norm];
  be.rmsnorm_backward(ctx, g.value, acts.rstd.data(), dh, all, D, dctx, g.grad);
}

#define BRT_INSTANTIATE_CONTEXT(T)                                                               \
  template struct ContextProjActs<T>;                                                            \
  template void context_proj_forward<T>(kernels::Backend<T>&, ParamStore<T>&,                    \
                                        const ContextProjParams&, const AttnShape&, const T*,    \
                                        int64_t, ContextProjActs<T>&);                           \
  template void context_proj_backward<T>(kernels::Backend<T>&, ParamStore<T>&,                   \
                                         const ContextProjParams&, const AttnShape&, const T*,   \
                                         int64_t, const ContextProjActs<T>&, const T*, const T*, \
                                         T*, T*, T*);

BRT_INSTANTIATE_CONTEXT(float)
BRT_INSTANTIATE_CONTEXT(double)

}  // namespace brt::core
