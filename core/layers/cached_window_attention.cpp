#include "core/layers/cached_window_attention.h"

#include <stdexcept>
#include <string>

namespace brt::core {

namespace {

// Builds the [B, W, A] block a segment's block 0 attends to: zeros for streams that start a
// document, else the carried block (model.md §3.2, §8). doc_start is host memory.
template <typename T>
void prepare_cache(kernels::Backend<T>& be, const uint8_t* doc_start, int streams,
                   int64_t block_elems, const T* carried, T* attended) {
  // The steady state (every stream continues): one copy for the batch, not one per stream.
  if (no_stream_starts(doc_start, streams)) {
    be.copy(carried, streams * block_elems, attended);
    return;
  }
  for (int b = 0; b < streams; ++b) {
    T* dst = attended + b * block_elems;
    if (doc_start[b])
      be.fill(dst, block_elems, T(0));
    else
      be.copy(carried + b * block_elems, block_elems, dst);
  }
}

// Stores each stream's last block of a [B, N, A] activation as the carried block.
template <typename T>
void carry_last_block(kernels::Backend<T>& be, int streams, int seq, int window, int width,
                      const T* act, T* carried) {
  const int64_t block = static_cast<int64_t>(window) * width;
  // One strided copy for the batch: stream b's rows start at b·seq·width.
  be.copy_rows(act + static_cast<int64_t>(seq - window) * width, static_cast<int64_t>(seq) * width,
               streams, block, carried, block);
}

}  // namespace

template <typename T>
CachedWindowAttention<T>::CachedWindowAttention(const kernels::WindowAttnDims& dims,
                                                const TensorParallel& tp, kernels::Memory& memory,
                                                WindowLayout layout,
                                                const ContextParallel& cp, bool detached_blocks)
    : dims_(dims), layout_(layout), heads_{2, tp.rank(), tp.size(), 1}, detached_(detached_blocks),
      cp_(cp.bound_to(memory)) {
  const size_t block = size_t(dims.batch) * dims.window * dims.width();
  k_attended_.allocate(memory, block, "window cache attended");
  v_attended_.allocate(memory, block, "window cache attended");
  if (layout == WindowLayout::kSegment)
    probs_.allocate(memory, size_t(dims.batch) * dims.seq * dims.heads * 2 * dims.window,
                    "window attention probabilities");
  k_carried_.allocate(memory, block, "carried window cache");
  v_carried_.allocate(memory, block, "carried window cache");
  if ((cp_.active() || detached_) && layout != WindowLayout::kSegment)
    throw std::invalid_argument("CachedWindowAttention: context parallelism and detached blocks need the segment layout");
  if (detached_ && dims.blocks() > 1) {
    k_blocks_.allocate(memory, block * size_t(dims.blocks()), "detached block caches");
    v_blocks_.allocate(memory, block * size_t(dims.blocks()), "detached block caches");
  }
  if (!cp_.active()) return;
  halo_send_.allocate(memory, 2 * block, "context-parallel halo");
  halo_recv_.allocate(memory, 2 * block, "context-parallel halo received");
  if (detached_) return;  // no gradient crosses a block edge: no halo gradient to compute
  for (auto* b : {&pair_q_, &pair_k_, &pair_v_, &pair_out_, &pair_dq_, &pair_dk_, &pair_dv_})
    b->allocate(memory, 2 * block, "context-parallel halo gradient");
  pair_zero_.allocate(memory, block, "context-parallel halo gradient");
  memory.fill_zero(pair_zero_.data(), size_t(pair_zero_.bytes()));
  pair_probs_.allocate(memory, size_t(dims.batch) * 2 * dims.heads * dims.window * 2 * dims.window,
                       "context-parallel halo probabilities");
  pair_dbias_.allocate(memory, size_t(dims.heads) * kernels::kT5Buckets, "discarded bias gradient");
  pair_dscale_.allocate(memory, size_t(dims.heads), "discarded scale gradient");
}

template <typename T>
void CachedWindowAttention<T>::require_segment_layout(const char* what) const {
  if (layout_ != WindowLayout::kSegment)
    throw std::logic_error(std::string("CachedWindowAttention::") + what +
                           ": a block-major cache does not attend (its layer does)");
}

template <typename T>
void CachedWindowAttention<T>::prepare(kernels::Backend<T>& be, const uint8_t* doc_start) {
  const int64_t block = int64_t(dims_.window) * dims_.width();  // one stream's
  prepare_cache(be, doc_start, dims_.batch, block, k_carried_.data(), k_attended_.data());
  prepare_cache(be, doc_start, dims_.batch, block, v_carried_.data(), v_attended_.data());
}

template <typename T>
void CachedWindowAttention<T>::forward(kernels::Backend<T>& be, const T* q, const T* k,
                                       const T* v, const Param<T>& rel_bias,
                                       const Param<T>& scale, T* out, bool out_for_products) {
  require_segment_layout("forward");
  q_ = q;
  k_ = k;
  v_ = v;
  if (cp_.active()) exchange_halo(be, k, v);
  if (!k_blocks_.empty()) gather_previous_blocks(be, k, v);
  if (out_for_products)
    be.window_attention_forward_for_products(attended_dims(), q, k, v, attended_keys(), attended_values(),
                                             rel_bias.value, scale.value, out, probs_.data());
  else
    be.window_attention_forward(attended_dims(), q, k, v, attended_keys(), attended_values(), rel_bias.value,
                                scale.value, out, probs_.data());
}

template <typename T>
kernels::WindowAttnDims CachedWindowAttention<T>::attended_dims() const {
  if (!detached_) return dims_;
  return {dims_.batch * dims_.blocks(), dims_.window, dims_.window, dims_.heads, dims_.head_dim};
}

template <typename T>
const T* CachedWindowAttention<T>::attended_keys() const {
  return k_blocks_.empty() ? k_attended_.data() : k_blocks_.data();
}

template <typename T>
const T* CachedWindowAttention<T>::attended_values() const {
  return v_blocks_.empty() ? v_attended_.data() : v_blocks_.data();
}

// Block 0's cache (the carried or received block) and blocks 0..T−2 as the caches of blocks
// 1..T−1: the layout [B, N, A] read as [B·T, W, A] (model.md §6, xl).
template <typename T>
void CachedWindowAttention<T>::gather_previous_blocks(kernels::Backend<T>& be, const T* k, const T* v) {
  const int B = dims_.batch, Tb = dims_.blocks();
  const int64_t block = int64_t(dims_.window) * dims_.width(), seg = int64_t(Tb) * block;
  be.copy_rows(k_attended_.data(), block, B, block, k_blocks_.data(), seg);
  be.copy_rows(v_attended_.data(), block, B, block, v_blocks_.data(), seg);
  be.copy_rows(k, seg, B, seg - block, k_blocks_.data() + block, seg);
  be.copy_rows(v, seg, B, seg - block, v_blocks_.data() + block, seg);
}

template <typename T>
void CachedWindowAttention<T>::backward(kernels::Backend<T>& be, const T* dout,
                                        Param<T>& rel_bias, Param<T>& scale, T* dq, T* dk,
                                        T* dv, bool dv_for_product) {
  require_segment_layout("backward");
  const bool halo = cp_.active() && !detached_;  // its gradient is added into dk and dv after
  // The caches attended (the carried block, a halo, xl's previous blocks) receive no gradient.
  if (dv_for_product && !halo)
    be.window_attention_backward_write_dv_for_product(attended_dims(), q_, k_, v_, attended_keys(), attended_values(),
                                                      rel_bias.value, scale.value, probs_.data(), dout, dq, dk, dv,
                                                      rel_bias.grad, scale.grad);
  else
    be.window_attention_backward_write(attended_dims(), q_, k_, v_, attended_keys(), attended_values(),
                                       rel_bias.value, scale.value, probs_.data(), dout, dq, dk, dv, rel_bias.grad,
                                       scale.grad);
  if (halo) return_halo_gradient(be, rel_bias, scale, dout, dk, dv);
}

// Each chunk's last block of K̂ and V to the next: chunk r's block 0 attends to chunk r − 1's
// (model.md §3.2: block t attends to blocks t − 1 and t); chunk 0 keeps what prepare() set and
// receives the last chunk's, the segment's carry (§8).
template <typename T>
void CachedWindowAttention<T>::exchange_halo(kernels::Backend<T>& be, const T* k, const T* v) {
  const int B = dims_.batch, A = dims_.width(), L = dims_.seq;
  const int64_t block = int64_t(dims_.window) * A, last = int64_t(L - dims_.window) * A;
  be.copy_rows(k + last, int64_t(L) * A, B, block, halo_send_.data(), block);
  be.copy_rows(v + last, int64_t(L) * A, B, block, halo_send_.data() + B * block, block);
  cp_.from_left(halo_send_.data(), halo_recv_.data(), 2 * B * block);
  if (cp_.first()) return;
  be.copy(halo_recv_.data(), B * block, k_attended_.data());
  be.copy(halo_recv_.data() + B * block, B * block, v_attended_.data());
}

// The halo's gradient goes back to the chunk it came from, which adds it to its last block's.
template <typename T>
void CachedWindowAttention<T>::return_halo_gradient(kernels::Backend<T>& be,
                                                    const Param<T>& rel_bias, const Param<T>& scale,
                                                    const T* dout, T* dk, T* dv) {
  const int B = dims_.batch, A = dims_.width(), L = dims_.seq;
  const int64_t block = int64_t(dims_.window) * A;
  if (cp_.first())
    be.fill(halo_send_.data(), 2 * B * block, T(0));  // chunk 0's window starts detached (§8)
  else
    halo_gradient(be, rel_bias, scale, dout);
  cp_.from_right(halo_send_.data(), halo_recv_.data(), 2 * B * block);
  if (cp_.last()) return;  // it received chunk 0's zeros
  const T* right = halo_recv_.data();
  for (int b = 0; b < B; ++b) {
    const int64_t rows = (int64_t(b) * L + L - dims_.window) * A;
    be.add_inplace(dk + rows, right + b * block, block);
    be.add_inplace(dv + rows, right + B * block + b * block, block);
  }
}

// The gradient of block 0's attention with respect to the halo it attended to: the same kernel
// on the two-block problem [halo; block 0] (halo queries and output gradient zero, so the halo
// block contributes nothing), whose dK̂, dV of the first block are the halo's. The bias and
// scale gradients of this problem were already counted by the segment's backward: discarded.
template <typename T>
void CachedWindowAttention<T>::halo_gradient(kernels::Backend<T>& be, const Param<T>& rel_bias,
                                             const Param<T>& scale, const T* dout) {
  const int B = dims_.batch, A = dims_.width(), L = dims_.seq, W = dims_.window;
  const int64_t block = int64_t(W) * A, seg = int64_t(L) * A;
  const kernels::WindowAttnDims pair{B, 2 * W, W, dims_.heads, dims_.head_dim};
  be.fill(pair_q_.data(), 2 * B * block, T(0));
  be.copy_rows(q_, seg, B, block, pair_q_.data() + block, 2 * block);
  be.copy_rows(k_attended_.data(), block, B, block, pair_k_.data(), 2 * block);
  be.copy_rows(k_, seg, B, block, pair_k_.data() + block, 2 * block);
  be.copy_rows(v_attended_.data(), block, B, block, pair_v_.data(), 2 * block);
  be.copy_rows(v_, seg, B, block, pair_v_.data() + block, 2 * block);
  be.window_attention_forward(pair, pair_q_.data(), pair_k_.data(), pair_v_.data(), pair_zero_.data(),
                              pair_zero_.data(), rel_bias.value, scale.value, pair_out_.data(),
                              pair_probs_.data());
  T* pair_dout = pair_out_.data();  // the output is not needed
  be.fill(pair_dout, 2 * B * block, T(0));
  be.copy_rows(dout, seg, B, block, pair_dout + block, 2 * block);
  for (auto* g : {&pair_dq_, &pair_dk_, &pair_dv_}) be.fill(g->data(), 2 * B * block, T(0));
  be.fill(pair_dbias_.data(), int64_t(pair_dbias_.size()), T(0));
  be.fill(pair_dscale_.data(), int64_t(pair_dscale_.size()), T(0));
  be.window_attention_backward(pair, pair_q_.data(), pair_k_.data(), pair_v_.data(),
                               pair_zero_.data(), pair_zero_.data(), rel_bias.value, scale.value,
                               pair_probs_.data(), pair_dout, pair_dq_.data(), pair_dk_.data(),
                               pair_dv_.data(), pair_dbias_.data(), pair_dscale_.data());
  be.copy_rows(pair_dk_.data(), 2 * block, B, block, halo_send_.data(), block);
  be.copy_rows(pair_dv_.data(), 2 * block, B, block, halo_send_.data() + B * block, block);
}

template <typename T>
void CachedWindowAttention<T>::carry(kernels::Backend<T>& be, const T* k, const T* v) {
  const int B = dims_.batch, A = dims_.width();
  if (layout_ == WindowLayout::kBlockMajor) {  // already the [B, W, A] block
    be.copy(k, int64_t(B) * dims_.window * A, k_carried_.data());
    be.copy(v, int64_t(B) * dims_.window * A, v_carried_.data());
    return;
  }
  if (cp_.active()) {  // the segment's last block is the last chunk's: chunk 0 received it
    if (!cp_.first()) return;
    const int64_t block = int64_t(B) * dims_.window * A;
    be.copy(halo_recv_.data(), block, k_carried_.data());
    be.copy(halo_recv_.data() + block, block, v_carried_.data());
    return;
  }
  carry_last_block(be, B, dims_.seq, dims_.window, A, k, k_carried_.data());
  carry_last_block(be, B, dims_.seq, dims_.window, A, v, v_carried_.data());
}

template <typename T>
std::vector<TensorRef<T>> CachedWindowAttention<T>::carried_state(const std::string& prefix) {
  const std::vector<int64_t> shape = {dims_.batch, dims_.window, dims_.width()};
  return {{prefix + "cache.k", shape, k_carried_.data(), heads_},
          {prefix + "cache.v", shape, v_carried_.data(), heads_}};
}

template <typename T>
int64_t CachedWindowAttention<T>::activation_bytes() const {
  int64_t n = k_attended_.bytes() + v_attended_.bytes() + probs_.bytes();
  for (const auto* b : {&k_blocks_, &v_blocks_, &halo_send_, &halo_recv_, &pair_q_, &pair_k_, &pair_v_, &pair_out_, &pair_dq_,
                        &pair_dk_, &pair_dv_, &pair_zero_, &pair_probs_, &pair_dbias_, &pair_dscale_})
    n += b->bytes();
  return n;
}

template class CachedWindowAttention<float>;
template class CachedWindowAttention<double>;

}  // namespace brt::core
