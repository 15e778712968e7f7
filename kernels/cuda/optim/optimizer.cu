// The optimizer kernels (model.md §10c) on the GPU: AdamW, the gradient sum of squares, and
// Adafactor's second moments, factors, update squares and update (kernels/optimizer_kernels.h).
//
// Determinism: no atomics. A chunk-list kernel runs one block per chunk and sums it with the
// fixed block tree of device_common.cuh in double. A matrix's row and column sums of G come
// from one tiled pass and a fold in a fixed order (adafactor_sums_tiling.h); other layouts' sums
// and the means give one thread per output entry, adding its inputs serially in index order.
// Every sum is in double in a fixed order; they agree with the CPU's to rounding.
// fp32 element math with double accumulations, as on the CPU (nvcc may contract a*b+c to an
// FMA, hence rounding-level differences from the CPU).
#include <stdexcept>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/optim/optimizer_launchers.h"

namespace brt::kernels::cuda {

namespace {

inline int chunk_blocks(int64_t n_chunks) { return static_cast<int>(n_chunks); }

__global__ void optim_sum_squares_kernel(int use_grad, const OptimChunk* chunks,
                                         const OptimTensor<float>* tensors, double* partial) {
  __shared__ double shared[kWarp];
  const OptimChunk ch = chunks[blockIdx.x];
  const OptimTensor<float>& t = tensors[ch.tensor];
  const float* x = use_grad ? t.grad : t.value;
  double acc = 0.0;
  for (int64_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    const double xi = x[i];
    acc += xi * xi;
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// One block: thread p sums parameter p's chunk partials in chunk order (into the first one),
// then thread 0 the parameters in order: core::GradNorm::compute's order, bit for bit.
__global__ void grad_norm_finish_kernel(int32_t n_params, const int64_t* first_chunk, double* partial,
                                        double clip_norm, const double* loss_sum, OptimStepScalars<float>* step) {
  for (int32_t p = threadIdx.x; p < n_params; p += blockDim.x) {
    double s = 0.0;
    for (int64_t c = first_chunk[p]; c < first_chunk[p + 1]; ++c) s += partial[c];
    if (first_chunk[p] < first_chunk[p + 1]) partial[first_chunk[p]] = s;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  double total = 0.0;
  for (int32_t p = 0; p < n_params; ++p) total += first_chunk[p] < first_chunk[p + 1] ? partial[first_chunk[p]] : 0.0;
  const double norm = sqrt(total);
  step->grad_norm = norm;
  step->grad_scale = static_cast<float>(optim_clip_scale(norm, clip_norm));
  const bool finite = norm - norm == 0.0 && (loss_sum == nullptr || *loss_sum - *loss_sum == 0.0);
  step->skip = finite ? 0 : 1;
}

// One thread per segment, adding its partials in order from 0.0 (ChunkTable::sum_per_param).
__global__ void segment_sums_kernel(int32_t n_segments, const int64_t* first, const double* partial, double* sums) {
  for (int32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < n_segments; p += gridDim.x * blockDim.x) {
    double s = 0.0;
    for (int64_t c = first[p]; c < first[p + 1]; ++c) s += partial[c];
    sums[p] = s;
  }
}

// to[k] = from[index[k]] (gather) or to[index[k]] = from[k] (scatter): moves, no arithmetic.
__global__ void move_stats_kernel(int64_t n, const int64_t* index, const double* from, double* to, int scatter) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < n; k += int64_t{gridDim.x} * blockDim.x) {
    if (scatter)
      to[index[k]] = from[k];
    else
      to[k] = from[index[k]];
  }
}

__global__ void optim_scale_kernel(float* x, int64_t n, float s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] *= s;
  }
}

__global__ void adamw_kernel(AdamWStep<float> s, const OptimStepScalars<float>* step, const OptimChunk* chunks,
                             const OptimTensor<float>* tensors) {
  if (step->skip) return;
  const float gs = step->grad_scale, lr = step->lr_t;
  const float inv_bc1 = step->inv_bias_correction1, inv_bc2 = step->inv_bias_correction2;
  const OptimChunk ch = chunks[blockIdx.x];
  const OptimTensor<float>& t = tensors[ch.tensor];
  const float wd = t.decay ? s.weight_decay : 0.0f;
  float* w = t.value;
  const float* g = t.grad;
  float* m = t.m;
  float* v = t.v;
  for (int64_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    const float gi = g[i] * gs;
    const float mi = s.beta1 * m[i] + s.one_minus_beta1 * gi;
    const float vi = s.beta2 * v[i] + s.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float step_dir =
        (mi * inv_bc1) / (sqrtf(vi * inv_bc2) + s.eps) + wd * w[i];
    w[i] -= lr * step_dir;
  }
}

__global__ void adafactor_second_moment_kernel(const OptimChunk* chunks,
                                               const OptimTensor<float>* tensors,
                                               const OptimStepScalars<float>* step, float eps,
                                               double* param_squares, double* update_squares) {
  __shared__ double shared[kWarp];
  if (step->skip) return;  // the whole block
  const float gs = step->grad_scale, keep = step->keep_t, rho = step->rho_t;
  const OptimChunk ch = chunks[blockIdx.x];
  const OptimTensor<float>& t = tensors[ch.tensor];
  double psq = 0.0;
  for (int64_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    const double wi = t.value[i];
    psq += wi * wi;
  }
  psq = block_sum(psq, shared);
  if (threadIdx.x == 0) param_squares[blockIdx.x] = psq;
  if (t.factored) return;  // the whole block: factored chunks' y is another kernel's
  const float* g = t.grad;
  float* v = t.v;
  double acc = 0.0;
  for (int64_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    const float gi = g[i] * gs;
    const float vi = keep * v[i] + rho * (gi * gi + eps);
    v[i] = vi;
    const float y = gi / sqrtf(vi);
    acc += static_cast<double>(y) * y;
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) update_squares[blockIdx.x] = acc;
}

// One tile of a matrix's G = (g*gs)^2 + eps (adafactor_sums_tiling.h), read once: each thread
// sums its column down the tile's rows serially, then each warp sums its rows across the tile
// (lanes strided, a fixed butterfly). One block per tile, column tiles fastest.
__global__ void adafactor_tile_sums_kernel(const float* g, AdafactorSumsTiling s,
                                           const OptimStepScalars<float>* step, float eps, double* row_part,
                                           double* col_part) {
  if (step->skip) return;  // the whole block
  const float gs = step->grad_scale;
  constexpr int R = AdafactorSumsTiling::kRows, C = AdafactorSumsTiling::kCols;
  __shared__ float tile[R][C + 1];
  const int64_t ct = blockIdx.x % s.col_tiles, gy = blockIdx.x / s.col_tiles;
  const int64_t group = gy / s.row_tiles, rt = gy % s.row_tiles;
  const int64_t r0 = group * s.n1 + rt * R;
  const int nr = static_cast<int>(s.n1 - rt * R < R ? s.n1 - rt * R : R);
  const int c = threadIdx.x;
  const int64_t col = ct * C + c;
  const bool in = col < s.cols;
  double acc = 0.0;
  for (int r = 0; r < R; ++r) {
    float v = 0.0f;
    if (r < nr && in) {
      const float gi = g[(r0 + r) * s.cols + col] * gs;
      v = gi * gi + eps;
      acc += static_cast<double>(v);
    }
    tile[r][c] = v;
  }
  if (in) col_part[rt * s.groups * s.cols + group * s.cols + col] = acc;
  __syncthreads();
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (int r = warp; r < nr; r += C / kWarp) {  // warp-uniform: every lane shuffles
    double x = 0.0;
    for (int k = lane; k < C; k += kWarp) x += static_cast<double>(tile[r][k]);  // 0 past the last column
    x = warp_sum(x);
    if (lane == 0) row_part[ct * s.rows + r0 + r] = x;
  }
}

// Each row sum adds its column tiles' partials, each column sum its row tiles': a block of
// kFoldCols entries x kFoldLanes lanes, each lane adding every kFoldLanes-th partial in order,
// then lane 0 the lanes in order. Row sums take the first fold_row_blocks() blocks.
__global__ void adafactor_fold_sums_kernel(AdafactorSumsTiling s, const OptimStepScalars<float>* step,
                                           const double* row_part, const double* col_part, double* row_sums,
                                           double* col_sums) {
  if (step->skip) return;  // the whole block
  constexpr int C = AdafactorSumsTiling::kFoldCols, L = AdafactorSumsTiling::kFoldLanes;
  __shared__ double lanes[L][C + 1];
  const bool rows = blockIdx.x < s.fold_row_blocks();
  const int64_t width = rows ? s.rows : s.groups * s.cols, count = rows ? s.col_tiles : s.row_tiles;
  const double* part = rows ? row_part : col_part;
  const int64_t j = (rows ? blockIdx.x : blockIdx.x - s.fold_row_blocks()) * C + threadIdx.x;
  double acc = 0.0;
  if (j < width)
    for (int64_t i = threadIdx.y; i < count; i += L) acc += part[i * width + j];
  lanes[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || j >= width) return;
  double sum = 0.0;
  for (int l = 0; l < L; ++l) sum += lanes[l][threadIdx.x];
  (rows ? row_sums : col_sums)[j] = sum;
}

// General F1 entries (row, j = q1*P2 + q2): one thread each, a serial sum over n2.
__global__ void adafactor_inner_row_sums_kernel(OptimTensor<float> t, const OptimStepScalars<float>* step, float eps,
                                                double* row_sums) {
  if (step->skip) return;
  const float gs = step->grad_scale;
  const int64_t inner = t.p1 * t.p2, cols = t.p1 * t.n2 * t.p2, n2p2 = t.n2 * t.p2;
  const int64_t total = t.p0 * t.n1 * inner;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = e / inner, j = e % inner;
    const float* base = t.grad + row * cols + (j / t.p2) * n2p2 + j % t.p2;
    double acc = 0.0;
    for (int64_t i2 = 0; i2 < t.n2; ++i2) {
      const float gi = base[i2 * t.p2] * gs;
      acc += static_cast<double>(gi * gi + eps);
    }
    row_sums[e] = acc;
  }
}

// F2 entries (group q0, column): one thread each walks the n1 rows (coalesced across threads).
__global__ void adafactor_col_sums_kernel(OptimTensor<float> t, const OptimStepScalars<float>* step, float eps,
                                          double* col_sums) {
  if (step->skip) return;
  const float gs = step->grad_scale;
  const int64_t cols = t.p1 * t.n2 * t.p2;
  const int64_t total = t.p0 * cols;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t group = e / cols, col = e % cols;
    const float* base = t.grad + group * t.n1 * cols + col;
    double acc = 0.0;
    for (int64_t i1 = 0; i1 < t.n1; ++i1) {
      const float gi = base[i1 * cols] * gs;
      acc += static_cast<double>(gi * gi + eps);
    }
    col_sums[e] = acc;
  }
}

__global__ void adafactor_accumulators_kernel(OptimTensor<float> t, const OptimStepScalars<float>* step,
                                              const double* s1, const double* s2) {
  if (step->skip) return;
  const double rho = step->rho;
  const int64_t f1_size = t.p0 * t.n1 * t.p1 * t.p2;
  const int64_t f2_size = t.p0 * t.p1 * t.n2 * t.p2;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < f1_size + f2_size;
       e += int64_t{gridDim.x} * blockDim.x) {
    if (e < f1_size) {
      t.f1[e] = static_cast<float>((1.0 - rho) * t.f1[e] +
                                   rho * (s1[e] / static_cast<double>(t.n2_total)));
    } else {
      const int64_t k = e - f1_size;
      t.f2[k] = static_cast<float>((1.0 - rho) * t.f2[k] +
                                   rho * (s2[k] / static_cast<double>(t.n1_total)));
    }
  }
}

// Sums of R along its normalised axis: one thread per (q0, q1, q2), serial in index order.
__global__ void adafactor_mean_sums_kernel(OptimTensor<float> t, const OptimStepScalars<float>* step, double* means) {
  if (step->skip) return;
  const int64_t n_means = t.p0 * t.p1 * t.p2;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < n_means;
       o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t q2 = o % t.p2, q1 = (o / t.p2) % t.p1, q0 = o / (t.p2 * t.p1);
    means[o] = adafactor_r_axis_sum(t, q0, q1, q2);
  }
}

// C^-1/2 over C's array, then (R / mean(R))^-1/2 over R's (model.md §10c; the reference's
// row_factor / col_factor).
__global__ void adafactor_factors_kernel(OptimTensor<float> t, const double* means) {
  const int64_t f1_size = t.p0 * t.n1 * t.p1 * t.p2;
  const int64_t f2_size = t.p0 * t.p1 * t.n2 * t.p2;
  const float* c = t.r_is_f1 ? t.f2 : t.f1;
  float* c_fac = t.r_is_f1 ? t.fac2 : t.fac1;
  const float* r = t.r_is_f1 ? t.f1 : t.f2;
  float* r_fac = t.r_is_f1 ? t.fac1 : t.fac2;
  const int64_t c_size = t.r_is_f1 ? f2_size : f1_size;
  const int64_t r_size = t.r_is_f1 ? f1_size : f2_size;
  const double n_norm = static_cast<double>(t.r_is_f1 ? t.n1_total : t.n2_total);
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < c_size + r_size;
       e += int64_t{gridDim.x} * blockDim.x) {
    if (e < c_size) {
      c_fac[e] = static_cast<float>(1.0 / sqrt(static_cast<double>(c[e])));
      continue;
    }
    const int64_t k = e - c_size;
    const int64_t q2 = k % t.p2;
    int64_t q1, q0;
    if (t.r_is_f1) {  // k = ((q0*n1 + i1)*p1 + q1)*p2 + q2
      q1 = (k / t.p2) % t.p1;
      q0 = k / (t.p2 * t.p1 * t.n1);
    } else {  // k = ((q0*p1 + q1)*n2 + i2)*p2 + q2
      q1 = (k / (t.p2 * t.n2)) % t.p1;
      q0 = k / (t.p2 * t.n2 * t.p1);
    }
    const double mean = means[(q0 * t.p1 + q1) * t.p2 + q2] / n_norm;
    r_fac[k] = static_cast<float>(1.0 / sqrt(r[k] / mean));
  }
}

// y = g * grad_scale * fac1 * fac2 at element i of a factored tensor.
__device__ __forceinline__ float factored_y(const OptimTensor<float>& t, int64_t i, float gs) {
  const int64_t cols = t.p1 * t.n2 * t.p2;
  const int64_t row = i / cols, col = i - row * cols;
  const int64_t inner = t.p1 * t.p2;
  const float f1 = inner == 1 ? t.fac1[row]
                              : t.fac1[row * inner + (col / (t.n2 * t.p2)) * t.p2 + col % t.p2];
  const float f2 = t.fac2[(row / t.n1) * cols + col];
  return t.grad[i] * gs * f1 * f2;
}

__global__ void adafactor_factored_squares_kernel(const OptimChunk* chunks,
                                                  const OptimTensor<float>* tensors,
                                                  const OptimStepScalars<float>* step, double* update_squares) {
  __shared__ double shared[kWarp];
  if (step->skip) return;  // the whole block
  const float gs = step->grad_scale;
  const OptimChunk ch = chunks[blockIdx.x];
  const OptimTensor<float>& t = tensors[ch.tensor];
  if (!t.factored) return;  // the whole block
  double acc = 0.0;
  for (int64_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    const float y = factored_y(t, i, gs);
    acc += static_cast<double>(y) * y;
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) update_squares[blockIdx.x] = acc;
}

// One thread per tensor: its chunks' partials in chunk order, then the coefficient in double,
// exactly as core computes it on the host.
__global__ void adafactor_coefficients_kernel(int32_t n_tensors, const int64_t* first_chunk, const int64_t* rms_count,
                                              const double* param_squares, const double* update_squares,
                                              AdafactorScalars s, const OptimStepScalars<float>* step,
                                              float* coef) {
  if (step->skip) return;
  const double lr = step->lr;
  for (int32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < n_tensors; p += gridDim.x * blockDim.x) {
    double psq = 0.0, ysq = 0.0;
    for (int64_t c = first_chunk[p]; c < first_chunk[p + 1]; ++c) {
      psq += param_squares[c];
      ysq += update_squares[c];
    }
    coef[p] = static_cast<float>(adafactor_coefficient(s, lr, psq, ysq, static_cast<double>(rms_count[p])));
  }
}

__global__ void adafactor_apply_kernel(const OptimChunk* chunks, const OptimTensor<float>* tensors,
                                       const float* coefs, const OptimStepScalars<float>* step, float beta1,
                                       float one_minus_beta1) {
  if (step->skip) return;
  const float gs = step->grad_scale;
  const OptimChunk ch = chunks[blockIdx.x];
  const OptimTensor<float>& t = tensors[ch.tensor];
  const float coef = coefs[ch.tensor];
  for (int64_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    const float y = t.factored ? factored_y(t, i, gs) : (t.grad[i] * gs) / sqrtf(t.v[i]);
    const float mi = beta1 * t.m[i] + one_minus_beta1 * (coef * y);
    t.m[i] = mi;
    t.value[i] -= mi;
  }
}

}  // namespace

void launch_optim_sum_squares(OptimField field, const OptimChunk* chunks, int64_t n_chunks,
                              const OptimTensor<float>* tensors, double* partial,
                              cudaStream_t stream) {
  if (n_chunks <= 0) return;
  const int use_grad = field == OptimField::kGrad ? 1 : 0;
  optim_sum_squares_kernel<<<chunk_blocks(n_chunks), kOptimThreads, 0, stream>>>(use_grad, chunks, tensors, partial);
  BRT_CUDA_CHECK_LAUNCH("optim_sum_squares");
}

void launch_grad_norm_finish(int32_t n_params, const int64_t* first_chunk, double* partial, double clip_norm,
                             const double* loss_sum, OptimStepScalars<float>* step, cudaStream_t stream) {
  grad_norm_finish_kernel<<<1, kOptimThreads, 0, stream>>>(n_params, first_chunk, partial, clip_norm, loss_sum, step);
  BRT_CUDA_CHECK_LAUNCH("grad_norm_finish");
}

void launch_segment_sums(int32_t n_segments, const int64_t* first, const double* partial, double* sums,
                         cudaStream_t stream) {
  if (n_segments <= 0) return;
  segment_sums_kernel<<<elementwise_blocks(n_segments), kOptimThreads, 0, stream>>>(n_segments, first, partial, sums);
  BRT_CUDA_CHECK_LAUNCH("segment_sums");
}

void launch_move_stats(int64_t n, const int64_t* index, const double* from, double* to, bool scatter,
                       cudaStream_t stream) {
  if (n <= 0) return;
  move_stats_kernel<<<elementwise_blocks(n), kOptimThreads, 0, stream>>>(n, index, from, to, scatter ? 1 : 0);
  BRT_CUDA_CHECK_LAUNCH(scatter ? "scatter_stats" : "gather_stats");
}

void launch_optim_scale(float* x, int64_t n, float s, cudaStream_t stream) {
  if (n <= 0) return;
  optim_scale_kernel<<<elementwise_blocks(n), kOptimThreads, 0, stream>>>(x, n, s);
  BRT_CUDA_CHECK_LAUNCH("optim_scale");
}

void launch_adamw_update(const AdamWStep<float>& constants, const OptimStepScalars<float>* step,
                         const OptimChunk* chunks, int64_t n_chunks, const OptimTensor<float>* tensors,
                         cudaStream_t stream) {
  if (n_chunks <= 0) return;
  adamw_kernel<<<chunk_blocks(n_chunks), kOptimThreads, 0, stream>>>(constants, step, chunks, tensors);
  BRT_CUDA_CHECK_LAUNCH("adamw_update");
}

void launch_adafactor_second_moment(const OptimChunk* chunks, int64_t n_chunks,
                                    const OptimTensor<float>* tensors, const OptimStepScalars<float>* step,
                                    float eps, double* param_squares, double* update_squares,
                                    cudaStream_t stream) {
  if (n_chunks <= 0) return;
  adafactor_second_moment_kernel<<<chunk_blocks(n_chunks), kOptimThreads, 0, stream>>>(chunks, tensors, step, eps, param_squares, update_squares);
  BRT_CUDA_CHECK_LAUNCH("adafactor_second_moment");
}

void launch_adafactor_gradient_sums(const OptimTensor<float>& t, const OptimStepScalars<float>* step, float eps,
                                    double* row_sums, double* col_sums, double* scratch, cudaStream_t stream) {
  const int64_t rows = t.p0 * t.n1, cols = t.p1 * t.n2 * t.p2, inner = t.p1 * t.p2;
  if (rows <= 0 || cols <= 0) return;
  const AdafactorSumsTiling tiling = adafactor_sums_tiling(t);
  if (tiling.tiled) {
    const int64_t tiles = tiling.col_tiles * tiling.groups * tiling.row_tiles;
    if (tiles > 0x7fffffff) throw std::runtime_error("adafactor_gradient_sums: too many tiles for one grid");
    double* row_part = scratch;
    double* col_part = scratch + tiling.row_partials();
    adafactor_tile_sums_kernel<<<static_cast<int>(tiles), AdafactorSumsTiling::kCols, 0, stream>>>(
        t.grad, tiling, step, eps, row_part, col_part);
    BRT_CUDA_CHECK_LAUNCH("adafactor_gradient_sums (tiles)");
    const dim3 fold_block(AdafactorSumsTiling::kFoldCols, AdafactorSumsTiling::kFoldLanes);
    adafactor_fold_sums_kernel<<<static_cast<int>(tiling.fold_blocks()), fold_block, 0, stream>>>(
        tiling, step, row_part, col_part, row_sums, col_sums);
    BRT_CUDA_CHECK_LAUNCH("adafactor_gradient_sums (fold)");
    return;
  }
  adafactor_inner_row_sums_kernel<<<elementwise_blocks(rows * inner), kOptimThreads, 0, stream>>>(t, step, eps, row_sums);
  BRT_CUDA_CHECK_LAUNCH("adafactor_gradient_sums (rows)");
  adafactor_col_sums_kernel<<<elementwise_blocks(t.p0 * cols), kOptimThreads, 0, stream>>>(t, step, eps, col_sums);
  BRT_CUDA_CHECK_LAUNCH("adafactor_gradient_sums (columns)");
}

void launch_adafactor_update_factors(const OptimTensor<float>& t, const OptimStepScalars<float>* step,
                                     const double* row_sums, const double* col_sums,
                                     double* mean_sums, cudaStream_t stream) {
  const int64_t total = t.p0 * t.n1 * t.p1 * t.p2 + t.p0 * t.p1 * t.n2 * t.p2;
  if (total <= 0) return;
  adafactor_accumulators_kernel<<<elementwise_blocks(total), kOptimThreads, 0, stream>>>(t, step, row_sums, col_sums);
  BRT_CUDA_CHECK_LAUNCH("adafactor_update_factors (accumulators)");
  adafactor_mean_sums_kernel<<<elementwise_blocks(t.p0 * t.p1 * t.p2), kOptimThreads, 0, stream>>>(t, step, mean_sums);
  BRT_CUDA_CHECK_LAUNCH("adafactor_update_factors (means)");
}

void launch_adafactor_compute_factors(const OptimTensor<float>& t, const double* mean_sums,
                                      cudaStream_t stream) {
  const int64_t total = t.p0 * t.n1 * t.p1 * t.p2 + t.p0 * t.p1 * t.n2 * t.p2;
  if (total <= 0) return;
  adafactor_factors_kernel<<<elementwise_blocks(total), kOptimThreads, 0, stream>>>(t, mean_sums);
  BRT_CUDA_CHECK_LAUNCH("adafactor_compute_factors");
}

void launch_adafactor_factored_update_squares(const OptimChunk* chunks, int64_t n_chunks,
                                              const OptimTensor<float>* tensors,
                                              const OptimStepScalars<float>* step, double* update_squares,
                                              cudaStream_t stream) {
  if (n_chunks <= 0) return;
  adafactor_factored_squares_kernel<<<chunk_blocks(n_chunks), kOptimThreads, 0, stream>>>(chunks, tensors, step, update_squares);
  BRT_CUDA_CHECK_LAUNCH("adafactor_factored_update_squares");
}

void launch_adafactor_coefficients(int32_t n_tensors, const int64_t* first_chunk, const int64_t* rms_count,
                                   const double* param_squares, const double* update_squares,
                                   const AdafactorScalars& scalars, const OptimStepScalars<float>* step, float* coef,
                                   cudaStream_t stream) {
  if (n_tensors <= 0) return;
  adafactor_coefficients_kernel<<<elementwise_blocks(n_tensors), kOptimThreads, 0, stream>>>(
      n_tensors, first_chunk, rms_count, param_squares, update_squares, scalars, step, coef);
  BRT_CUDA_CHECK_LAUNCH("adafactor_coefficients");
}

void launch_adafactor_apply(const OptimChunk* chunks, int64_t n_chunks,
                            const OptimTensor<float>* tensors, const float* coef,
                            const OptimStepScalars<float>* step, float beta1, float one_minus_beta1,
                            cudaStream_t stream) {
  if (n_chunks <= 0) return;
  adafactor_apply_kernel<<<chunk_blocks(n_chunks), kOptimThreads, 0, stream>>>(chunks, tensors, coef, step, beta1, one_minus_beta1);
  BRT_CUDA_CHECK_LAUNCH("adafactor_apply");
}

}  // namespace brt::kernels::cuda
