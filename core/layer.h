// What every layer of the stack offers the model: a readable forward/backward pair over the
// residual stream, plus the per-stream state it carries between segments (model.md §8).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/diagnostics.h"
#include "core/param.h"
#include "kernels/backend.h"

namespace brt::core {

// Everything a layer needs to run one step, passed explicitly (no globals).
template <typename T>
struct StepContext {
  kernels::Backend<T>& backend;
  int streams;               // B
  int seq;                   // N
  // [B], HOST memory: 1 where this segment starts a document (model.md §8). It only decides
  // which streams' caches/states are reset (by kernels on backend memory), so it stays host.
  const uint8_t* doc_start;
};

// True when no stream of doc_start [B] (host memory) starts a document: the steady state, in
// which the per-stream selections of carried or reset state collapse into one launch.
inline bool no_stream_starts(const uint8_t* doc_start, int streams) {
  for (int b = 0; b < streams; ++b)
    if (doc_start[b]) return false;
  return true;
}

// A named view of a tensor the model owns (carried state, for checkpoints and tests). `data`
// points into the backend's memory (device memory under CUDA): read and write it through
// that Memory's to_host / from_host / fill_zero, never directly.
// `shape` is what this process holds; under tensor parallelism `shard` says which dimension
// is this rank's part of a larger tensor (e.g. the caches' head columns).
template <typename T>
struct TensorRef {
  std::string name;
  std::vector<int64_t> shape;
  T* data;
  ShardSpec shard = {};
};

// Gradient buffers shared by all layers during backward: sized once by the model for the
// largest layer (in the backend's memory), so backward allocates nothing.
template <typename T>
struct BackwardScratch {
  kernels::Buffer<T> d_model;    // [B*N, D]: gradient w.r.t. a layer's mid-residual y
  kernels::Buffer<T> d_ff;       // [B*N, F]: the MLP hidden gradient
  kernels::Buffer<T> d_attn[6];  // [B*N, A] each: attention outputs, q, k, v, ...
  kernels::Buffer<T> d_norm;     // [B*N, D]: gradient w.r.t. a normalised input
  // rows = B*N; D, F and A as this rank holds them (F/TP, A/TP under tensor parallelism).
  void allocate(kernels::Memory& memory, int64_t rows, int64_t D, int64_t F, int64_t A) {
    d_model.allocate(memory, size_t(rows * D), "backward scratch d_model");
    d_norm.allocate(memory, size_t(rows * D), "backward scratch d_norm");
    d_ff.allocate(memory, size_t(rows * F), "backward scratch d_ff");
    for (auto& b : d_attn) b.allocate(memory, size_t(rows * A), "backward scratch d_attn");
  }
  int64_t elems() const {
    int64_t n = int64_t(d_model.size() + d_norm.size() + d_ff.size());
    for (const auto& b : d_attn) n += int64_t(b.size());
    return n;
  }
};

template <typename T>
class Layer {
 public:
  virtual ~Layer() = default;
  // x: [B*N, D] the layer's input; out: [B*N, D] its output. Saves what backward needs and
  // updates the carried state for the next segment (detached).
  virtual void forward(const StepContext<T>& ctx, const T* x, T* out) = 0;
  // dout: gradient w.r.t. out; dx: gradient w.r.t. x, WRITTEN (whatever it held before: the
  // model fills nothing). Parameter gradients are accumulated into the parameter store.
  virtual void backward(const StepContext<T>& ctx, const T* dout, T* dx,
                        BackwardScratch<T>& scratch) = 0;
  // Before a step's device work (Model::stage_step): copies into backend memory what the
  // layer derives on the host from doc_start, so that forward() and backward() only enqueue
  // kernels and a captured step (launch/train/step_graphs.h) can replay them. Most layers have
  // nothing to copy; forward() still copies what was not staged.
  virtual void stage(const uint8_t* /*doc_start*/) {}
  // Carried per-stream state (caches, recurrent state), for checkpoints and tests.
  virtual std::vector<TensorRef<T>> carried_state() = 0;
  // Bytes of activation memory this layer planned (for the memory report).
  virtual int64_t activation_bytes() const = 0;
  // Bytes of gradient scratch the layer owns for its backward (beyond the model's shared
  // BackwardScratch).
  virtual int64_t backward_scratch_bytes() const { return 0; }

  // Evaluation diagnostics (core/diagnostics.h). A layer that carries no state (standard
  // layers) ignores the ablation and has no statistics.
  virtual void set_carry_ablation(CarryAblation) {}
  // False when this layer has nothing to report (or cannot, e.g. under tensor parallelism).
  virtual bool has_diagnostics() const { return false; }
  // After a forward: adds this segment's statistics. mask: [B*N] host, the predicted targets;
  // scratch_a, scratch_b: [B*N, D] backend memory the layer may overwrite.
  virtual void accumulate_diagnostics(kernels::Backend<T>&, const uint8_t* /*mask*/,
                                      T* /*scratch_a*/, T* /*scratch_b*/, LayerDiagnostics&) {}
};

}  // namespace brt::core
