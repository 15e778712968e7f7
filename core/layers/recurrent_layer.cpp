#include "core/layers/recurrent_layer.h"

#include <array>
#include <cmath>
#include <stdexcept>

#include "core/layers/linear.h"
#include "core/layers/output_projection.h"

namespace brt::core {

namespace {

// Lays out [B, W+N, A] = per stream, the cache block followed by the segment's rows, so
// block t's 2W-row window [K_{t-1}; K_t] is contiguous at row t·W (model.md §3.2, §5.2).
template <typename T>
void build_extended(kernels::Backend<T>& be, int streams, int seq, int window, int width,
                    const T* cache, const T* act, T* ext) {
  const int64_t block = int64_t(window) * width, seg = int64_t(seq) * width;
  for (int b = 0; b < streams; ++b) {
    be.copy(cache + b * block, block, ext + b * (block + seg));
    be.copy(act + b * seg, seg, ext + b * (block + seg) + block);
  }
}

// The segment part of an extended-layout gradient, added to the plain [B, N, A] gradient.
template <typename T>
void add_segment_part(kernels::Backend<T>& be, int streams, int seq, int window, int width,
                      const T* ext, T* act) {
  const int64_t block = int64_t(window) * width, seg = int64_t(seq) * width;
  for (int b = 0; b < streams; ++b)
    be.add_inplace(act + b * seg, ext + b * (block + seg) + block, seg);
}

}  // namespace

template <typename T>
RecurrentTokenParams declare_recurrent_token_side(ParamStore<T>& store, const ModelConfig& cfg,
                                                  const std::string& prefix,
                                                  const TensorParallel& tp) {
  const int D = cfg.d_model, A_full = cfg.attn_width(), H_full = cfg.heads;  // full logical sizes
  const auto column = [&](const char* name) {
    return declare_matrix(store, prefix + name, D, A_full, 1.0, tp.columns());
  };
  RecurrentTokenParams p;
  p.proj.norm = declare_norm(store, prefix + "attn_norm.scale", D);
  p.proj.weights = {column("attn.wq"), column("attn.wk"), column("attn.wv"), column("attn.wq2")};
  p.proj.normalised = {true, true, false, true};
  p.proj.tp = tp;
  // Wo [2A, D] acts on concat(A_ee, A_es): this rank owns its heads' rows in both halves.
  p.wo = declare_matrix(store, prefix + "attn.wo", 2 * A_full, D, 1.0, tp.rows(2));
  p.scale1 = declare_ones(store, prefix + "attn.scale", {H_full}, tp.heads());
  p.scale2 = declare_ones(store, prefix + "attn.scale2", {H_full}, tp.heads());
  p.rel_bias = declare_normal(store, prefix + "attn.rel_bias", {H_full, kernels::kT5Buckets},
                              1.0 / std::sqrt(double(kernels::kT5Buckets)), tp.heads());
  p.mlp = declare_mlp(store, prefix + "mlp_norm.scale", prefix + "mlp.", D, cfg.d_ff, tp);
  return p;
}

template <typename T>
RecurrentLayer<T>::RecurrentLayer(ParamStore<T>& store, const ModelConfig& cfg, int index,
                                  int streams, kernels::Memory& memory,
                                  const TensorParallel& tp)
    : store_(store),
      cfg_(cfg),
      tp_(tp),
      shape_{cfg.d_model, tp.local(cfg.heads, "model.heads"), cfg.head_dim},
      prefix_("layers." + std::to_string(index) + "."),
      streams_(streams),
      state_(store, cfg, prefix_, streams, memory, tp),
      window_({streams, cfg.seq_len, cfg.window, shape_.heads, cfg.head_dim}, tp, memory) {
  // Full logical sizes for the declarations; A and H below are this rank's.
  const int D = cfg.d_model, S = cfg.state_size;
  const int A = shape_.width(), H = shape_.heads;
  const int N = cfg.seq_len, W = cfg.window, T_ = cfg.blocks();
  const RecurrentTokenParams token = declare_recurrent_token_side(store, cfg, prefix_, tp);
  proj_ = token.proj;
  wo_ = token.wo;
  scale1_ = token.scale1;
  scale2_ = token.scale2;
  rel_bias_ = token.rel_bias;
  mlp_ = token.mlp;
  // Σ's S rows are split over TP (sequence parallelism): so are the initial state's.
  state_init_ = declare_normal(store, prefix_ + "state.init", {S, D}, cfg.state_init_std, tp.rows());
  const int S_local = tp.local(S, "model.state_size");

  const int rows = streams * N;
  const size_t na = size_t(rows) * A;
  const size_t ext = size_t(streams) * (W + N) * A, sd = size_t(streams) * S_local * D;
  proj_acts_.allocate(memory, proj_, shape_, rows);
  for (auto* v : {&k_ext_, &v_ext_, &dk_ext_, &dv_ext_})
    v->allocate(memory, ext, "recurrent layer extended k/v");
  for (auto* v : {&sigma0_, &d_sigma0_, &sigma_}) v->allocate(memory, sd, "recurrent state");
  a_ee_.allocate(memory, na, "attention output a_ee");
  a_es_.allocate(memory, na, "attention output a_es");
  probs_es_.allocate(memory, size_t(T_) * streams * H * W * S, "attention probs es");
  y_.allocate(memory, size_t(rows) * D, "attention residual y");
  mlp_acts_.allocate(memory, mlp_, rows);
  dk_s_.allocate(memory, size_t(T_) * streams * S * A, "state key gradients");
  dv_s_.allocate(memory, size_t(T_) * streams * S * A, "state value gradients");
}

template <typename T>
void RecurrentLayer<T>::forward(const StepContext<T>& ctx, const T* x, T* out) {
  auto& be = ctx.backend;
  const int D = shape_.d_model, A = shape_.width(), H = shape_.heads, dh = shape_.head_dim;
  const int S = cfg_.state_size, W = cfg_.window, N = cfg_.seq_len, B = streams_;
  const int rows = B * N;
  x_ = x;
  // Token side projections for the whole segment (§5.2: computed once, not per block).
  projections_forward(be, store_, proj_, shape_, x, rows, proj_acts_);
  const T* q = proj_acts_.out[0].data();
  const T* k = proj_acts_.out[1].data();
  const T* v = proj_acts_.out[2].data();
  const T* q2 = proj_acts_.out[3].data();
  const int64_t block = int64_t(W) * A;
  // Block 0's window starts with the cache (§8); the state side reads the same windows.
  window_.prepare(be, ctx.doc_start);
  build_extended(be, B, N, W, A, window_.cache_keys(), k, k_ext_.data());
  build_extended(be, B, N, W, A, window_.cache_values(), v, v_ext_.data());
  // A_ee: the sliding-window self-attention of §3.2 with bias and scale s_e1.
  window_.forward(be, q, k, v, store_[rel_bias_], store_[scale1_], a_ee_.data());
  // Σ_0: the learned initial state at a document start, else the carried state (§8).
  const int64_t sd = int64_t(S / tp_.size()) * D;  // one stream's rows of Σ on this rank
  // The eval ablations (core/diagnostics.h) restart Σ at every segment.
  const bool reset_state = ablation_ != CarryAblation::kNone;
  if (!reset_state && no_stream_starts(ctx.doc_start, B))
    be.copy(sigma_.data(), B * sd, sigma0_.data());  // every stream carries: one launch
  else
    for (int b = 0; b < B; ++b)
      be.copy(ctx.doc_start[b] || reset_state ? store_[state_init_].value : sigma_.data() + b * sd,
              sd, sigma0_.data() + b * sd);
  state_.forward(be, sigma0_.data(), k_ext_.data(), v_ext_.data());
  // A_es: block t's tokens read Σ_t (W×S per head, no mask); the block ablation: Σ_0 always.
  const kernels::CrossAttnDims to_state{B, W, S, H, dh, int64_t(N) * A, int64_t(S) * A, false};
  for (int t = 0; t < cfg_.blocks(); ++t) {
    const int read = ablation_ == CarryAblation::kBlock ? 0 : t;
    be.cross_attention_forward(to_state, q2 + t * block, state_.keys(read), state_.values(read),
                               store_[scale2_].value, a_es_.data() + t * block,
                               probs_es_.data() + int64_t(t) * B * H * W * S);
  }
  // Y = X + concat(A_ee, A_es)·Wo_e;  Z = Y + MLP(Y)
  dual_output_forward(be, store_, tp_, wo_, mlp_, mlp_acts_, x, a_ee_.data(), a_es_.data(), rows,
                      A, y_.data(), out);
  // Carry the last block's keys/values and Σ_T to the next segment, detached (§8).
  window_.carry(be, k, v);
  be.copy(state_.sigma(cfg_.blocks()), int64_t(B) * sd, sigma_.data());
}

template <typename T>
void RecurrentLayer<T>::backward(const StepContext<T>& ctx, const T* dout, T* dx,
                                 BackwardScratch<T>& scratch) {
  auto& be = ctx.backend;
  const int D = shape_.d_model, A = shape_.width(), H = shape_.heads, dh = shape_.head_dim;
  const int S = cfg_.state_size, W = cfg_.window, N = cfg_.seq_len, B = streams_;
  const int rows = B * N;
  const int64_t na = int64_t(rows) * A, block = int64_t(W) * A;
  if (ablation_ != CarryAblation::kNone)
    throw std::logic_error(prefix_ + ": backward with a carry ablation set (evaluation only)");
  T* da_ee = scratch.d_attn[0].data();
  T* da_es = scratch.d_attn[1].data();
  const T* dy = dual_output_backward(be, store_, wo_, mlp_, mlp_acts_, y_.data(), a_ee_.data(), a_es_.data(),
                       rows, A, dout, scratch, da_ee, da_es);
  T* dq = scratch.d_attn[2].data();
  T* dk = scratch.d_attn[3].data();
  T* dv = scratch.d_attn[4].data();
  T* dq2 = scratch.d_attn[5].data();
  be.fill(dq2, na, T(0));  // dq, dk, dv are written by the window attention's backward below
  // Token→state attention, per block: gradients to Q̂2_e and to each Σ_t's K̂_s, V_s.
  const int64_t sa = int64_t(B) * S * A;
  be.fill(dk_s_.data(), int64_t(dk_s_.size()), T(0));
  be.fill(dv_s_.data(), int64_t(dv_s_.size()), T(0));
  const kernels::CrossAttnDims to_state{B, W, S, H, dh, int64_t(N) * A, int64_t(S) * A, false};
  const T* q2 = proj_acts_.out[3].data();
  for (int t = 0; t < cfg_.blocks(); ++t)
    be.cross_attention_backward(to_state, q2 + t * block, state_.keys(t), state_.values(t),
                                store_[scale2_].value,
                                probs_es_.data() + int64_t(t) * B * H * W * S,
                                da_es + t * block, dq2 + t * block, dk_s_.data() + t * sa,
                                dv_s_.data() + t * sa, store_[scale2_].grad);
  window_.backward(be, da_ee, store_[rel_bias_], store_[scale1_], dq, dk, dv);
  // Backprop through all T blocks of the state recurrence.
  be.fill(dk_ext_.data(), int64_t(dk_ext_.size()), T(0));
  be.fill(dv_ext_.data(), int64_t(dv_ext_.size()), T(0));
  state_.backward(be, k_ext_.data(), v_ext_.data(), dk_s_.data(), dv_s_.data(), dk_ext_.data(),
                  dv_ext_.data(), d_sigma0_.data());
  add_segment_part(be, B, N, W, A, dk_ext_.data(), dk);
  add_segment_part(be, B, N, W, A, dv_ext_.data(), dv);
  // Σ_0 is the learned initial state only at a document start; otherwise it was carried
  // (detached) and its gradient stops here (§8).
  const int64_t sd = int64_t(S / tp_.size()) * D;
  for (int b = 0; b < B; ++b)
    if (ctx.doc_start[b]) be.add_inplace(store_[state_init_].grad, d_sigma0_.data() + b * sd, sd);
  const std::array<const T*, 4> grads = {dq, dk, dv, dq2};
  projections_backward(be, store_, proj_, shape_, x_, rows, proj_acts_, grads, dx,
                       scratch.d_attn[0].data(), scratch.d_norm.data(), dy, false);  // dx written
}

template <typename T>
void RecurrentLayer<T>::accumulate_diagnostics(kernels::Backend<T>& be, const uint8_t* mask,
                                               T* scratch_a, T* scratch_b,
                                               LayerDiagnostics& out) {
  const int N = cfg_.seq_len, B = streams_;
  out.kind = "recurrent";
  out.gate_kind = cfg_.gate == GateKind::kFixed ? "fixed" : "lstm";
  out.dual = cfg_.rec_config == RecurrentConfig::kDual;
  accumulate_state_share(be, a_ee_.data(), a_es_.data(), store_[wo_].value, B * N,
                         shape_.width(), shape_.d_model, mask, scratch_a, scratch_b,
                         out.state_share);
  std::vector<uint8_t> active(size_t(B), 0);  // streams with a predicted target this segment
  for (int b = 0; b < B; ++b)
    for (int n = 0; n < N && !active[size_t(b)]; ++n) active[size_t(b)] = mask[size_t(b) * N + n];
  state_.accumulate_gate_statistics(be.memory(), active.data(), out);
}

template <typename T>
std::vector<TensorRef<T>> RecurrentLayer<T>::carried_state() {
  std::vector<TensorRef<T>> refs = window_.carried_state(prefix_);
  refs.push_back({prefix_ + "state.sigma", {streams_, cfg_.state_size / tp_.size(), cfg_.d_model},
                  sigma_.data(), ShardSpec{1, tp_.rank(), tp_.size(), 1}});  // this rank's S rows
  return refs;
}

template <typename T>
int64_t RecurrentLayer<T>::activation_bytes() const {
  int64_t n = 0;
  for (const auto* v : {&k_ext_, &v_ext_, &sigma0_, &a_ee_, &a_es_, &probs_es_, &y_})
    n += v->bytes();
  return proj_acts_.bytes() + window_.activation_bytes() + mlp_acts_.bytes() +
         state_.activation_bytes() + n;
}

template <typename T>
int64_t RecurrentLayer<T>::backward_scratch_bytes() const {
  int64_t n = 0;
  for (const auto* v : {&dk_s_, &dv_s_, &dk_ext_, &dv_ext_, &d_sigma0_}) n += int64_t(v->size());
  return state_.backward_scratch_bytes() + n * static_cast<int64_t>(sizeof(T));
}

template RecurrentTokenParams declare_recurrent_token_side<float>(ParamStore<float>&, const ModelConfig&,
                                                                  const std::string&, const TensorParallel&);
template RecurrentTokenParams declare_recurrent_token_side<double>(ParamStore<double>&, const ModelConfig&,
                                                                   const std::string&, const TensorParallel&);
template class RecurrentLayer<float>;
template class RecurrentLayer<double>;

}  // namespace brt::core
