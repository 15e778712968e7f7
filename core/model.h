// The whole language model (model.md §1, §4–§6, §8): embedding, the layer stack, final
// RMSNorm and the tied output with 1/√V, trained with masked cross-entropy. Memory for
// parameters, gradients and activations is planned at construction; a step allocates nothing.
// Every buffer (parameters, gradients, activations, scratch, carried state, logits, the step's
// tokens) lives in the backend's memory (kernels/memory.h; device memory under CUDA) and is
// only handed to kernels; the host reads it through the explicit copies below.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <memory>
#include <vector>

#include "core/sharding/context_parallel.h"
#include "core/layer.h"
#include "core/model_config.h"
#include "core/param_store.h"
#include "core/sharding/tensor_parallel.h"
#include "core/sharding/vocab_parallel.h"
#include "kernels/backend.h"

namespace brt::core {

// One step's input for the B streams (all [B, N] row-major except doc_start [B]; under context
// parallelism [B, N/CP], this rank's chunk, with the segment's doc_start), in HOST memory: the model copies inputs, targets and mask into its own backend buffers each step.
struct ModelInput {
  const int32_t* inputs;
  const int32_t* targets;
  const uint8_t* mask;       // 0: padded target, excluded from loss and metrics
  const uint8_t* doc_start;  // 1: this segment starts a document (model.md §8)
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
  // The TP collectives run on the backend's memory (tp bound to it: a device communicator
  // when tp carries one, else staged through the host; core/sharding/tensor_parallel.h).
  // cp: the context-parallel group (core/sharding/context_parallel.h; default CP = 1). Under CP this
  // rank holds chunk cp.rank() of every segment: ModelInput, logits and row losses are
  // [B, N/CP], the loss sums this chunk's targets, and parameter gradients are this chunk's
  // part (summed over the group by the caller, as over data parallelism).
  Model(const ModelConfig& cfg, int streams, kernels::Backend<T>& backend,
        const TensorParallel& tp = {}, const ContextParallel& cp = {});
  // Releases the weights it bound to the backend (kernels::Backend::weights_fixed).
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  ParamStore<T>& params() { return params_; }
  // The memory every model buffer lives in (the backend's).
  kernels::Memory& memory() { return be_.memory(); }
  const ModelConfig& config() const { return cfg_; }
  const TensorParallel& tensor_parallel() const { return tp_; }
  const ContextParallel& context_parallel() const { return cp_; }
  // Tokens per stream this rank runs each step: model.seq_len, or its chunk N/CP.
  int chunk_len() const { return seq_; }
  const VocabRange& vocab_range() const { return vocab_; }
  int streams() const { return streams_; }

  // Forward through the whole model. grad_scale multiplies the loss gradient that backward()
  // will propagate: 1 / (number of unmasked targets in the global batch) gives the gradient
  // of the mean loss (model.md §10b). Updates the carried state for the next segment.
  LossSums forward(const ModelInput& in, T grad_scale);
  // The forward pass up to the logits ([B*N, V], valid until the next forward; targets and
  // mask are not read). Under TP > 1 these are this rank's columns [B*N, V/TP] of the
  // vocabulary range vocab_range(). Updates the carried state like forward(). For generation and scoring.
  // The pointer is into backend memory (device memory under CUDA): copy rows out with
  // kernels::copy_to_host(memory(), ...), never dereference it on the host.
  const T* forward_logits(const ModelInput& in);
  // The training step as device work alone, for a caller that captures it once and replays
  // it (launch/train/step_graphs.h; the same results as forward() then backward()):
  //  - stage_step copies the step's tokens, targets, mask and what the layers derive from
  //    doc_start into backend memory and returns the unmasked target count;
  //  - stage_loss_scale copies the loss gradient's scale into backend memory (a device scalar,
  //    so one captured step serves every scale);
  //  - device_work enqueues forward, loss and backward and reads and uploads nothing: what it
  //    enqueues depends only on staged_doc_start() and the backward hook (none while captured);
  //    device_step(scale) is stage_loss_scale(scale) then device_work();
  //  - step_nats reads the loss sum of the last step (waits for it) and throws, as forward()
  //    does, when an unmasked target was outside the vocabulary (kernels::bad_target_message).
  // Not under tensor parallelism (its loss statistics are summed on the host); throws there.
  int64_t stage_step(const ModelInput& in);
  void stage_loss_scale(T grad_scale);
  void device_work();
  void device_step(T grad_scale);
  double step_nats();
  // Where device_work leaves the loss sum step_nats reads (backend memory): for work enqueued
  // behind the step that must not run on a non-finite loss (Optimizer::enqueue_step).
  const double* step_nats_device() const { return loss_result_.data(); }
  const std::vector<uint8_t>& staged_doc_start() const { return doc_start_; }
  CarryAblation carry_ablation() const { return ablation_; }
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

  // Per-position losses in nats of the last forward ([B, N], 0 where masked): a host copy.
  std::vector<T> row_losses() const { return row_loss_.to_host(); }
  // Every stream's carried state: layers.{i}.cache.k|v, recurrent layers.{i}.state.sigma, and for
  // BST layers ssm.carry (s4d, the double state's bytes), ssm.carry_u (unstructured) and
  // ssm.ctx_last (MF) — docs/bst.md. The refs point into backend memory (memory()): read and
  // write them with its to_host / from_host / fill_zero.
  std::vector<TensorRef<T>> carried_state();
  // A host copy of every stream's carried state, so something else (an evaluation) can run in
  // between and training then continues exactly where it was.
  std::vector<std::vector<T>> snapshot_carried_state();
  void restore_carried_state(const std::vector<std::vector<T>>& snapshot);
  MemoryReport memory_report() const;

  // Evaluation diagnostics (core/diagnostics.h, docs/evaluation.md). The ablation holds for
  // every forward until set back to kNone; backward() refuses while it is set.
  void set_carry_ablation(CarryAblation a);
  // Whether the ablation changes anything in this model (a layer carries the state it resets).
  bool carry_ablation_applies(CarryAblation a) const;
  // One entry per layer with statistics (recurrent and BST layers; none under TP); after each
  // forward, accumulate_diagnostics adds that segment's. mask: [B*N] host, the targets counted.
  std::vector<LayerDiagnostics> new_layer_diagnostics() const;
  void accumulate_diagnostics(const uint8_t* mask, std::vector<LayerDiagnostics>& stats);

 private:
  ModelConfig cfg_;
  int streams_;
  kernels::Backend<T>& be_;
  TensorParallel tp_;
  ContextParallel cp_;
  ModelConfig layer_cfg_;  // cfg_ with this rank's chunk as model.seq_len (the layers keep a reference)
  int seq_ = 0;            // layer_cfg_.seq_len
  VocabRange vocab_;  // the embedding rows (tokens) this rank holds
  ParamStore<T> params_;
  int embed_ = -1, final_norm_ = -1;
  std::vector<std::unique_ptr<Layer<T>>> layers_;
  std::vector<std::pair<int64_t, int64_t>> layer_ranges_;
  std::function<void(int)> hook_;
  CarryAblation ablation_ = CarryAblation::kNone;

  // Checks the token ids and copies the step's input tokens into inputs_ (backend memory;
  // under TP this rank's local ids, -1 for other ranks' tokens) and doc_start into doc_start_
  // (host); forward() copies targets (local ids under TP) and mask.
  void stage_input(const ModelInput& in);
  // Copies targets (local ids under TP) and mask into backend memory; the unmasked count.
  int64_t stage_targets(const ModelInput& in);
  // The staged step's forward up to the logits; then (not under TP) the loss into
  // loss_result_ with the staged scale.
  const T* run_forward();
  void run_loss();

  bool have_forward_ = false;  // backward() needs a forward() first
  // The step's input in backend memory ([B*N] each); doc_start_ stays on the host (it only
  // selects which streams' carried state is reset).
  kernels::Buffer<int32_t> inputs_, targets_;
  kernels::Buffer<uint8_t> mask_;
  std::vector<uint8_t> doc_start_;  // [B]
  std::vector<int32_t> local_ids_;   // [2, B*N] host: local ids of inputs, targets (TP only)
  std::vector<kernels::Buffer<T>> resid_;  // [L+1][B*N, D]
  kernels::Buffer<T> final_h_, final_rstd_;
  kernels::Buffer<T> logits_;    // [B*N, V]; holds dlogits after forward
  kernels::Buffer<T> row_loss_;  // [B*N]
  // Not under TP: the staged loss gradient scale [1], and the last step's loss sum and first bad
  // target row (-1: none) [2] (Backend::softmax_xent_forward_backward_deferred).
  kernels::Buffer<T> loss_scale_;
  kernels::Buffer<double> loss_result_;
  VocabParallelCrossEntropy<T> xent_;  // TP > 1 only (backend memory)
  BackwardScratch<T> scratch_;
  kernels::Buffer<T> d_resid_a_, d_resid_b_;
};

}  // namespace brt::core
