// Global L2-norm gradient clipping (model.md §10c): the norm over all parameters' gradients,
// computed in double in a fixed order (see optim_stats.h), and the factor that brings it down
// to `clip_norm`. The squares are summed by the optimizer kernels where the gradients live
// (host or device memory); only the per-chunk partials come to the host.
#pragma once

#include <memory>
#include <vector>

#include "core/optim/optim_stats.h"
#include "core/param_store.h"
#include "kernels/optimizer_kernels.h"

namespace brt::core {

// min(1, clip_norm / norm); 1 when clipping is off (clip_norm <= 0) or the norm is not finite
// (so a NaN gradient shows up in the loss and norm instead of being hidden by a zero scale).
double clip_scale(double norm, double clip_norm);

template <typename T>
class GradNorm {
 public:
  // Plans the chunks and the partial-sum buffers for `store` now; compute() allocates nothing.
  // `kernels` (null: the CPU kernels, which need a store in host memory) must outlive this.
  explicit GradNorm(const ParamStore<T>& store, StatReducer* reducer = nullptr,
                    kernels::OptimizerKernels<T>* kernels = nullptr);
  // sqrt(sum over all parameters of g^2). With a reducer the per-parameter sums are reduced
  // (kGradSquares) before they are added, in parameter order. `store` must be the one given
  // at construction.
  double compute(const ParamStore<T>& store);
  // The norm, its clip scale (clip_norm, as clip_scale) and whether it (and *loss_sum, when
  // given: the step's loss sum in the store's memory) is finite, made where the gradients live
  // and written into `step` (in the store's memory: kernels::OptimizerKernels::
  // grad_norm_finish); nothing comes to the host. The same norm as compute(), bit for bit
  // (under a reducer, as far as its device sum equals its host one). Throws std::logic_error
  // under a reducer that sums on the host only (StatReducer::reduces_on_device).
  void enqueue(const ParamStore<T>& store, double clip_norm, kernels::OptimStepScalars<T>* step,
               const double* loss_sum = nullptr);
  void set_reducer(StatReducer* reducer) { reducer_ = reducer; }
  kernels::OptimizerKernels<T>& kernels() { return *kernels_; }

 private:
  const ParamStore<T>* store_;
  std::unique_ptr<kernels::OptimizerKernels<T>> owned_kernels_;
  kernels::OptimizerKernels<T>* kernels_;
  ChunkTable table_;
  kernels::Buffer<kernels::OptimChunk> chunks_;      // table_ in the kernels' memory
  kernels::Buffer<kernels::OptimTensor<T>> tensors_;  // every parameter's gradient
  kernels::Buffer<double> partial_dev_;
  kernels::Buffer<int64_t> first_chunk_dev_;  // table_.first_chunks() in the kernels' memory
  DeviceParamTotals totals_;                  // a device reducer's per-parameter sums
  std::vector<double> partial_;
  std::vector<double> per_param_;
  StatReducer* reducer_ = nullptr;
};

// Computes the global norm, scales every gradient by clip_scale(norm, clip_norm) in place, and
// returns the norm before clipping. For callers outside an Optimizer (which folds the scale into
// its update instead).
template <typename T>
double clip_gradients(ParamStore<T>& store, GradNorm<T>& norm, double clip_norm);

}  // namespace brt::core
