// The sliding-window self-attention of model.md §3.2 together with the per-stream cache it
// carries between segments (§8) — the one piece every layer with a window cache uses:
// StandardLayer (§4), RecurrentLayer (§5.2: A_ee), BstLayer (§7.2: A_self) and, for its
// caches only, FeedbackStack (§5.4).
//
// One segment, per stream:
//   prepare:  C_K, C_V = zeros at a document start, else the carried block          (§8)
//   forward:  block t's queries Q̂_t attend to K̂w = [K̂_{t−1}; K̂_t], Vw = [V_{t−1}; V_t]
//             with block −1 = (C_K, C_V), T5 bias R and per-head scale s            (§3.2)
//   carry:    the carried block ← this segment's last block of K̂ and V, detached   (§8)
//   backward: gradients to Q̂, K̂, V, R and s; none to the cache (detached)
// Checkpoints hold the carried block as layers.{i}.cache.k and .cache.v, [B, W, A] (under
// tensor parallelism this rank's head columns of A).
// Detached blocks (xl, model.md §6): every block is a Transformer-XL segment of its own, so
// block t attends to block t − 1's keys and values without passing them a gradient, exactly as
// block 0 attends to the carried block; a segment of T blocks is T consecutive XL segments.
// Under context parallelism (core/sharding/context_parallel.h, kSegment only) this rank's segment is
// chunk r of the whole one: block 0 attends to chunk r − 1's last block (the halo, received in
// forward; its gradient is sent back in backward) and only chunk 0 attends to the carried
// block, which it receives from the last chunk by the same shift. Only chunk 0's carried block
// is the segment's (the others keep what they had, unused).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/sharding/context_parallel.h"
#include "core/layer.h"
#include "core/param.h"
#include "core/sharding/tensor_parallel.h"
#include "kernels/backend.h"

namespace brt::core {

// How the layer lays out the keys and values it hands the piece.
enum class WindowLayout {
  // [B, N, A], stream-major (standard, recurrent and BST layers): the piece runs §3.2's
  // attention over whole segments and carries each stream's last W rows.
  kSegment,
  // Block-major (the feedback stack, §5.4): the layer attends block by block itself, reading
  // cache_keys()/cache_values() as block −1 of block 0, and hands carry() its last block
  // [B, W, A]. The piece holds the cache only.
  kBlockMajor,
};

template <typename T>
class CachedWindowAttention {
 public:
  // dims: B streams of N tokens, window W, this rank's heads. Allocates the carried block and
  // the block attended this segment (and, for kSegment, the saved probabilities) in `memory`.
  // cp: the chunks of the segment (dims.seq is this rank's chunk), kSegment only.
  // detached_blocks: the xl form above (kSegment only).
  CachedWindowAttention(const kernels::WindowAttnDims& dims, const TensorParallel& tp,
                        kernels::Memory& memory, WindowLayout layout = WindowLayout::kSegment,
                        const ContextParallel& cp = {}, bool detached_blocks = false);

  // §8: block 0's window starts with zeros for the streams that start a document (doc_start:
  // [B], host memory), else with the block carried from the stream's previous segment.
  void prepare(kernels::Backend<T>& be, const uint8_t* doc_start);
  // §3.2 over the segment (kSegment): q, k, v [B·N, A] are Q̂, K̂, V; out [B·N, A] is
  // overwritten. q, k, v must stay alive until backward (they are saved, not copied).
  // out_for_products: out is read only by the backend's products until the model's end
  // (Backend::window_attention_forward_for_products).
  void forward(kernels::Backend<T>& be, const T* q, const T* k, const T* v,
               const Param<T>& rel_bias, const Param<T>& scale, T* out, bool out_for_products = false);
  // dout: gradient w.r.t. out. WRITES dq, dk, dv [B·N, A] (their contents on entry do not
  // matter; Backend::window_attention_backward_write) and accumulates the gradients of the bias
  // table and the scale; the cache gets none (§8: detached). dv_for_product: dv is read next,
  // and only, as V's projection's dy (Backend::window_attention_backward_write_dv_for_product;
  // not under context parallelism, whose halo gradient is added into dv after).
  void backward(kernels::Backend<T>& be, const T* dout, Param<T>& rel_bias, Param<T>& scale,
                T* dq, T* dk, T* dv, bool dv_for_product = false);
  // §8: keeps this segment's last block of keys and values for the next one. kSegment: k, v
  // are the segment's [B·N, A]; kBlockMajor: its last block [B, W, A].
  void carry(kernels::Backend<T>& be, const T* k, const T* v);

  // [B, W, A]: block −1 of this segment's block 0, as prepare() left it.
  const T* cache_keys() const { return k_attended_.data(); }
  const T* cache_values() const { return v_attended_.data(); }

  // prefix + "cache.k", prefix + "cache.v" (prefix: "layers.{i}."), for checkpoints and tests.
  std::vector<TensorRef<T>> carried_state(const std::string& prefix);
  // The cache attended this segment and the saved probabilities (the carried block is
  // counted as carried state).
  int64_t activation_bytes() const;

 private:
  void require_segment_layout(const char* what) const;
  // Context parallelism: block 0's window from chunk r − 1 (forward), and the gradient that
  // chunk r + 1's block 0 sends back to this chunk's last block (backward).
  void exchange_halo(kernels::Backend<T>& be, const T* k, const T* v);
  void return_halo_gradient(kernels::Backend<T>& be, const Param<T>& rel_bias,
                            const Param<T>& scale, const T* dout, T* dk, T* dv);
  void halo_gradient(kernels::Backend<T>& be, const Param<T>& rel_bias, const Param<T>& scale,
                     const T* dout);
  // Detached blocks: the kernel's problem is one block per (stream, block), [B·T, W, A], each
  // attending to its own cache block (the previous block, detached; block 0 the carried one).
  kernels::WindowAttnDims attended_dims() const;
  const T* attended_keys() const;
  const T* attended_values() const;
  void gather_previous_blocks(kernels::Backend<T>& be, const T* k, const T* v);

  kernels::WindowAttnDims dims_;
  WindowLayout layout_;
  ShardSpec heads_;  // this rank's head columns of A in the carried tensors
  // Saved by forward for backward (owned by the layer's projections).
  const T* q_ = nullptr;
  const T* k_ = nullptr;
  const T* v_ = nullptr;
  kernels::Buffer<T> k_attended_, v_attended_;  // [B, W, A] block −1 of this segment
  kernels::Buffer<T> probs_;                    // kSegment: [B, T, H, W, 2W]
  kernels::Buffer<T> k_carried_, v_carried_;    // [B, W, A] carried between segments (§8)
  // Detached blocks with T > 1: [B·T, W, A], block t's cache (block t − 1, block 0's the carry).
  bool detached_ = false;
  kernels::Buffer<T> k_blocks_, v_blocks_;
  // Context parallelism (empty otherwise).
  ContextParallel cp_;
  kernels::Buffer<T> halo_send_;  // [2, B, W, A]: this chunk's last block of K̂, V (or dK̂, dV)
  kernels::Buffer<T> halo_recv_;  // [2, B, W, A]: the neighbour's
  // The two-block problem [halo; block 0] whose backward gives the halo's gradient:
  // [B, 2W, A] each, the zero cache [B, W, A], probabilities, and discarded bias/scale grads.
  kernels::Buffer<T> pair_q_, pair_k_, pair_v_, pair_out_, pair_dq_, pair_dk_, pair_dv_;
  kernels::Buffer<T> pair_zero_, pair_probs_, pair_dbias_, pair_dscale_;
};

}  // namespace brt::core
