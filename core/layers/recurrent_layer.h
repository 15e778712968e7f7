// The Block-Recurrent layer of model.md §5: a token side (sliding-window self-attention plus
// cross-attention to the current recurrent state, one 2A→D projection, MLP) and a state side
// (RecurrentStateSide) that carries S state vectors from block to block and from segment to
// segment (§8).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/layers/cached_window_attention.h"
#include "core/layer.h"
#include "core/layers/mlp.h"
#include "core/model_config.h"
#include "core/param_store.h"
#include "core/layers/projections.h"
#include "core/layers/recurrent_state.h"

namespace brt::core {

// The token side's parameters (model.md §5.1, §9): q, k, v, q2 over RMSNorm_e(X), Wo [2A, D],
// the two per-head scales, the T5 bias table and the MLP. The recurrent layer has them, and
// so does every layer of the feedback stack (§5.4).
struct RecurrentTokenParams {
  ProjectionParams proj;
  int wo = -1, scale1 = -1, scale2 = -1, rel_bias = -1;
  MlpParams mlp;
};

// Declares them under `prefix` ("layers.{i}.") in model.md §9's order, sharded over tp.
template <typename T>
RecurrentTokenParams declare_recurrent_token_side(ParamStore<T>& store, const ModelConfig& cfg,
                                                  const std::string& prefix,
                                                  const TensorParallel& tp);

template <typename T>
class RecurrentLayer : public Layer<T> {
 public:
  // Under tensor parallelism (tp) this rank holds heads [r·H/TP, (r+1)·H/TP) of the token
  // side and of the state side, and F/TP hidden units of each MLP (docs/parallelism.md).
  // Activations, scratch and carried state are allocated in `memory` (the backend's).
  RecurrentLayer(ParamStore<T>& store, const ModelConfig& cfg, int index, int streams,
                 kernels::Memory& memory, const TensorParallel& tp = {});

  void forward(const StepContext<T>& ctx, const T* x, T* out) override;
  void backward(const StepContext<T>& ctx, const T* dout, T* dx,
                BackwardScratch<T>& scratch) override;
  std::vector<TensorRef<T>> carried_state() override;
  int64_t activation_bytes() const override;
  int64_t backward_scratch_bytes() const override;
  void set_carry_ablation(CarryAblation a) override { ablation_ = a; }
  bool has_diagnostics() const override { return !tp_.active(); }
  void accumulate_diagnostics(kernels::Backend<T>& be, const uint8_t* mask, T* scratch_a,
                              T* scratch_b, LayerDiagnostics& out) override;

 private:
  ParamStore<T>& store_;
  const ModelConfig& cfg_;
  TensorParallel tp_;
  AttnShape shape_;  // this rank's heads
  std::string prefix_;
  int streams_;
  CarryAblation ablation_ = CarryAblation::kNone;  // eval diagnostics only
  ProjectionParams proj_;  // q, k, v, q2 over RMSNorm_e(X)
  int wo_, scale1_, scale2_, rel_bias_, state_init_;
  MlpParams mlp_;
  RecurrentStateSide<T> state_;

  // Saved activations (backend memory, like everything below).
  const T* x_ = nullptr;
  ProjectionActs<T> proj_acts_;
  CachedWindowAttention<T> window_;   // A_ee: §3.2 with the carried cache (§8)
  kernels::Buffer<T> k_ext_, v_ext_;  // [B, W+N, A]: cache block then the segment
  kernels::Buffer<T> sigma0_;         // [B, S, D] the state block 0 read
  kernels::Buffer<T> a_ee_, a_es_;    // [B*N, A]
  kernels::Buffer<T> probs_es_;       // [T][B, H, W, S]
  kernels::Buffer<T> y_;                            // [B*N, D]
  MlpActs<T> mlp_acts_;
  // Backward scratch.
  kernels::Buffer<T> dk_s_, dv_s_;      // [T, B*S, A]
  kernels::Buffer<T> dk_ext_, dv_ext_;  // [B, W+N, A]
  kernels::Buffer<T> d_sigma0_;         // [B, S, D]
  // Carried between segments (model.md §8), with window_'s cache.
  kernels::Buffer<T> sigma_;  // [B, S, D]
};

}  // namespace brt::core
