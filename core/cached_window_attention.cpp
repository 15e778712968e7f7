#include "core/cached_window_attention.h"

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
                                                WindowLayout layout)
    : dims_(dims), layout_(layout), heads_{2, tp.rank(), tp.size(), 1} {
  const size_t block = size_t(dims.batch) * dims.window * dims.width();
  k_attended_.allocate(memory, block, "window cache attended");
  v_attended_.allocate(memory, block, "window cache attended");
  if (layout == WindowLayout::kSegment)
    probs_.allocate(memory, size_t(dims.batch) * dims.seq * dims.heads * 2 * dims.window,
                    "window attention probabilities");
  k_carried_.allocate(memory, block, "carried window cache");
  v_carried_.allocate(memory, block, "carried window cache");
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
                                       const Param<T>& scale, T* out) {
  require_segment_layout("forward");
  q_ = q;
  k_ = k;
  v_ = v;
  be.window_attention_forward(dims_, q, k, v, k_attended_.data(), v_attended_.data(),
                              rel_bias.value, scale.value, out, probs_.data());
}

template <typename T>
void CachedWindowAttention<T>::backward(kernels::Backend<T>& be, const T* dout,
                                        Param<T>& rel_bias, Param<T>& scale, T* dq, T* dk,
                                        T* dv) {
  require_segment_layout("backward");
  be.window_attention_backward(dims_, q_, k_, v_, k_attended_.data(), v_attended_.data(),
                               rel_bias.value, scale.value, probs_.data(), dout, dq, dk, dv,
                               rel_bias.grad, scale.grad);
}

template <typename T>
void CachedWindowAttention<T>::carry(kernels::Backend<T>& be, const T* k, const T* v) {
  const int B = dims_.batch, A = dims_.width();
  if (layout_ == WindowLayout::kBlockMajor) {  // already the [B, W, A] block
    be.copy(k, int64_t(B) * dims_.window * A, k_carried_.data());
    be.copy(v, int64_t(B) * dims_.window * A, v_carried_.data());
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
  return k_attended_.bytes() + v_attended_.bytes() + probs_.bytes();
}

template class CachedWindowAttention<float>;
template class CachedWindowAttention<double>;

}  // namespace brt::core
