#include "core/standard_layer.h"

#include <array>
#include <cmath>

#include "core/linear.h"

namespace brt::core {

bool no_stream_starts(const uint8_t* doc_start, int streams) {
  for (int b = 0; b < streams; ++b)
    if (doc_start[b]) return false;
  return true;
}

template <typename T>
void prepare_cache(kernels::Backend<T>& be, const uint8_t* doc_start, int streams,
                   int64_t block_elems, const T* carried, T* used) {
  // The steady state (every stream continues): one copy for the batch, not one per stream.
  if (no_stream_starts(doc_start, streams)) {
    be.copy(carried, streams * block_elems, used);
    return;
  }
  for (int b = 0; b < streams; ++b) {
    T* dst = used + b * block_elems;
    if (doc_start[b])
      be.fill(dst, block_elems, T(0));
    else
      be.copy(carried + b * block_elems, block_elems, dst);
  }
}

template <typename T>
void carry_last_block(kernels::Backend<T>& be, int streams, int seq, int window, int width,
                      const T* act, T* carried) {
  const int64_t block = static_cast<int64_t>(window) * width;
  // One strided copy for the batch: stream b's rows start at b·seq·width.
  be.copy_rows(act + static_cast<int64_t>(seq - window) * width, static_cast<int64_t>(seq) * width,
               streams, block, carried, block);
}

template <typename T>
void add_row_parallel(kernels::Backend<T>& be, const TensorParallel& tp, const T* a, int rows,
                      int in, const T* w, int D, const T* x, T* y) {
  const int64_t nd = static_cast<int64_t>(rows) * D;
  if (!tp.active()) {
    be.copy(x, nd, y);
    linear_forward(be, a, rows, in, w, D, y, T(1));
    return;
  }
  linear_forward(be, a, rows, in, w, D, y);
  tp.reduce_output(y, nd);  // row-parallel: the ranks' partial products, summed
  be.add_inplace(y, x, nd);
}

template <typename T>
StandardLayer<T>::StandardLayer(ParamStore<T>& store, const ModelConfig& cfg, int index,
                                int streams, kernels::Memory& memory, const TensorParallel& tp)
    : store_(store),
      tp_(tp),
      shape_{cfg.d_model, tp.local(cfg.heads, "model.heads"), cfg.head_dim},
      dims_{streams, cfg.seq_len, cfg.window, shape_.heads, cfg.head_dim},
      prefix_("layers." + std::to_string(index) + ".") {
  // Full logical sizes for the declarations; A and H below are this rank's.
  const int D = cfg.d_model, A_full = cfg.attn_width(), H_full = cfg.heads;
  const int A = shape_.width(), H = shape_.heads;
  proj_.norm = declare_norm(store, prefix_ + "attn_norm.scale", D);
  proj_.weights = {declare_matrix(store, prefix_ + "attn.wq", D, A_full, 1.0, tp.columns()),
                   declare_matrix(store, prefix_ + "attn.wk", D, A_full, 1.0, tp.columns()),
                   declare_matrix(store, prefix_ + "attn.wv", D, A_full, 1.0, tp.columns())};
  proj_.normalised = {true, true, false};  // MODEL §3.1: V is not normalised
  proj_.tp = tp;
  wo_ = declare_matrix(store, prefix_ + "attn.wo", A_full, D, 1.0, tp.rows());
  scale_ = declare_ones(store, prefix_ + "attn.scale", {H_full}, tp.heads());
  rel_bias_ = declare_normal(store, prefix_ + "attn.rel_bias", {H_full, kernels::kT5Buckets},
                             1.0 / std::sqrt(double(kernels::kT5Buckets)), tp.heads());
  mlp_ = declare_mlp(store, prefix_ + "mlp_norm.scale", prefix_ + "mlp.", D, cfg.d_ff, tp);

  const int rows = streams * cfg.seq_len;
  const int64_t cache = static_cast<int64_t>(streams) * cfg.window * A;
  proj_acts_.allocate(memory, proj_, shape_, rows);
  k_cache_used_.allocate(memory, size_t(cache), "k cache used");
  v_cache_used_.allocate(memory, size_t(cache), "v cache used");
  attn_out_.allocate(memory, static_cast<size_t>(rows) * A, "attention output");
  probs_.allocate(memory, static_cast<size_t>(rows) * H * 2 * cfg.window, "attention probs");
  y_.allocate(memory, static_cast<size_t>(rows) * D, "attention residual y");
  mlp_acts_.allocate(memory, mlp_, rows);
  k_cache_.allocate(memory, size_t(cache), "carried k cache");
  v_cache_.allocate(memory, size_t(cache), "carried v cache");
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
  const int64_t block = static_cast<int64_t>(dims_.window) * A;
  prepare_cache(be, ctx.doc_start, ctx.streams, block, k_cache_.data(), k_cache_used_.data());
  prepare_cache(be, ctx.doc_start, ctx.streams, block, v_cache_.data(), v_cache_used_.data());
  be.window_attention_forward(dims_, q, k, v, k_cache_used_.data(), v_cache_used_.data(),
                              store_[rel_bias_].value, store_[scale_].value, attn_out_.data(),
                              probs_.data());
  // y = x + a·Wo;  out = y + MLP(y)   (MODEL §4)
  add_row_parallel(be, tp_, attn_out_.data(), rows, A, store_[wo_].value, D, x, y_.data());
  be.copy(y_.data(), static_cast<int64_t>(rows) * D, out);
  mlp_forward(be, store_, mlp_, y_.data(), rows, mlp_acts_, out, T(1));
  // The next segment's block 0 attends to this segment's last block, detached (MODEL §8).
  carry_last_block(be, ctx.streams, ctx.seq, dims_.window, A, k, k_cache_.data());
  carry_last_block(be, ctx.streams, ctx.seq, dims_.window, A, v, v_cache_.data());
}

template <typename T>
void StandardLayer<T>::backward(const StepContext<T>& ctx, const T* dout, T* dx,
                                BackwardScratch<T>& scratch) {
  auto& be = ctx.backend;
  const int rows = ctx.streams * ctx.seq, D = shape_.d_model, A = shape_.width();
  const int64_t nd = static_cast<int64_t>(rows) * D, na = static_cast<int64_t>(rows) * A;
  // out = y + MLP(y): dy = dout + MLP'(y)ᵀ·dout
  T* dy = scratch.d_model.data();
  be.copy(dout, nd, dy);
  mlp_backward(be, store_, mlp_, y_.data(), rows, mlp_acts_, dout, dy, scratch.d_ff.data(),
               scratch.d_norm.data());
  // y = x + a·Wo
  be.add_inplace(dx, dy, nd);
  T* da = scratch.d_attn[0].data();
  be.fill(da, na, T(0));
  auto& wo = store_[wo_];
  linear_backward(be, attn_out_.data(), rows, A, wo.value, D, dy, da, wo.grad);
  T* dq = scratch.d_attn[1].data();
  T* dk = scratch.d_attn[2].data();
  T* dv = scratch.d_attn[3].data();
  be.fill(dq, na, T(0));
  be.fill(dk, na, T(0));
  be.fill(dv, na, T(0));
  be.window_attention_backward(dims_, proj_acts_.out[0].data(), proj_acts_.out[1].data(),
                               proj_acts_.out[2].data(), k_cache_used_.data(),
                               v_cache_used_.data(), store_[rel_bias_].value,
                               store_[scale_].value, probs_.data(), da, dq, dk, dv,
                               store_[rel_bias_].grad, store_[scale_].grad);
  const std::array<const T*, 3> grads = {dq, dk, dv};
  projections_backward(be, store_, proj_, shape_, x_, rows, proj_acts_, grads, dx,
                       scratch.d_attn[0].data(), scratch.d_norm.data());
}


template <typename T>
std::vector<TensorRef<T>> StandardLayer<T>::carried_state() {
  const std::vector<int64_t> shape = {dims_.batch, dims_.window, shape_.width()};
  const ShardSpec heads{2, tp_.rank(), tp_.size(), 1};  // this rank's head columns of A
  return {{prefix_ + "cache.k", shape, k_cache_.data(), heads},
          {prefix_ + "cache.v", shape, v_cache_.data(), heads}};
}

template <typename T>
int64_t StandardLayer<T>::activation_bytes() const {
  const int64_t n = k_cache_used_.size() + v_cache_used_.size() + attn_out_.size() +
                    probs_.size() + y_.size();
  return proj_acts_.bytes() + mlp_acts_.bytes() + n * static_cast<int64_t>(sizeof(T));
}

#define BRT_INSTANTIATE_STANDARD(T)                                                         \
  template class StandardLayer<T>;                                                          \
  template void prepare_cache<T>(kernels::Backend<T>&, const uint8_t*, int, int64_t,        \
                                 const T*, T*);                                             \
  template void carry_last_block<T>(kernels::Backend<T>&, int, int, int, int, const T*, T*); \
  template void add_row_parallel<T>(kernels::Backend<T>&, const TensorParallel&, const T*, int, \
                                    int, const T*, int, const T*, T*);

BRT_INSTANTIATE_STANDARD(float)
BRT_INSTANTIATE_STANDARD(double)

}  // namespace brt::core
