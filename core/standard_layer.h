// The standard layer of MODEL.md §4 (Slide and XL baselines, and every non-recurrent layer of
// BRT): pre-norm sliding-window attention (§3.2) with a residual, then a pre-norm ReLU MLP.
#pragma once

#include <string>
#include <vector>

#include "core/blocks.h"
#include "core/layer.h"
#include "core/model_config.h"
#include "core/param_store.h"

namespace brt::core {

template <typename T>
class StandardLayer : public Layer<T> {
 public:
  // Declares this layer's parameters as layers.{index}.* and allocates its activations and
  // carried cache for `streams` streams of `cfg.seq_len` tokens in `memory` (the backend's).
  // Under tensor parallelism (tp) this rank holds heads [r·H/TP, (r+1)·H/TP) and hidden
  // units [r·F/TP, (r+1)·F/TP) (docs/parallelism.md).
  StandardLayer(ParamStore<T>& store, const ModelConfig& cfg, int index, int streams,
                kernels::Memory& memory, const TensorParallel& tp = {});

  void forward(const StepContext<T>& ctx, const T* x, T* out) override;
  void backward(const StepContext<T>& ctx, const T* dout, T* dx,
                BackwardScratch<T>& scratch) override;
  std::vector<TensorRef<T>> carried_state() override;
  int64_t activation_bytes() const override;

 private:
  ParamStore<T>& store_;
  TensorParallel tp_;
  AttnShape shape_;  // this rank's heads
  kernels::WindowAttnDims dims_;
  std::string prefix_;
  ProjectionParams proj_;  // q, k, v
  int wo_, scale_, rel_bias_;
  MlpParams mlp_;

  // Saved activations (backend memory, like everything below).
  const T* x_ = nullptr;  // the layer's input (owned by the model)
  ProjectionActs<T> proj_acts_;
  kernels::Buffer<T> k_cache_used_, v_cache_used_;  // [B, W, A] the cache block 0 attended to
  kernels::Buffer<T> attn_out_;                     // [B*N, A]
  kernels::Buffer<T> probs_;                        // [B, T, H, W, 2W]
  kernels::Buffer<T> y_;                            // [B*N, D] after the attention residual
  MlpActs<T> mlp_acts_;
  // Carried between segments (MODEL §8): last block's normalised keys and raw values.
  kernels::Buffer<T> k_cache_, v_cache_;  // [B, W, A]
};

// True when no stream of doc_start [B] (host memory) starts a document: the steady state, in
// which the per-stream selections below collapse into one launch for the batch.
bool no_stream_starts(const uint8_t* doc_start, int streams);
// Builds the [B, W, A] cache a segment's block 0 attends to: zeros for streams that start a
// document, else the carried block (MODEL §3.2, §8). Shared by every layer with a cache.
// doc_start is host memory; carried and used are backend memory.
template <typename T>
void prepare_cache(kernels::Backend<T>& be, const uint8_t* doc_start, int streams,
                   int64_t block_elems, const T* carried, T* used);
// y = x + a·W with W [in, D] row-parallel over tp (a: this rank's columns): the partial
// products are all-reduced before the residual x is added (x is replicated; summing it over
// ranks would count it TP times). Backward needs no communication (Megatron's g).
template <typename T>
void add_row_parallel(kernels::Backend<T>& be, const TensorParallel& tp, const T* a, int rows,
                      int in, const T* w, int D, const T* x, T* y);
// Stores each stream's last block of a [B, N, A] activation as the carried cache.
template <typename T>
void carry_last_block(kernels::Backend<T>& be, int streams, int seq, int window, int width,
                      const T* act, T* carried);

}  // namespace brt::core
