#include "core/layers/bst_layer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include "core/layers/linear.h"
#include "core/layers/output_projection.h"

namespace brt::core {

template <typename T>
BstLayer<T>::BstLayer(ParamStore<T>& store, const ModelConfig& cfg, int index, int streams,
                      kernels::Backend<T>& backend, const TensorParallel& tp,
                      const ContextParallel& cp)
    : store_(store),
      cfg_(cfg),
      tp_(tp),
      shape_{cfg.d_model, tp.local(cfg.heads, "model.heads"), cfg.head_dim},
      prefix_("layers." + std::to_string(index) + "."),
      streams_(streams),
      every_stream_starts_(size_t(streams), 1),
      mf_(cfg.bst_variant == BstVariant::kMF),
      ctx_keys_(mf_ ? cfg.ctx_states : cfg.window),
      kv_rows_(mf_ ? int64_t{streams} * cfg.blocks() * cfg.ctx_states : int64_t{streams} * cfg.seq_len),
      ssm_(store, cfg, prefix_, streams, backend, tp, cp),
      window_({streams, cfg.seq_len, cfg.window, shape_.heads, cfg.head_dim}, tp,
              backend.memory(), WindowLayout::kSegment, cp),
      cp_(cp.bound_to(backend.memory())) {
  kernels::Memory& memory = backend.memory();
  // Full logical sizes for the declarations; A and H below are this rank's.
  const int D = cfg.d_model, A_full = cfg.attn_width(), H_full = cfg.heads;
  const int A = shape_.width(), H = shape_.heads, N = cfg.seq_len, W = cfg.window;
  const int Tb = cfg.blocks();
  const std::string ap = prefix_ + "attn.";
  const auto column = [&](const char* name) {
    return declare_matrix(store, ap + name, D, A_full, 1.0, tp.columns());
  };
  proj_.norm = declare_norm(store, prefix_ + "attn_norm.scale", D);
  proj_.weights = {column("wq"), column("wk"), column("wv"), column("wq2")};
  proj_.normalised = {true, true, false, true};
  proj_.tp = tp;
  cproj_.norm = declare_norm(store, ap + "ctx_norm.scale", D);
  cproj_.wk = column("wkc");
  cproj_.wv = column("wvc");
  cproj_.groups = cfg.bst_variant == BstVariant::kMH ? H_full : 1;
  cproj_.tp = tp;
  // Wo [2A, D] acts on concat(A_self, A_cross): this rank owns its heads' rows in both halves.
  wo_ = declare_matrix(store, ap + "wo", 2 * A_full, D, 1.0, tp.rows(2));
  scale1_ = declare_ones(store, ap + "scale", {H_full}, tp.heads());
  scale2_ = declare_ones(store, ap + "scale2", {H_full}, tp.heads());
  rel_bias_ = declare_normal(store, ap + "rel_bias", {H_full, kernels::kT5Buckets},
                             1.0 / std::sqrt(double(kernels::kT5Buckets)), tp.heads());
  mlp_ = declare_mlp(store, prefix_ + "mlp_norm.scale", prefix_ + "mlp.", D, cfg.d_ff, tp);
  if (mf_) {  // model.md §7.2: E_ctx ~ N(0, 1), Ctx_init ~ N(0, 0.1)
    cproj_.ids = declare_normal(store, prefix_ + "ssm.ctx_ids", {cfg.ctx_states, D}, 1.0);
    cproj_.id_rows = cfg.ctx_states;
    ctx_init_ = declare_normal(store, prefix_ + "ssm.ctx_init", {cfg.ctx_states, D}, 0.1);
  }

  const size_t rows = size_t(streams) * N, na = rows * A;
  proj_acts_.allocate(memory, proj_, shape_, int(rows));
  const int64_t cproj_rows = mf_ ? kv_rows_ : int64_t(rows);  // rows per group
  cproj_acts_.allocate(memory, cproj_, shape_, cproj_rows);
  a_self_.allocate(memory, na, "BST self-attention output");
  a_cross_.allocate(memory, na, "BST cross-attention output");
  probs_cross_.allocate(memory, size_t(streams) * Tb * H * W * ctx_keys_,
                        "BST cross-attention probabilities");
  y_.allocate(memory, rows * D, "BST mid-residual");
  mlp_acts_.allocate(memory, mlp_, int(rows));
  for (auto* v : {&dkc_, &dvc_, &dscratch_a_})
    v->allocate(memory, size_t(kv_rows_) * A, "BST context backward scratch");
  dscratch_h_.allocate(memory, size_t(cproj_rows) * cproj_.groups * D,
                       "BST context norm backward scratch");
  dctx_.allocate(memory, size_t(ssm_.context_rows()) * D, "BST context gradient");
  if (mf_) {
    const size_t blocks = size_t(streams) * Tb * cfg.ctx_states * D;
    ctx_blocks_.allocate(memory, blocks, "BST MF context blocks");
    dctx_blocks_.allocate(memory, blocks, "BST MF context block gradient");
    ctx_last_.allocate(memory, size_t(streams) * cfg.ctx_states * D, "BST MF carried context");
    mf_continues_.assign(streams, 0);
    if (cp_.active()) {
      mf_end_.allocate(memory, size_t(streams) * cfg.ctx_states * D, "BST MF chunk end context");
      mf_end_in_.allocate(memory, mf_end_.size(), "BST MF previous chunk's end context");
    }
  }
}

template <typename T>
kernels::CrossAttnDims BstLayer<T>::cross_dims() const {
  const int A = shape_.width(), W = cfg_.window;
  // One problem per (stream, block): W queries over the block's context keys.
  return {streams_ * cfg_.blocks(), W,           ctx_keys_,      shape_.heads, shape_.head_dim,
          int64_t(W) * A,           int64_t(ctx_keys_) * A, !mf_};
}

// MF (model.md §7.2): block k ≥ 1 reads Ctx_c[kW − 1] = the SSM's end-of-block state of block
// k − 1; block 0 reads Ctx_init at a document start or with the carry off, else the previous
// segment's last-position context (detached).
template <typename T>
void BstLayer<T>::assemble_mf_context(kernels::Backend<T>& be, const uint8_t* doc_start) {
  const int Tb = cfg_.blocks(), S = cfg_.ctx_states, D = cfg_.d_model;
  const int64_t block = int64_t(S) * D;
  const T* ends = ssm_.context();
  bool all_continue = true;
  for (int b = 0; b < streams_; ++b) {
    mf_continues_[b] = cfg_.ssm_carry && !doc_start[b];
    all_continue = all_continue && mf_continues_[b];
  }
  // Strided copies over the batch (one launch each), per stream only where some restart.
  const int64_t stride = int64_t(Tb) * block;
  if (cp_.active() && !cp_.first()) {  // block 0 reads the previous chunk's last block end
    std::fill(mf_continues_.begin(), mf_continues_.end(), uint8_t(1));
    be.copy_rows(mf_end_in_.data(), block, streams_, block, ctx_blocks_.data(), stride);
  } else if (all_continue) {
    be.copy_rows(ctx_last_.data(), block, streams_, block, ctx_blocks_.data(), stride);
  } else {
    for (int b = 0; b < streams_; ++b) {
      const T* first = mf_continues_[b] ? ctx_last_.data() + b * block : store_[ctx_init_].value;
      be.copy(first, block, ctx_blocks_.data() + b * stride);
    }
  }
  if (Tb > 1) be.copy_rows(ends, stride, streams_, (Tb - 1) * block, ctx_blocks_.data() + block, stride);
}

template <typename T>
void BstLayer<T>::forward(const StepContext<T>& ctx, const T* x, T* out) {
  auto& be = ctx.backend;
  const int D = shape_.d_model, A = shape_.width(), N = cfg_.seq_len;
  const int B = streams_, rows = B * N;
  x_ = x;
  projections_forward(be, store_, proj_, shape_, x, rows, proj_acts_);
  const T* q = proj_acts_.out[0].data();
  const T* k = proj_acts_.out[1].data();
  const T* v = proj_acts_.out[2].data();
  const T* q2 = proj_acts_.out[3].data();
  // A_self: §3.2, block 0 attending to the cache (§8).
  window_.prepare(be, ctx.doc_start);
  window_.forward(be, q, k, v, store_[rel_bias_], store_[scale1_], a_self_.data());
  // Context states (§7.1) and their keys/values (§7.2).
  // The SSM carry restarts at a document start, or at every segment under the ablation.
  const uint8_t* carry_reset = this->carry_reset(ctx.doc_start);
  ssm_.forward(be, carry_reset, x);
  const T* context = ssm_.context();
  if (mf_ && cp_.active()) exchange_mf_ends(be);
  if (mf_) {
    assemble_mf_context(be, carry_reset);
    context = ctx_blocks_.data();
  }
  context_proj_forward(be, store_, cproj_, shape_, context, mf_ ? kv_rows_ : int64_t(rows),
                       cproj_acts_);
  be.cross_attention_forward(cross_dims(), q2, cproj_acts_.k.data(), cproj_acts_.v.data(),
                             store_[scale2_].value, a_cross_.data(), probs_cross_.data());
  // Y = X + concat(A_self, A_cross)·Wo;  Z = Y + MLP(Y)
  dual_output_forward(be, store_, tp_, wo_, mlp_, mlp_acts_, x, a_self_.data(), a_cross_.data(),
                      rows, A, y_.data(), out);
  // Carry, detached (§8, §7.3).
  window_.carry(be, k, v);
  if (mf_) {  // under CP the segment's last block end is the last chunk's: chunk 0 received it
    const int Tb = cfg_.blocks();
    const int64_t sd = int64_t(cfg_.ctx_states) * D;
    if (cp_.active()) {
      if (cp_.first()) be.copy(mf_end_in_.data(), B * sd, ctx_last_.data());
    } else
      be.copy_rows(ssm_.context() + int64_t(Tb - 1) * sd, int64_t(Tb) * sd, B, sd, ctx_last_.data(), sd);
  }
}

template <typename T>
void BstLayer<T>::exchange_mf_ends(kernels::Backend<T>& be) {
  const int Tb = cfg_.blocks();
  const int64_t sd = int64_t(cfg_.ctx_states) * cfg_.d_model;
  be.copy_rows(ssm_.context() + int64_t(Tb - 1) * sd, int64_t(Tb) * sd, streams_, sd, mf_end_.data(), sd);
  cp_.from_left(mf_end_.data(), mf_end_in_.data(), streams_ * sd);
}

// Chunk r's block 0 read chunk r − 1's last block end: that gradient goes back and joins the
// last block end's (which, without CP, fed only the detached carry).
template <typename T>
void BstLayer<T>::return_mf_end_gradient(kernels::Backend<T>& be) {
  const int Tb = cfg_.blocks();
  const int64_t sd = int64_t(cfg_.ctx_states) * cfg_.d_model;
  if (cp_.first())
    be.fill(mf_end_.data(), streams_ * sd, T(0));
  else
    be.copy_rows(dctx_blocks_.data(), int64_t(Tb) * sd, streams_, sd, mf_end_.data(), sd);
  cp_.from_right(mf_end_.data(), mf_end_in_.data(), streams_ * sd);
  if (cp_.last()) return;  // it received chunk 0's zeros
  const T* right = mf_end_in_.data();
  for (int b = 0; b < streams_; ++b)
    be.add_inplace(dctx_.data() + (int64_t(b) * Tb + Tb - 1) * sd, right + b * sd, sd);
}

template <typename T>
void BstLayer<T>::backward(const StepContext<T>& ctx, const T* dout, T* dx,
                           BackwardScratch<T>& scratch) {
  auto& be = ctx.backend;
  const int D = shape_.d_model, A = shape_.width(), N = cfg_.seq_len, B = streams_;
  const int rows = B * N;
  const int64_t na = int64_t(rows) * A;
  if (ablation_ != CarryAblation::kNone)
    throw std::logic_error(prefix_ + ": backward with a carry ablation set (evaluation only)");
  T* da_self = scratch.d_attn[0].data();
  T* da_cross = scratch.d_attn[1].data();
  const T* dy = dual_output_backward(be, store_, wo_, mlp_, mlp_acts_, y_.data(), a_self_.data(),
                       a_cross_.data(), rows, A, dout, scratch, da_self, da_cross);
  T* dq = scratch.d_attn[2].data();
  T* dk = scratch.d_attn[3].data();
  T* dv = scratch.d_attn[4].data();
  T* dq2 = scratch.d_attn[5].data();
  be.fill(dq2, na, T(0));  // dq, dk, dv are written by the window attention's backward below
  be.fill(dkc_.data(), int64_t(dkc_.size()), T(0));
  be.fill(dvc_.data(), int64_t(dvc_.size()), T(0));
  be.cross_attention_backward(cross_dims(), proj_acts_.out[3].data(), cproj_acts_.k.data(),
                              cproj_acts_.v.data(), store_[scale2_].value, probs_cross_.data(),
                              da_cross, dq2, dkc_.data(), dvc_.data(), store_[scale2_].grad);
  window_.backward(be, da_self, store_[rel_bias_], store_[scale1_], dq, dk, dv);
  const std::array<const T*, 4> grads = {dq, dk, dv, dq2};
  projections_backward(be, store_, proj_, shape_, x_, rows, proj_acts_, grads, dx,
                       scratch.d_attn[0].data(), scratch.d_norm.data(), dy, false);  // dx written
  // Context side: K̂c, Vc → the context rows → the SSM.
  be.fill(dctx_.data(), int64_t(dctx_.size()), T(0));
  if (!mf_) {
    context_proj_backward(be, store_, cproj_, shape_, ssm_.context(), int64_t(rows), cproj_acts_,
                          dkc_.data(), dvc_.data(), dctx_.data(), dscratch_a_.data(),
                          dscratch_h_.data());
  } else {
    be.fill(dctx_blocks_.data(), int64_t(dctx_blocks_.size()), T(0));
    context_proj_backward(be, store_, cproj_, shape_, ctx_blocks_.data(), kv_rows_, cproj_acts_,
                          dkc_.data(), dvc_.data(), dctx_blocks_.data(), dscratch_a_.data(),
                          dscratch_h_.data());
    // Undo assemble_mf_context: block k ≥ 1 came from end state k − 1; block 0 from Ctx_init
    // (learned) or the carried context (detached). The last end state fed only the carry.
    const int Tb = cfg_.blocks();
    const int64_t sd = int64_t(cfg_.ctx_states) * D;
    if (Tb > 1)
      be.copy_rows(dctx_blocks_.data() + sd, int64_t(Tb) * sd, B, (Tb - 1) * sd, dctx_.data(),
                   int64_t(Tb) * sd);
    for (int b = 0; b < B; ++b)
      if (!mf_continues_[b])
        be.add_inplace(store_[ctx_init_].grad, dctx_blocks_.data() + int64_t(b) * Tb * sd, sd);
    if (cp_.active()) return_mf_end_gradient(be);
  }
  ssm_.backward(be, dctx_.data(), dx);
}

template <typename T>
void BstLayer<T>::accumulate_diagnostics(kernels::Backend<T>& be, const uint8_t* mask,
                                         T* scratch_a, T* scratch_b, LayerDiagnostics& out) {
  out.kind = "bst";
  accumulate_state_share(be, a_self_.data(), a_cross_.data(), store_[wo_].value,
                         streams_ * cfg_.seq_len, shape_.width(), shape_.d_model, mask,
                         scratch_a, scratch_b, out.state_share);
}

template <typename T>
std::vector<TensorRef<T>> BstLayer<T>::carried_state() {
  std::vector<TensorRef<T>> refs = window_.carried_state(prefix_);
  for (auto& r : ssm_.carried_state()) refs.push_back(r);
  if (mf_)
    refs.push_back({prefix_ + "ssm.ctx_last", {streams_, cfg_.ctx_states, cfg_.d_model}, ctx_last_.data()});
  return refs;
}

template <typename T>
int64_t BstLayer<T>::activation_bytes() const {
  int64_t n = 0;
  for (const auto* v : {&a_self_, &a_cross_, &probs_cross_, &ctx_blocks_, &y_}) n += v->bytes();
  return proj_acts_.bytes() + cproj_acts_.bytes() + window_.activation_bytes() + mlp_acts_.bytes() +
         ssm_.activation_bytes() + int64_t(mf_continues_.size()) + n + mf_end_.bytes() + mf_end_in_.bytes();
}

template <typename T>
int64_t BstLayer<T>::backward_scratch_bytes() const {
  int64_t n = 0;
  for (const auto* v : {&dkc_, &dvc_, &dscratch_a_, &dscratch_h_, &dctx_, &dctx_blocks_})
    n += v->bytes();
  return ssm_.backward_scratch_bytes() + n;
}

template class BstLayer<float>;
template class BstLayer<double>;

}  // namespace brt::core
