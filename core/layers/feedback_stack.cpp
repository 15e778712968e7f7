#include "core/layers/feedback_stack.h"

#include <array>
#include <cmath>
#include <stdexcept>

#include "core/layers/linear.h"
#include "core/layers/output_projection.h"

namespace brt::core {

namespace {

int the_recurrent_layer(const ModelConfig& cfg) {
  if (cfg.recurrent_layers.size() != 1)
    throw std::invalid_argument("model.recurrent_layers: the feedback variant is defined for one "
                                "recurrent layer (model.md §5.4)");
  return cfg.recurrent_layers[0];
}

}  // namespace

template <typename T>
FeedbackStack<T>::FeedbackStack(ParamStore<T>& store, const ModelConfig& cfg, int streams,
                                kernels::Memory& memory, const TensorParallel& tp)
    : store_(store),
      cfg_(cfg),
      tp_(tp),
      shape_{cfg.d_model, tp.local(cfg.heads, "model.heads"), cfg.head_dim},
      streams_(streams),
      rec_(the_recurrent_layer(cfg)),
      rec_prefix_("layers." + std::to_string(rec_) + "."),
      state_(store, cfg, rec_prefix_, streams, memory, tp) {
  const int D = cfg.d_model, S = cfg.state_size;
  const int A = shape_.width(), H = shape_.heads, W = cfg.window, Tb = cfg.blocks();
  const int L = cfg.layers;
  // Every layer's token side has the recurrent layer's parameters (model.md §5.4, §9).
  for (int l = 0; l < L; ++l) {
    TokenSide side;
    side.prefix = "layers." + std::to_string(l) + ".";
    static_cast<RecurrentTokenParams&>(side) = declare_recurrent_token_side(store, cfg, side.prefix, tp);
    if (l == rec_)
      state_init_ = declare_normal(store, side.prefix + "state.init", {S, D}, cfg.state_init_std, tp.rows());
    layers_.push_back(std::move(side));
  }
  const int S_local = tp.local(S, "model.state_size");
  const int bw = streams * W;
  const size_t block_a = size_t(bw) * A, ext_a = 2 * block_a, block_d = size_t(bw) * D;
  res_.resize(size_t(L) + 1);
  for (auto& per_block : res_) {
    per_block.resize(size_t(Tb));
    for (auto& b : per_block) b.allocate(memory, block_d, "feedback residual block");
  }
  acts_.resize(size_t(L));
  dk_.resize(size_t(L));
  dv_.resize(size_t(L));
  for (int l = 0; l < L; ++l) {
    acts_[l].resize(size_t(Tb));
    dk_[l].resize(size_t(Tb));
    dv_[l].resize(size_t(Tb));
    for (int t = 0; t < Tb; ++t) {
      BlockActs& a = acts_[l][t];
      a.proj.allocate(memory, layers_[l].proj, shape_, bw);
      for (auto* v : {&a.q_ext, &a.k_ext, &a.v_ext, &a.a_ext})
        v->allocate(memory, ext_a, "feedback two-block window");
      a.probs_ext.allocate(memory, size_t(streams) * 2 * H * W * 2 * W, "feedback window probs");
      a.a_ee.allocate(memory, block_a, "feedback window attention output");
      a.a_es.allocate(memory, block_a, "feedback state attention output");
      a.probs_es.allocate(memory, size_t(streams) * H * W * S, "feedback state attention probs");
      a.y.allocate(memory, block_d, "feedback mid-residual");
      a.mlp.allocate(memory, layers_[l].mlp, bw);
      dk_[l][t].allocate(memory, block_a, "feedback key gradients");
      dv_[l][t].allocate(memory, block_a, "feedback value gradients");
    }
  }
  const size_t cache = size_t(streams) * W * A, sd = size_t(streams) * S_local * D;
  windows_.reserve(size_t(L));
  for (int l = 0; l < L; ++l)
    windows_.emplace_back(kernels::WindowAttnDims{streams, cfg.seq_len, W, H, shape_.head_dim}, tp,
                          memory, WindowLayout::kBlockMajor);
  zero_cache_.allocate(memory, cache, "feedback zero cache");
  for (auto* v : {&sigma0_, &d_sigma0_, &sigma_}) v->allocate(memory, sd, "feedback recurrent state");
  for (auto* v : {&dq_ext_, &dk_ext_, &dv_ext_, &da_ext_, &dk_win_, &dv_win_})
    v->allocate(memory, ext_a, "feedback backward scratch");
  for (auto* v : {&dq_, &dq2_, &da_ee_, &da_es_}) v->allocate(memory, block_a, "feedback backward scratch");
  for (auto* v : {&dk_s_, &dv_s_}) v->allocate(memory, size_t(streams) * S * A, "feedback state key gradients");
  for (auto* v : {&dres_a_, &dres_b_}) v->allocate(memory, block_d, "feedback residual gradient");
  block_mask_.assign(size_t(bw), 0);
}

template <typename T>
void FeedbackStack<T>::to_half(kernels::Backend<T>& be, const T* block, int width, int half,
                               T* ext) const {
  const int64_t rows = int64_t(cfg_.window) * width;
  for (int b = 0; b < streams_; ++b) be.copy(block + b * rows, rows, ext + (2 * b + half) * rows);
}

template <typename T>
void FeedbackStack<T>::add_half(kernels::Backend<T>& be, const T* ext, int width, int half,
                                T* block) const {
  const int64_t rows = int64_t(cfg_.window) * width;
  for (int b = 0; b < streams_; ++b) be.add_inplace(block + b * rows, ext + (2 * b + half) * rows, rows);
}

template <typename T>
void FeedbackStack<T>::token_forward(kernels::Backend<T>& be, int layer, int t, int state_block) {
  const TokenSide& side = layers_[layer];
  BlockActs& a = acts_[layer][t];
  const int A = shape_.width(), H = shape_.heads, dh = shape_.head_dim, W = cfg_.window;
  const int S = cfg_.state_size, B = streams_, bw = B * W;
  const T* x = res_[layer][t].data();
  projections_forward(be, store_, side.proj, shape_, x, bw, a.proj);
  const T* q = a.proj.out[0].data();
  const T* k = a.proj.out[1].data();
  const T* v = a.proj.out[2].data();
  const T* q2 = a.proj.out[3].data();
  // Block t's window [K_{t−1}; K_t] (§3.2): block −1 is the cache (§8).
  const T* k_prev = t == 0 ? windows_[layer].cache_keys() : acts_[layer][t - 1].proj.out[1].data();
  const T* v_prev = t == 0 ? windows_[layer].cache_values() : acts_[layer][t - 1].proj.out[2].data();
  be.fill(a.q_ext.data(), int64_t(a.q_ext.size()), T(0));
  to_half(be, q, A, 1, a.q_ext.data());
  to_half(be, k_prev, A, 0, a.k_ext.data());
  to_half(be, k, A, 1, a.k_ext.data());
  to_half(be, v_prev, A, 0, a.v_ext.data());
  to_half(be, v, A, 1, a.v_ext.data());
  const kernels::WindowAttnDims two_blocks{B, 2 * W, W, H, dh};
  be.window_attention_forward(two_blocks, a.q_ext.data(), a.k_ext.data(), a.v_ext.data(),
                              zero_cache_.data(), zero_cache_.data(), store_[side.rel_bias].value,
                              store_[side.scale1].value, a.a_ext.data(), a.probs_ext.data());
  const int64_t rows = int64_t(W) * A;
  be.copy_rows(a.a_ext.data() + rows, 2 * rows, B, rows, a.a_ee.data(), rows);  // second halves
  // A_es: the tokens read the recurrent layer's K̂_s, V_s of Σ_t (§5.4).
  const kernels::CrossAttnDims to_state{B, W, S, H, dh, int64_t(W) * A, int64_t(S) * A, false};
  be.cross_attention_forward(to_state, q2, state_.keys(state_block), state_.values(state_block),
                             store_[side.scale2].value, a.a_es.data(), a.probs_es.data());
  dual_output_forward(be, store_, tp_, side.wo, side.mlp, a.mlp, x, a.a_ee.data(), a.a_es.data(),
                      bw, A, a.y.data(), res_[layer + 1][t].data());
}

template <typename T>
void FeedbackStack<T>::forward(const StepContext<T>& ctx, const T* x, T* out) {
  auto& be = ctx.backend;
  const int D = shape_.d_model, A = shape_.width(), W = cfg_.window, N = cfg_.seq_len;
  const int B = streams_, Tb = cfg_.blocks(), L = cfg_.layers;
  const int64_t block_d = int64_t(W) * D;
  for (int t = 0; t < Tb; ++t)  // to block-major: block t of every stream, one strided copy
    be.copy_rows(x + int64_t(t) * W * D, int64_t(N) * D, B, block_d, res_[0][t].data(), block_d);
  for (auto& window : windows_) window.prepare(be, ctx.doc_start);  // block −1 of block 0 (§8)
  // Σ_0: the learned initial state at a document start (or under an eval ablation), else the
  // carried one (§8).
  const int64_t sd = int64_t(cfg_.state_size / tp_.size()) * D;
  if (ablation_ == CarryAblation::kNone && no_stream_starts(ctx.doc_start, B))
    be.copy(sigma_.data(), B * sd, sigma0_.data());  // every stream carries: one launch
  else
    for (int b = 0; b < B; ++b)
      be.copy(ctx.doc_start[b] || ablation_ != CarryAblation::kNone ? store_[state_init_].value
                                                                    : sigma_.data() + b * sd,
              sd, sigma0_.data() + b * sd);
  state_.begin_forward(be, sigma0_.data());
  for (int t = 0; t < Tb; ++t) {
    state_.forward_keys(be, t);  // K̂_s, V_s of Σ_t, before the block enters the stack
    const int read = ablation_ == CarryAblation::kBlock ? 0 : t;
    for (int l = 0; l < L; ++l) token_forward(be, l, t, read);
    // The recurrent layer turns Σ_t into Σ_{t+1} from its block-t window (§5.2).
    state_.forward_update(be, t, acts_[rec_][t].k_ext.data(), acts_[rec_][t].v_ext.data(),
                          int64_t(2 * W) * A);
  }
  // Carry the last block's keys/values and Σ_T, detached (§8); back to the stream layout.
  for (int l = 0; l < L; ++l)
    windows_[l].carry(be, acts_[l][Tb - 1].proj.out[1].data(), acts_[l][Tb - 1].proj.out[2].data());
  be.copy(state_.sigma(Tb), int64_t(B) * sd, sigma_.data());
  for (int t = 0; t < Tb; ++t)  // back to stream-major, one strided copy per block
    be.copy_rows(res_[L][t].data(), block_d, B, block_d, out + int64_t(t) * W * D, int64_t(N) * D);
}

template <typename T>
void FeedbackStack<T>::token_backward(kernels::Backend<T>& be, int layer, int t, const T* dout,
                                      T* dx, BackwardScratch<T>& scratch) {
  const TokenSide& side = layers_[layer];
  const BlockActs& a = acts_[layer][t];
  const int A = shape_.width(), H = shape_.heads, dh = shape_.head_dim, W = cfg_.window;
  const int S = cfg_.state_size, B = streams_, bw = B * W;
  const int64_t block_a = int64_t(bw) * A, ext_a = 2 * block_a;
  const T* dy = dual_output_backward(be, store_, side.wo, side.mlp, a.mlp, a.y.data(), a.a_ee.data(),
                                     a.a_es.data(), bw, A, dout, scratch, da_ee_.data(), da_es_.data());
  be.fill(dq_.data(), block_a, T(0));
  be.fill(dq2_.data(), block_a, T(0));
  const kernels::CrossAttnDims to_state{B, W, S, H, dh, int64_t(W) * A, int64_t(S) * A, false};
  be.cross_attention_backward(to_state, a.proj.out[3].data(), state_.keys(t), state_.values(t),
                              store_[side.scale2].value, a.probs_es.data(), da_es_.data(),
                              dq2_.data(), dk_s_.data(), dv_s_.data(), store_[side.scale2].grad);
  // The window attention as the second block of two: no gradient enters the first block's
  // (zero) queries, so its keys and values get exactly what block t's queries send them.
  be.fill(da_ext_.data(), ext_a, T(0));
  to_half(be, da_ee_.data(), A, 1, da_ext_.data());
  for (auto* g : {&dq_ext_, &dk_ext_, &dv_ext_}) be.fill(g->data(), ext_a, T(0));
  const kernels::WindowAttnDims two_blocks{B, 2 * W, W, H, dh};
  be.window_attention_backward(two_blocks, a.q_ext.data(), a.k_ext.data(), a.v_ext.data(),
                               zero_cache_.data(), zero_cache_.data(), store_[side.rel_bias].value,
                               store_[side.scale1].value, a.probs_ext.data(), da_ext_.data(),
                               dq_ext_.data(), dk_ext_.data(), dv_ext_.data(),
                               store_[side.rel_bias].grad, store_[side.scale1].grad);
  add_half(be, dq_ext_.data(), A, 1, dq_.data());
  add_half(be, dk_ext_.data(), A, 1, dk_[layer][t].data());
  add_half(be, dv_ext_.data(), A, 1, dv_[layer][t].data());
  if (t > 0) {  // block −1 is the detached cache: its gradient stops (§8)
    add_half(be, dk_ext_.data(), A, 0, dk_[layer][t - 1].data());
    add_half(be, dv_ext_.data(), A, 0, dv_[layer][t - 1].data());
  }
  // Block t's keys and values are complete now: block t + 1 and, for the recurrent layer,
  // the state updates of blocks t and t + 1 ran before.
  const std::array<const T*, 4> grads = {dq_.data(), dk_[layer][t].data(), dv_[layer][t].data(),
                                         dq2_.data()};
  projections_backward(be, store_, side.proj, shape_, res_[layer][t].data(), bw, a.proj, grads,
                       dx, scratch.d_attn[0].data(), scratch.d_norm.data(), dy, false);  // dx written
}

template <typename T>
void FeedbackStack<T>::backward(const StepContext<T>& ctx, const T* dout, T* dx,
                                BackwardScratch<T>& scratch) {
  if (ablation_ != CarryAblation::kNone)
    throw std::logic_error("feedback stack: backward with a carry ablation set (evaluation only)");
  auto& be = ctx.backend;
  const int D = shape_.d_model, A = shape_.width(), W = cfg_.window, N = cfg_.seq_len;
  const int B = streams_, Tb = cfg_.blocks(), L = cfg_.layers;
  const int64_t block_d = int64_t(W) * D, block_a = int64_t(B) * W * A;
  for (int l = 0; l < L; ++l)
    for (int t = 0; t < Tb; ++t) {
      be.fill(dk_[l][t].data(), block_a, T(0));
      be.fill(dv_[l][t].data(), block_a, T(0));
    }
  state_.begin_backward(be);
  for (int t = Tb - 1; t >= 0; --t) {
    // Σ_{t+1}'s gradient is complete (block t + 1 ran): back through block t's state update,
    // into the recurrent layer's window keys and values of blocks t − 1 and t.
    be.fill(dk_win_.data(), 2 * block_a, T(0));
    be.fill(dv_win_.data(), 2 * block_a, T(0));
    state_.backward_update(be, t, acts_[rec_][t].k_ext.data(), acts_[rec_][t].v_ext.data(),
                           int64_t(2 * W) * A, dk_win_.data(), dv_win_.data());
    add_half(be, dk_win_.data(), A, 1, dk_[rec_][t].data());
    add_half(be, dv_win_.data(), A, 1, dv_[rec_][t].data());
    if (t > 0) {
      add_half(be, dk_win_.data(), A, 0, dk_[rec_][t - 1].data());
      add_half(be, dv_win_.data(), A, 0, dv_[rec_][t - 1].data());
    }
    // The layers of block t, top down; each adds its share of K̂_s, V_s(Σ_t)'s gradient.
    be.fill(dk_s_.data(), int64_t(dk_s_.size()), T(0));
    be.fill(dv_s_.data(), int64_t(dv_s_.size()), T(0));
    be.copy_rows(dout + int64_t(t) * W * D, int64_t(N) * D, B, block_d, dres_a_.data(), block_d);
    for (int l = L - 1; l >= 0; --l) {
      token_backward(be, l, t, dres_a_.data(), dres_b_.data(), scratch);
      std::swap(dres_a_, dres_b_);
    }
    be.copy_2d(dres_a_.data(), block_d, B, block_d, dx + int64_t(t) * W * D, int64_t(N) * D,
               /*accumulate=*/false);  // dx written (core/layer.h): every block's rows once
    state_.backward_keys(be, t, dk_s_.data(), dv_s_.data());  // completes Σ_t's gradient
  }
  state_.end_backward(be, d_sigma0_.data());
  // Σ_0 is the learned initial state only at a document start (§8).
  const int64_t sd = int64_t(cfg_.state_size / tp_.size()) * D;
  for (int b = 0; b < B; ++b)
    if (ctx.doc_start[b]) be.add_inplace(store_[state_init_].grad, d_sigma0_.data() + b * sd, sd);
}

template <typename T>
std::vector<TensorRef<T>> FeedbackStack<T>::carried_state() {
  std::vector<TensorRef<T>> refs;
  for (int l = 0; l < cfg_.layers; ++l) {
    for (auto& r : windows_[l].carried_state(layers_[l].prefix)) refs.push_back(std::move(r));
    if (l == rec_)
      refs.push_back({rec_prefix_ + "state.sigma", {streams_, cfg_.state_size / tp_.size(), cfg_.d_model},
                      sigma_.data(), ShardSpec{1, tp_.rank(), tp_.size(), 1}});
  }
  return refs;
}

template <typename T>
void FeedbackStack<T>::accumulate_diagnostics(kernels::Backend<T>& be, const uint8_t* mask,
                                              T* scratch_a, T* scratch_b, LayerDiagnostics& out) {
  const int W = cfg_.window, N = cfg_.seq_len, B = streams_;
  out.layer = rec_;
  out.kind = "recurrent";
  out.gate_kind = cfg_.gate == GateKind::kFixed ? "fixed" : "lstm";
  out.dual = cfg_.rec_config == RecurrentConfig::kDual;
  std::vector<uint8_t> active(size_t(B), 0);
  for (int t = 0; t < cfg_.blocks(); ++t) {
    for (int b = 0; b < B; ++b)
      for (int w = 0; w < W; ++w) {
        const uint8_t m = mask[size_t(b) * N + size_t(t) * W + w];
        block_mask_[size_t(b) * W + w] = m;
        active[size_t(b)] |= m;
      }
    accumulate_state_share(be, acts_[rec_][t].a_ee.data(), acts_[rec_][t].a_es.data(),
                           store_[layers_[rec_].wo].value, B * W, shape_.width(), shape_.d_model,
                           block_mask_.data(), scratch_a, scratch_b, out.state_share);
  }
  state_.accumulate_gate_statistics(be.memory(), active.data(), out);
}

template <typename T>
int64_t FeedbackStack<T>::activation_bytes() const {
  int64_t n = 0;
  for (const auto& per_block : res_)
    for (const auto& b : per_block) n += b.bytes();
  for (const auto& per_block : acts_)
    for (const auto& a : per_block) {
      n += a.proj.bytes() + a.mlp.bytes();
      for (const auto* v : {&a.q_ext, &a.k_ext, &a.v_ext, &a.a_ext, &a.probs_ext, &a.a_ee, &a.a_es,
                            &a.probs_es, &a.y})
        n += v->bytes();
    }
  for (const auto& window : windows_) n += window.activation_bytes();
  return n + zero_cache_.bytes() + sigma0_.bytes() + state_.activation_bytes();
}

template <typename T>
int64_t FeedbackStack<T>::backward_scratch_bytes() const {
  int64_t n = 0;
  for (int l = 0; l < cfg_.layers; ++l)
    for (int t = 0; t < cfg_.blocks(); ++t) n += dk_[l][t].bytes() + dv_[l][t].bytes();
  for (const auto* v : {&dq_ext_, &dk_ext_, &dv_ext_, &da_ext_, &dq_, &dq2_, &da_ee_, &da_es_,
                        &dk_win_, &dv_win_, &dk_s_, &dv_s_, &dres_a_, &dres_b_, &d_sigma0_})
    n += v->bytes();
  return n + state_.backward_scratch_bytes();
}

template class FeedbackStack<float>;
template class FeedbackStack<double>;

}  // namespace brt::core
