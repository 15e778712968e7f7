// The whole language model (MODEL.md §1, §4–§6, §8): embedding, the layer stack, final
// RMSNorm and the tied output with 1/√V, trained with masked cross-entropy. Memory for
// parameters, gradients and activations is planned at construction; a step allocates nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <memory>
#include <vector>

#include "core/layer.h"
#include "core/model_config.h"
#include "core/param_store.h"
#include "core/tensor_parallel.h"
#include "core/vocab_parallel.h"
#include "kernels/backend.h"

namespace brt::core {

// One step's input for the B streams (all [B, N] row-major except doc_start [B]).
struct ModelInput {
  const int32_t* inputs;
  const int32_t* targets;
  const uint8_t* mask;       // 0: padded target, excluded from loss and metrics
  const uint8_t* doc_start;  // 1: this segment starts a document (MODEL §8)
};

struct LossSums {
  double nats = 0.0;  // sum of cross-entropies over unmasked targets
  int64_t count = 0;  // number of unmasked targets
};

struct MemoryReport {
  int64_t parameters = 0, gradients = 0, activations = 0, carried_state = 0;
  int64_t backward_scratch = 0;  // gradient buffers layers own for their backward
};

template <typename T>
class Model {
 public:
  // tp: the tensor-parallel group this replica is split over (default TP = 1). Every rank of
  // the group runs the same streams; each holds its slice of the heads, hidden units and
  // vocabulary (docs/parallelism.md, "Tensor parallelism").
  Model(const ModelConfig& cfg, int streams, kernels::Backend<T>& backend,
        const TensorParallel& tp = {});

  ParamStore<T>& params() { return params_; }
  const ModelConfig& config() const { return cfg_; }
  const TensorParallel& tensor_parallel() const { return tp_; }
  const VocabRange& vocab_range() const { return vocab_; }
  int streams() const { return streams_; }

  // Forward through the whole model. grad_scale multiplies the loss gradient that backward()
  // will propagate: 1 / (number of unmasked targets in the global batch) gives the gradient
  // of the mean loss (MODEL §10b). Updates the carried state for the next segment.
  LossSums forward(const ModelInput& in, T grad_scale);
  // The forward pass up to the logits ([B*N, V], valid until the next forward; targets and
  // mask are not read). Under TP > 1 these are this rank's columns [B*N, V/TP] of the
  // vocabulary range vocab_range(). Updates the carried state like forward(). For generation and scoring.
  const T* forward_logits(const ModelInput& in);
  // Accumulates parameter gradients for the last forward (call params().zero_grads() first
  // unless accumulating).
  void backward();

  // Called during backward() right after layer `i`'s parameter gradients are final (layers
  // run L-1 .. 0; the embedding and final norm report as layer -1 at the very end). Lets a
  // data-parallel caller start reducing a layer's gradients while earlier layers still run.
  // Parameters are declared layer by layer, so layer i's gradients are the contiguous range
  // layer_grad_range(i) of the gradient arena.
  void set_backward_hook(std::function<void(int layer)> hook) { hook_ = std::move(hook); }
  // [begin, end) offsets in the parameter arenas of layer i's parameters.
  std::pair<int64_t, int64_t> layer_grad_range(int i) const { return layer_ranges_[i]; }
  int num_layers() const { return int(layers_.size()); }

  // Per-position losses in nats of the last forward ([B, N], 0 where masked).
  const std::vector<T>& row_losses() const { return row_loss_; }
  // Every stream's carried state: layers.{i}.cache.k|v, recurrent layers.{i}.state.sigma, and for
  // BST layers ssm.carry (s4d, the double state's bytes), ssm.carry_u (unstructured) and
  // ssm.ctx_last (MF) — docs/bst.md.
  std::vector<TensorRef<T>> carried_state();
  // A copy of every stream's carried state, so something else (an evaluation) can run in
  // between and training then continues exactly where it was.
  std::vector<std::vector<T>> snapshot_carried_state();
  void restore_carried_state(const std::vector<std::vector<T>>& snapshot);
  MemoryReport memory_report() const;

 private:
  ModelConfig cfg_;
  int streams_;
  kernels::Backend<T>& be_;
  TensorParallel tp_;
  VocabRange vocab_;  // the embedding rows (tokens) this rank holds
  ParamStore<T> params_;
  int embed_ = -1, final_norm_ = -1;
  std::vector<std::unique_ptr<Layer<T>>> layers_;
  std::vector<std::pair<int64_t, int64_t>> layer_ranges_;
  std::function<void(int)> hook_;

  const ModelInput* input_ = nullptr;
  ModelInput saved_input_{};
  std::vector<std::vector<T>> resid_;  // [L+1][B*N, D]
  std::vector<T> final_h_, final_rstd_;
  std::vector<T> logits_;    // [B*N, V]; holds dlogits after forward
  std::vector<T> row_loss_;  // [B*N]
  VocabParallelCrossEntropy<T> xent_;
  std::vector<uint8_t> doc_start_;
  BackwardScratch<T> scratch_;
  std::vector<T> d_resid_a_, d_resid_b_;
};

}  // namespace brt::core
