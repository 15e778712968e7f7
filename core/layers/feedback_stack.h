// The feedback variant of the Block-Recurrent Transformer (model.md §5.4): every layer's
// tokens cross-attend to the recurrent layer's current state Σ_t, so block t of the lowest
// layer needs the state that block t − 1 of a higher layer produced, and the whole stack runs
// block-major. This class is that stack, as one Layer of the model: the L layers' parameters
// (model.md §9 names), each block's activations, the recurrent layer's state side, and the
// carried caches and state (the same names as rec:*, so checkpoints read alike).
//
// Layout: inside, the residual stream is block-major ([T][B·W, D]), so one block of every
// stream is contiguous and each layer works on B·W rows at a time. Block t's window
// attention [K_{t−1}; K_t] (§3.2) runs as the second block of a two-block segment whose first
// block has zero queries: its output and its gradients to both blocks' keys and values are
// exactly §3.2's, at twice the attention FLOPs, with the kernels every other variant uses.
#pragma once

#include <string>
#include <vector>

#include "core/layers/cached_window_attention.h"
#include "core/layer.h"
#include "core/layers/mlp.h"
#include "core/model_config.h"
#include "core/param_store.h"
#include "core/layers/projections.h"
#include "core/layers/recurrent_layer.h"
#include "core/layers/recurrent_state.h"
#include "core/sharding/tensor_parallel.h"

namespace brt::core {

template <typename T>
class FeedbackStack : public Layer<T> {
 public:
  // Under tensor parallelism every layer's heads and hidden units are split as in the
  // recurrent layer (docs/parallelism.md); the state side as RecurrentStateSide.
  FeedbackStack(ParamStore<T>& store, const ModelConfig& cfg, int streams,
                kernels::Memory& memory, const TensorParallel& tp = {});

  void forward(const StepContext<T>& ctx, const T* x, T* out) override;
  void backward(const StepContext<T>& ctx, const T* dout, T* dx,
                BackwardScratch<T>& scratch) override;
  // layers.{i}.cache.k|v [B, W, A] for every layer, then layers.{r}.state.sigma [B, S, D]
  // after layer r's caches: the order and names of a rec:* model.
  std::vector<TensorRef<T>> carried_state() override;
  int64_t activation_bytes() const override;
  int64_t backward_scratch_bytes() const override;
  void set_carry_ablation(CarryAblation a) override { ablation_ = a; }
  bool has_diagnostics() const override { return !tp_.active(); }
  // The recurrent layer's gates and state share (out.layer is set to its index).
  void accumulate_diagnostics(kernels::Backend<T>& be, const uint8_t* mask, T* scratch_a,
                              T* scratch_b, LayerDiagnostics& out) override;

 private:
  // One layer's token side (model.md §5.2 "vertical", §5.4): q, k, v, q2 over RMSNorm(X), the
  // window attention, the attention to the state's K̂_s, V_s, Wo [2A, D], the MLP.
  struct TokenSide : RecurrentTokenParams {
    std::string prefix;
  };
  // What one layer saves for one block (backend memory, rows B·W).
  struct BlockActs {
    ProjectionActs<T> proj;
    kernels::Buffer<T> q_ext, k_ext, v_ext;  // [B, 2W, A]: block t−1 (q: zero) then block t
    kernels::Buffer<T> a_ext, probs_ext;     // the two-block window attention's output, probs
    kernels::Buffer<T> a_ee, a_es;           // [B·W, A] window and state attention outputs
    kernels::Buffer<T> probs_es;             // [B, H, W, S]
    kernels::Buffer<T> y;                    // [B·W, D] mid-residual
    MlpActs<T> mlp;
  };

  void token_forward(kernels::Backend<T>& be, int layer, int t, int state_block);
  // dout, dx: [B·W, D] for block t (dx written). Adds the gradient w.r.t. the state's
  // K̂_s, V_s into dk_s_, dv_s_ and w.r.t. this layer's keys/values into dk_, dv_.
  void token_backward(kernels::Backend<T>& be, int layer, int t, const T* dout, T* dx,
                      BackwardScratch<T>& scratch);
  // [B, W, ·] block rows ↔ the [B, 2W, ·] two-block layout (half 0 or 1).
  void to_half(kernels::Backend<T>& be, const T* block, int width, int half, T* ext) const;
  void add_half(kernels::Backend<T>& be, const T* ext, int width, int half, T* block) const;

  ParamStore<T>& store_;
  const ModelConfig& cfg_;
  TensorParallel tp_;
  AttnShape shape_;  // this rank's heads
  int streams_;
  int rec_;          // the recurrent layer's index
  std::string rec_prefix_;
  std::vector<TokenSide> layers_;
  int state_init_ = -1;
  RecurrentStateSide<T> state_;
  CarryAblation ablation_ = CarryAblation::kNone;

  std::vector<std::vector<kernels::Buffer<T>>> res_;  // [L+1][T][B·W, D] block-major residuals
  std::vector<std::vector<BlockActs>> acts_;          // [L][T]
  // [L] each layer's carried cache (§8): block −1 of its block 0, and what block T−1 leaves.
  std::vector<CachedWindowAttention<T>> windows_;
  kernels::Buffer<T> zero_cache_;  // [B, W, A] what the two-block segment's first block sees
  kernels::Buffer<T> sigma0_;      // [B, S, D] the state block 0 read
  // Backward.
  std::vector<std::vector<kernels::Buffer<T>>> dk_, dv_;  // [L][T][B·W, A] accumulated
  kernels::Buffer<T> dq_ext_, dk_ext_, dv_ext_, da_ext_;  // [B, 2W, A]
  kernels::Buffer<T> dq_, dq2_, da_ee_, da_es_;           // [B·W, A]
  kernels::Buffer<T> dk_win_, dv_win_;                    // [B, 2W, A] the state's window
  kernels::Buffer<T> dk_s_, dv_s_;                        // [B·S, A] one block's state keys
  kernels::Buffer<T> dres_a_, dres_b_;                    // [B·W, D]
  kernels::Buffer<T> d_sigma0_;                           // [B, S, D]
  std::vector<uint8_t> block_mask_;                       // host [B·W] (diagnostics)
  // Carried between segments (model.md §8), with windows_' caches.
  kernels::Buffer<T> sigma_;  // [B, S, D]
};

}  // namespace brt::core
