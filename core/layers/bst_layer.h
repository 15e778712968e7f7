// The Block-State Transformer layer of model.md §7.2: the §4 layer whose attention also
// cross-attends to context states from an SSM sublayer (BstSsm, §7.1). All blocks of a segment
// run in parallel (no recurrence between blocks): the cross-attention is one batched call over
// the B·T blocks, addressed in place by strides.
//   h = RMSNorm_attn(X);  A_self = WindowAttention(h)             (§3.2, carried cache, s1)
//   A_cross = CrossAttn(norm(h·Wq2), K̂c, Vc)                      (scale s2, §7.2 mask)
//   Y = X + concat(A_self, A_cross)·Wo   (Wo [2A, D]);  Z = Y + MLP(Y)   (§4)
// Context per block k: SH/MH the W context vectors of the block itself under a causal mask
// (j ≤ i); MF the S_ctx vectors Ctx_c[kW − 1] (block 0: ctx_init, or the previous segment's
// last-position context when the SSM carry continues a document), plus ctx_ids, no mask.
// Under tensor parallelism (docs/parallelism.md, "BST under TP") a rank holds its heads of the
// self- and cross-attention (Wq, Wk, Wv, Wq2, Wkc, Wvc by columns; scales, bias by heads; Wo
// by the rows of both halves, its output all-reduced), the MLP's hidden units, and the SSM's
// Ds/TP features (BstSsm); norms, ctx_ids and ctx_init are replicated.
#pragma once

#include <string>
#include <vector>

#include "core/layers/bst_context.h"
#include "core/layers/bst_ssm.h"
#include "core/layers/cached_window_attention.h"
#include "core/layer.h"
#include "core/layers/mlp.h"
#include "core/model_config.h"
#include "core/param_store.h"
#include "core/layers/projections.h"

namespace brt::core {

template <typename T>
class BstLayer : public Layer<T> {
 public:
  // Every buffer lives in backend.memory() (device memory under CUDA, docs/gpu.md); the host
  // only stages the implicit filter network's parameter-sized kernel generation (BstSsm).
  BstLayer(ParamStore<T>& store, const ModelConfig& cfg, int index, int streams,
           kernels::Backend<T>& backend, const TensorParallel& tp = {},
           const ContextParallel& cp = {});

  void stage(const uint8_t* doc_start) override { ssm_.stage(carry_reset(doc_start)); }
  void forward(const StepContext<T>& ctx, const T* x, T* out) override;
  void backward(const StepContext<T>& ctx, const T* dout, T* dx,
                BackwardScratch<T>& scratch) override;
  // cache.k|v [B, W, A] (under TP this rank's head columns); the SSM carry (BstSsm::carried_state); MF: ssm.ctx_last [B, S_ctx, D].
  std::vector<TensorRef<T>> carried_state() override;
  int64_t activation_bytes() const override;
  int64_t backward_scratch_bytes() const override;
  // The segment ablation restarts the SSM carry (and MF's carried context) at every segment;
  // there is no per-block state to reset, so the block ablation leaves BST as it is.
  void set_carry_ablation(CarryAblation a) override { ablation_ = a; }
  bool has_diagnostics() const override { return !tp_.active(); }
  void accumulate_diagnostics(kernels::Backend<T>& be, const uint8_t* mask, T* scratch_a,
                              T* scratch_b, LayerDiagnostics& out) override;

  // The SSM sublayer, for tests (its context() is Ctx of model.md §7.1).
  const BstSsm<T>& ssm() const { return ssm_; }

 private:
  kernels::CrossAttnDims cross_dims() const;
  void assemble_mf_context(kernels::Backend<T>& be, const uint8_t* doc_start);
  // MF under context parallelism: the last block-end context to the next chunk (chunk r's block 0
  // reads chunk r − 1's), and in backward its gradient back to the chunk that made it.
  void exchange_mf_ends(kernels::Backend<T>& be);
  void return_mf_end_gradient(kernels::Backend<T>& be);
  // The SSM carry restarts at a document start, or at every segment under the ablation.
  const uint8_t* carry_reset(const uint8_t* doc_start) const {
    return ablation_ == CarryAblation::kSegment ? every_stream_starts_.data() : doc_start;
  }

  ParamStore<T>& store_;
  const ModelConfig& cfg_;
  TensorParallel tp_;
  AttnShape shape_;  // this rank's heads
  std::string prefix_;
  int streams_;
  CarryAblation ablation_ = CarryAblation::kNone;  // eval diagnostics only
  std::vector<uint8_t> every_stream_starts_;       // [B] of 1: the segment ablation's resets
  bool mf_;
  int ctx_keys_;       // keys per block: W (SH/MH) or S_ctx (MF)
  int64_t kv_rows_;    // rows of K̂c/Vc: B·N (SH/MH) or B·T·S_ctx (MF)
  ProjectionParams proj_;  // q, k, v, q2 over RMSNorm_attn(X)
  ContextProjParams cproj_;
  int wo_, scale1_, scale2_, rel_bias_, ctx_init_ = -1;
  MlpParams mlp_;
  BstSsm<T> ssm_;

  // Saved activations.
  const T* x_ = nullptr;
  ProjectionActs<T> proj_acts_;
  ContextProjActs<T> cproj_acts_;
  CachedWindowAttention<T> window_;                 // A_self: §3.2 with the carried cache (§8)
  kernels::Buffer<T> a_self_, a_cross_;             // [B·N, A]
  kernels::Buffer<T> probs_cross_;                  // [B·T, H, W, keys]
  kernels::Buffer<T> ctx_blocks_;                   // MF: [B, T, S_ctx, D]
  std::vector<uint8_t> mf_continues_;  // MF, host: [B] block 0 read the carried context
  kernels::Buffer<T> y_;                            // [B·N, D]
  MlpActs<T> mlp_acts_;
  // Backward scratch.
  kernels::Buffer<T> dkc_, dvc_, dscratch_a_;  // [kv_rows, A]
  kernels::Buffer<T> dscratch_h_;              // [G·rows, D] of the context projection
  kernels::Buffer<T> dctx_;                    // gradient w.r.t. the SSM's context()
  kernels::Buffer<T> dctx_blocks_;             // MF: [B, T, S_ctx, D]
  // Carried between segments (model.md §8), with window_'s cache and the SSM's carry.
  kernels::Buffer<T> ctx_last_;  // MF: [B, S_ctx, D]
  // Context parallelism (core/sharding/context_parallel.h): MF's last block end sent [B, S_ctx, D] and the
  // neighbour's received (the previous chunk's; chunk 0: the last chunk's, the carry).
  ContextParallel cp_;
  kernels::Buffer<T> mf_end_, mf_end_in_;
};

}  // namespace brt::core
