// Device helpers shared by the kernels/cuda .cu files: grid sizing, fixed-order warp and block
// reductions (deterministic: the same tree every launch, no atomics), and the deterministic
// two-pass column reduction used for bias / gamma gradients.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/device_arena.h"
#include "kernels/cuda/launch_grid.h"

namespace brt::kernels::cuda {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;

// Butterfly sum: every lane ends with the same bits (each step adds a commuted pair).
template <typename V>
__device__ __forceinline__ V warp_sum(V v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. `shared` holds 32 values. Fixed tree: warp butterflies, then warp 0 over warps.
template <typename V>
__device__ V block_sum(V v, V* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = warp_sum(v);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    V w = lane < warps ? shared[lane] : V(0);
    w = warp_sum(w);
    if (lane == 0) shared[0] = w;
  }
  __syncthreads();
  return shared[0];
}

__device__ inline float block_max(float v, float* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < warps ? shared[lane] : -INFINITY;
    w = warp_max(w);
    if (lane == 0) shared[0] = w;
  }
  __syncthreads();
  return shared[0];
}

// ---- deterministic column reduction: out[j] += finish(j, sum_i term(i, j)) ----------------
// Pass 1 cuts the rows into fixed splits (a function of n alone) and writes one double
// partial per (split, column); pass 2 adds the splits in order. No atomics, so the result
// depends only on (n, D) and the inputs, never on scheduling.
constexpr int kColumnTile = 32;
constexpr int kColumnRowsPerThreadStep = 8;

inline int column_rows_per_split(int n) { return std::max(256, (n + 127) / 128); }

template <typename Term>
__global__ void column_partials_kernel(int n, int D, int rows_per_split, Term term,
                                       double* partial) {
  __shared__ double tile[kColumnRowsPerThreadStep][kColumnTile + 1];
  const int j = blockIdx.x * kColumnTile + threadIdx.x;
  const int split = blockIdx.y;
  const int i0 = split * rows_per_split;
  const int i1 = min(n, i0 + rows_per_split);
  double acc = 0;
  if (j < D) {
    for (int i = i0 + threadIdx.y; i < i1; i += kColumnRowsPerThreadStep) {
      acc += static_cast<double>(term(i, j));
    }
  }
  tile[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < D) {
    double sum = 0;
    for (int r = 0; r < kColumnRowsPerThreadStep; ++r) sum += tile[r][threadIdx.x];
    partial[static_cast<int64_t>(split) * D + j] = sum;
  }
}

template <typename Finish>
__global__ void column_finish_kernel(int D, int splits, const double* partial, float* out,
                                     Finish finish) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < D; j += gridDim.x * blockDim.x) {
    double sum = 0;
    for (int s = 0; s < splits; ++s) sum += partial[static_cast<int64_t>(s) * D + j];
    out[j] += finish(j, sum);
  }
}

struct PlainColumnSum {
  __device__ float operator()(int, double sum) const { return static_cast<float>(sum); }
};

template <typename Term, typename Finish>
void column_reduce_accumulate(int n, int D, Term term, Finish finish, float* out,
                              DeviceArena& scratch, cudaStream_t stream, const char* who) {
  if (n <= 0 || D <= 0) return;
  const int rows_per_split = column_rows_per_split(n);
  const int splits = (n + rows_per_split - 1) / rows_per_split;
  double* partial =
      scratch.allocate_array<double>(static_cast<std::size_t>(splits) * D, who);
  const dim3 grid((D + kColumnTile - 1) / kColumnTile, splits);
  const dim3 block(kColumnTile, kColumnRowsPerThreadStep);
  column_partials_kernel<<<grid, block, 0, stream>>>(n, D, rows_per_split, term, partial);
  BRT_CUDA_CHECK_LAUNCH(who);
  column_finish_kernel<<<elementwise_blocks(D), 256, 0, stream>>>(D, splits, partial, out,
                                                                   finish);
  BRT_CUDA_CHECK_LAUNCH(who);
}

}  // namespace brt::kernels::cuda
