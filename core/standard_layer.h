// The standard layer of model.md §4 (Slide and XL baselines, and every non-recurrent layer of
// BRT): pre-norm sliding-window attention (§3.2) with a residual, then a pre-norm ReLU MLP.
#pragma once

#include <string>
#include <vector>

#include "core/layers/cached_window_attention.h"
#include "core/sharding/context_parallel.h"
#include "core/layer.h"
#include "core/layers/mlp.h"
#include "core/model_config.h"
#include "core/param_store.h"
#include "core/layers/projections.h"

namespace brt::core {

template <typename T>
class StandardLayer : public Layer<T> {
 public:
  // Declares this layer's parameters as layers.{index}.* and allocates its activations and
  // carried cache for `streams` streams of `cfg.seq_len` tokens in `memory` (the backend's).
  // Under tensor parallelism (tp) this rank holds heads [r·H/TP, (r+1)·H/TP) and hidden
  // units [r·F/TP, (r+1)·F/TP) (docs/parallelism.md).
  StandardLayer(ParamStore<T>& store, const ModelConfig& cfg, int index, int streams,
                kernels::Memory& memory, const TensorParallel& tp = {},
                const ContextParallel& cp = {});

  void forward(const StepContext<T>& ctx, const T* x, T* out) override;
  void backward(const StepContext<T>& ctx, const T* dout, T* dx,
                BackwardScratch<T>& scratch) override;
  std::vector<TensorRef<T>> carried_state() override;
  int64_t activation_bytes() const override;

 private:
  ParamStore<T>& store_;
  TensorParallel tp_;
  AttnShape shape_;  // this rank's heads
  std::string prefix_;
  ProjectionParams proj_;  // q, k, v
  int wo_, scale_, rel_bias_;
  MlpParams mlp_;

  // Saved activations (backend memory, like everything below).
  const T* x_ = nullptr;  // the layer's input (owned by the model)
  ProjectionActs<T> proj_acts_;
  CachedWindowAttention<T> window_;  // §3.2 with the carried cache (§8)
  kernels::Buffer<T> attn_out_;      // [B*N, A]
  kernels::Buffer<T> y_;             // [B*N, D] after the attention residual
  MlpActs<T> mlp_acts_;
};

}  // namespace brt::core
