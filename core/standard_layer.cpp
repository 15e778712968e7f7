#include "core/standard_layer.h"

#include <array>
#include <cmath>

#include "core/layers/linear.h"
#include "core/layers/output_projection.h"

namespace brt::core {

template <typename T>
StandardLayer<T>::StandardLayer(ParamStore<T>& store, const ModelConfig& cfg, int index,
                                int streams, kernels::Memory& memory, const TensorParallel& tp,
                                const ContextParallel& cp)
    : store_(store),
      tp_(tp),
      shape_{cfg.d_model, tp.local(cfg.heads, "model.heads"), cfg.head_dim},
      prefix_("layers." + std::to_string(index) + "."),
      window_({streams, cfg.seq_len, cfg.window, shape_.heads, cfg.head_dim}, tp, memory,
              WindowLayout::kSegment, cp, cfg.family == ModelFamily::kXL) {
  // Full logical sizes for the declarations; A and H below are this rank's.
  const int D = cfg.d_model, A_full = cfg.attn_width(), H_full = cfg.heads;
  const int A = shape_.width();
  proj_.norm = declare_norm(store, prefix_ + "attn_norm.scale", D);
  proj_.weights = {declare_matrix(store, prefix_ + "attn.wq", D, A_full, 1.0, tp.columns()),
                   declare_matrix(store, prefix_ + "attn.wk", D, A_full, 1.0, tp.columns()),
                   declare_matrix(store, prefix_ + "attn.wv", D, A_full, 1.0, tp.columns())};
  proj_.normalised = {true, true, false};  // model.md §3.1: V is not normalised
  proj_.tp = tp;
  wo_ = declare_matrix(store, prefix_ + "attn.wo", A_full, D, 1.0, tp.rows());
  scale_ = declare_ones(store, prefix_ + "attn.scale", {H_full}, tp.heads());
  rel_bias_ = declare_normal(store, prefix_ + "attn.rel_bias", {H_full, kernels::kT5Buckets},
                             1.0 / std::sqrt(double(kernels::kT5Buckets)), tp.heads());
  mlp_ = declare_mlp(store, prefix_ + "mlp_norm.scale", prefix_ + "mlp.", D, cfg.d_ff, tp);

  const int rows = streams * cfg.seq_len;
  proj_acts_.allocate(memory, proj_, shape_, rows);
  attn_out_.allocate(memory, static_cast<size_t>(rows) * A, "attention output");
  y_.allocate(memory, static_cast<size_t>(rows) * D, "attention residual y");
  mlp_acts_.allocate(memory, mlp_, rows);
}

template <typename T>
void StandardLayer<T>::forward(const StepContext<T>& ctx, const T* x, T* out) {
  auto& be = ctx.backend;
  const int rows = ctx.streams * ctx.seq, D = shape_.d_model, A = shape_.width();
  x_ = x;  // the model keeps every layer's input alive until backward
  projections_forward(be, store_, proj_, shape_, x, rows, proj_acts_);
  const T* q = proj_acts_.out[0].data();
  const T* k = proj_acts_.out[1].data();
  const T* v = proj_acts_.out[2].data();
  // a = WindowAttention(Q̂, K̂, V), block 0 attending to the cache   (model.md §3.2, §8)
  window_.prepare(be, ctx.doc_start);
  // attn_out is read only by Wo's products (here and in backward).
  window_.forward(be, q, k, v, store_[rel_bias_], store_[scale_], attn_out_.data(), true);
  // y = x + a·Wo;  out = y + MLP(y)   (model.md §4)
  add_row_parallel(be, tp_, attn_out_.data(), rows, A, store_[wo_].value, D, x, y_.data());
  mlp_residual_forward(be, store_, mlp_, y_.data(), rows, mlp_acts_, out);
  // The next segment's block 0 attends to this segment's last block, detached (model.md §8).
  window_.carry(be, k, v);
}

template <typename T>
void StandardLayer<T>::backward(const StepContext<T>& ctx, const T* dout, T* dx,
                                BackwardScratch<T>& scratch) {
  auto& be = ctx.backend;
  const int rows = ctx.streams * ctx.seq, D = shape_.d_model, A = shape_.width();
  // out = y + MLP(y): dy = dout + MLP'(y)ᵀ·dout, written by the MLP norm's backward
  T* dy = scratch.d_model.data();
  mlp_backward(be, store_, mlp_, y_.data(), rows, mlp_acts_, dout, dy, scratch.d_ff.data(),
               scratch.d_norm.data(), nullptr, dout);
  // y = x + a·Wo: dx gets dy in the attention norm's backward (projections_backward below)
  T* da = scratch.d_attn[0].data();
  auto& wo = store_[wo_];  // da written by its product (no zero fill)
  linear_backward(be, attn_out_.data(), rows, A, wo.value, D, dy, da, wo.grad, T(0));
  T* dq = scratch.d_attn[1].data();
  T* dk = scratch.d_attn[2].data();
  T* dv = scratch.d_attn[3].data();
  // dq, dk, dv written; dv is read only by V's projection's product below
  window_.backward(be, da, store_[rel_bias_], store_[scale_], dq, dk, dv, true);
  const std::array<const T*, 3> grads = {dq, dk, dv};
  projections_backward(be, store_, proj_, shape_, x_, rows, proj_acts_, grads, dx,
                       scratch.d_attn[0].data(), scratch.d_norm.data(), dy, false);  // dx written
}

template <typename T>
std::vector<TensorRef<T>> StandardLayer<T>::carried_state() {
  return window_.carried_state(prefix_);
}

template <typename T>
int64_t StandardLayer<T>::activation_bytes() const {
  return proj_acts_.bytes() + window_.activation_bytes() + attn_out_.bytes() + y_.bytes() +
         mlp_acts_.bytes();
}

template class StandardLayer<float>;
template class StandardLayer<double>;

}  // namespace brt::core
