#include "kernels/cuda_optimizer_launches.h"

#include "kernels/cuda/launch_grid.h"
#include "kernels/cuda/optim/adafactor_sums_tiling.h"

namespace brt::kernels {

namespace {

constexpr int64_t kChunkThreads = cuda::kOptimThreads;  // one block per chunk
constexpr double kF = sizeof(float), kD = sizeof(double);

// The launchers' grid-stride loops over n (launch_grid.h).
int64_t grid_stride_threads(int64_t n) { return int64_t(cuda::elementwise_blocks(n, cuda::kOptimThreads)) * kChunkThreads; }

int64_t numel(const OptimTensor<float>& t) { return t.rows() * t.cols(); }

// launch_adafactor_gradient_sums: the tiled pass and its fold, or the per-entry kernels.
void gradient_sums(const OptimTensor<float>& t, std::vector<OptimizerLaunch>& out) {
  const cuda::AdafactorSumsTiling s = cuda::adafactor_sums_tiling(t);
  const double g = kF * double(numel(t));
  if (s.tiled) {
    const int64_t tiles = s.col_tiles * s.groups * s.row_tiles;
    out.push_back({"adafactor_tile_sums", tiles * cuda::AdafactorSumsTiling::kCols, g + kD * double(s.scratch()), true});
    out.push_back({"adafactor_fold_sums",
                   s.fold_blocks() * cuda::AdafactorSumsTiling::kFoldCols * cuda::AdafactorSumsTiling::kFoldLanes,
                   kD * double(s.scratch() + t.f1_size() + t.f2_size()), true});
    return;
  }
  out.push_back({"adafactor_inner_row_sums", grid_stride_threads(t.f1_size()), g + kD * double(t.f1_size()), true});
  out.push_back({"adafactor_col_sums", grid_stride_threads(t.f2_size()), g + kD * double(t.f2_size()), true});
}

// core::TensorParallelStatReducer::reduce_on_device over n statistics (at most: the entries
// partial on this rank, which the counted layouts do not tell apart): gather, all-reduce,
// scatter.
void reduced(const char* what, int64_t n, std::vector<OptimizerLaunch>& out) {
  const double b = kD * double(n) + double(sizeof(int64_t)) * double(n);
  out.push_back({std::string("gather_stats (") + what + ")", grid_stride_threads(n), b + kD * double(n)});
  out.push_back({std::string("TP all-reduce (") + what + ")", 0, kD * double(n), false, false, true});
  out.push_back({std::string("scatter_stats (") + what + ")", grid_stride_threads(n), b + kD * double(n)});
}

// core::DeviceParamTotals::reduce: the chunk partials per parameter, then their reduction.
void param_totals(const char* what, int64_t n_params, int64_t n_chunks, std::vector<OptimizerLaunch>& out) {
  out.push_back({"segment_sums", grid_stride_threads(n_params),
                 kD * double(n_chunks) + double(sizeof(int64_t) + kD) * double(n_params + 1)});
  reduced(what, n_params, out);
}

}  // namespace

std::vector<OptimizerLaunch> cuda_optimizer_step_launches(const std::vector<OptimTensor<float>>& tensors,
                                                          int64_t n_chunks, bool adafactor, bool reducer) {
  int64_t all = 0, factored = 0;
  for (const auto& t : tensors) {
    all += numel(t);
    if (t.factored) factored += numel(t);
  }
  const int64_t chunk_threads = n_chunks * kChunkThreads, plain = all - factored;
  const double partials = kD * double(n_chunks);
  std::vector<OptimizerLaunch> out;
  // core/optim/optimizer.cpp Optimizer::grad_norm and apply: every step reports the norm, made
  // on the device (GradNorm::enqueue; under TP from the reduced per-parameter totals); the host
  // reads back the step's scalars, then writes the next step's.
  const double scalars = sizeof(OptimStepScalars<float>);
  const auto n = int64_t(tensors.size());
  out.push_back({"optim_sum_squares", chunk_threads, kF * double(all) + partials});
  if (reducer) param_totals("gradient squares", n, n_chunks, out);
  out.push_back({"grad_norm_finish", kChunkThreads, (reducer ? kD * double(n) : partials) + scalars});
  out.push_back({"step scalars to the host", 0, scalars, false, true});
  out.push_back({"step scalars to the device", 0, scalars, false, true});
  if (!adafactor) {  // the fused AdamW: g, m, v, w read; m, v, w written
    out.push_back({"adamw_update", chunk_threads, 7 * kF * double(all)});
    return out;
  }
  // core/optim/adafactor.cpp Adafactor::update, phase A: every value read; v read, written, g read.
  out.push_back({"adafactor_second_moment", chunk_threads, kF * double(all) + 3 * kF * double(plain) + 2 * partials});
  for (const auto& t : tensors)
    if (t.factored) gradient_sums(t, out);
  int64_t f1 = 0, f2 = 0, means = 0;
  for (const auto& t : tensors)
    if (t.factored) f1 += t.f1_size(), f2 += t.f2_size(), means += t.n_means();
  if (reducer) {
    param_totals("parameter squares", n, n_chunks, out);
    reduced("row sums", f1, out);
    reduced("column sums", f2, out);
  }
  // Phase B, per factored tensor: accumulators and means, then the rsqrt factors.
  for (const auto& t : tensors) {
    if (!t.factored) continue;
    const double f = double(t.f1_size() + t.f2_size());
    out.push_back({"adafactor_accumulators", grid_stride_threads(t.f1_size() + t.f2_size()), (kD + 2 * kF) * f});
    out.push_back({"adafactor_mean_sums", grid_stride_threads(t.n_means()),
                   kF * double(t.r_is_f1 ? t.f1_size() : t.f2_size()) + kD * double(t.n_means())});
  }
  if (reducer) reduced("mean sums", means, out);
  for (const auto& t : tensors) {
    if (!t.factored) continue;
    out.push_back({"adafactor_factors", grid_stride_threads(t.f1_size() + t.f2_size()),
                   2 * kF * double(t.f1_size() + t.f2_size())});
  }
  out.push_back({"adafactor_factored_update_squares", chunk_threads, kF * double(factored) + partials});
  if (reducer) param_totals("update squares", n, n_chunks, out);
  // One thread per tensor over its chunks' two partials (under TP: over its two totals).
  const double squares = reducer ? 2 * kD * double(n) : 2 * partials;
  out.push_back({"adafactor_coefficients", grid_stride_threads(n), squares + kD * double(2 * n + 1) + kF * double(n)});
  // Phase C: g, m (and v) read; m and the value read and written.
  out.push_back({"adafactor_apply", chunk_threads, 5 * kF * double(all) + kF * double(plain)});
  return out;
}

}  // namespace brt::kernels
