// The state side of the recurrent layer (model.md §5.1–§5.3): for each block t, the S state
// vectors attend to themselves and to the block's 2W-token window, and a gate (with an MLP
// for 'dual') produces the next state. Runs sequentially over the T blocks of a segment and
// backpropagates through all of them.
#pragma once

#include <string>
#include <vector>

#include "core/diagnostics.h"
#include "core/layers/gate.h"
#include "core/layers/mlp.h"
#include "core/model_config.h"
#include "core/param_store.h"
#include "core/layers/projections.h"
#include "core/sharding/sequence_parallel.h"

namespace brt::core {

template <typename T>
class RecurrentStateSide {
 public:
  // Under tensor parallelism the state side's heads, its MLP hidden units and the gates' input
  // rows are split like the token side's, and Σ's S rows are split over TP (sequence
  // parallelism): sigma0, Σ_t and d_sigma0 below are this rank's [B, S/TP, D] rows, while keys
  // and values cover all S rows for this rank's heads (docs/parallelism.md).
  // Every buffer below is allocated in `memory` (the backend's) at construction.
  RecurrentStateSide(ParamStore<T>& store, const ModelConfig& cfg, const std::string& prefix,
                     int streams, kernels::Memory& memory, const TensorParallel& tp = {});

  // sigma0: [B, S, D] the state block 0 reads. k_ext, v_ext: [B, W+N, A] the token keys
  // (normalised) and values with the previous segment's last block in front, so block t's
  // 2W-row window starts at row t·W. Saves everything backward needs; Σ_t is sigma(t).
  void forward(kernels::Backend<T>& be, const T* sigma0, const T* k_ext, const T* v_ext);

  // dk_s, dv_s: [T, B, S, A] gradients w.r.t. each block's normalised state keys and values
  // from the token→state attention. Accumulates dk_ext, dv_ext ([B, W+N, A]) and returns in
  // d_sigma0 ([B, S, D], overwritten) the gradient w.r.t. the state block 0 read.
  void backward(kernels::Backend<T>& be, const T* k_ext, const T* v_ext, const T* dk_s,
                const T* dv_s, T* dk_ext, T* dv_ext, T* d_sigma0);

  // The same, block by block (the feedback stack, core/layers/feedback_stack.h, interleaves the
  // other layers' blocks between them); forward() and backward() are exactly these in order.
  // A block's 2W-row window: rows [0, 2W) of stream b start at k_win + b·kv_stride.
  void begin_forward(kernels::Backend<T>& be, const T* sigma0);     // Σ_0
  void forward_keys(kernels::Backend<T>& be, int t);                // keys(t), values(t) of Σ_t
  void forward_update(kernels::Backend<T>& be, int t, const T* k_win, const T* v_win,
                      int64_t kv_stride);                           // Σ_{t+1}
  void begin_backward(kernels::Backend<T>& be);  // no gradient enters Σ_T (detached, §8)
  // From the gradient w.r.t. Σ_{t+1}: through the gate and the attentions' outputs;
  // accumulates the window's dk_win, dv_win (same layout as k_win).
  void backward_update(kernels::Backend<T>& be, int t, const T* k_win, const T* v_win,
                       int64_t kv_stride, T* dk_win, T* dv_win);
  // dk_s_t, dv_s_t: [B·S, A] the tokens' gradient w.r.t. K̂_s, V_s of Σ_t; completes the
  // gradient w.r.t. Σ_t (block t − 1's update reads it next).
  void backward_keys(kernels::Backend<T>& be, int t, const T* dk_s_t, const T* dv_s_t);
  void end_backward(kernels::Backend<T>& be, T* d_sigma0);  // the gradient w.r.t. Σ_0

  const T* sigma(int t) const { return sigma_[t].data(); }  // Σ_t, t in [0, T]
  const T* keys(int t) const { return proj_acts_[t].out[1].data(); }    // K̂_s of Σ_t
  const T* values(int t) const { return proj_acts_[t].out[2].data(); }  // V_s of Σ_t
  int64_t activation_bytes() const;
  int64_t backward_scratch_bytes() const;
  // Eval diagnostics after a forward: the gate values of the streams with active[b] != 0
  // (fixed: σ(b) per channel, once; lstm: f and i of every state entry of every block).
  void accumulate_gate_statistics(kernels::Memory& memory, const uint8_t* active,
                                  LayerDiagnostics& out) const;

 private:
  ParamStore<T>& store_;
  const ModelConfig& cfg_;
  TensorParallel tp_;
  AttnShape shape_;  // this rank's heads
  int streams_;
  int rows_;        // B*S: the rows the projections and attentions work on
  int local_rows_;  // B*S/TP: the rows of Σ this rank holds (= rows_ at TP = 1)
  RowSplit seq_;
  ProjectionParams proj_;  // q, k, v, q2 over RMSNorm_s(Σ) + P
  int scale1_, scale2_, wo_;
  GateParams gate1_, gate2_;
  MlpParams mlp_;  // dual only
  bool dual_;

  using Buffers = std::vector<kernels::Buffer<T>>;
  // Per block t: saved activations (backend memory, like every buffer below).
  Buffers sigma_;                               // [T+1][B*S*D]
  std::vector<ProjectionActs<T>> proj_acts_;    // [T]
  Buffers probs_ss_, probs_se_, a_ss_, a_se_, u1_;
  std::vector<GateActs<T>> gate1_acts_, gate2_acts_;
  Buffers gated_;                               // dual: U_t = Gate1(Σ_t, ...)
  std::vector<MlpActs<T>> mlp_acts_;            // dual
  Buffers u2_;                                  // dual
  // Backward scratch (planned once).
  kernels::Buffer<T> d_next_, d_cur_, du1_, d_gated_, du2_, dzf_, dzi_, d_ass_, d_ase_, dq_,
      dk_, dv_, dq2_, scratch_a_, scratch_d_, scratch_f_, dm_;
  kernels::Buffer<T> zf_, zi_;  // forward scratch (lstm)
  // Sequence parallelism only (empty at TP = 1): gathered rows [B*S, D] and collective
  // staging, in the backend's memory like the rest.
  kernels::Buffer<T> sig_full_, full_a_, full_b_;
  RowSplitScratch<T> seq_scratch_;
  RowSplitScratch<T>* seq_scratch() { return seq_.active() ? &seq_scratch_ : nullptr; }
  // Every row of a [B*S/TP, D] local tensor (gathered into buf under TP; local itself otherwise).
  const T* all_rows(kernels::Backend<T>& be, const T* local, kernels::Buffer<T>& buf);
};

}  // namespace brt::core
