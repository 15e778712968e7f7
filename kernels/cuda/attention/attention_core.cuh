// The fused attention kernels shared by the window self-attention (model.md §3.2/§3.3) and the
// cross-attention (model.md §3.4), written once over a geometry type (window_attention.cu,
// cross_attention.cu) that says which keys a query row sees, where rows live, and the bias.
//
// Design (docs/gpu.md): one warp per query row (forward, dQ) or per key row (dK/dV), 8 warps
// per block, all in fp32 on the CUDA cores. Scores are never written to global memory: the
// forward keeps an online softmax and stores only the row's log-sum-exp (in the `probs`
// buffer the interface provides); the backward recomputes P from it. Three backward passes
// keep every write row-owned (no atomics): delta = <dO, O> per query row (O recomputed), dQ
// with per-block partials of the bias/scale gradients, and dK/dV owned by key rows. Lane j of a
// warp scores key (or query) c0 + j with a dot product over dh; the output/gradient rows are
// spread over lanes (dims lane, lane+32, ...), so dh <= 32 * kMaxDimsPerLane.
#pragma once

#include "kernels/cuda/device_common.cuh"

namespace brt::kernels::cuda {

constexpr int kAttnWarps = 8;
constexpr int kAttnThreads = kAttnWarps * kWarp;
// Two blocks per SM in __launch_bounds__: ptxas then may use up to 128 registers a thread.
// Without a minimum, CUDA 13's ptxas held the cross-attention instantiations to 48 registers
// and spilled (8-byte stack frames); tests/kernels' ptxas check keeps every attention kernel
// free of stack frames.
constexpr int kAttnMinBlocks = 2;
constexpr int kMaxDimsPerLane = 8;
constexpr int kMaxHeadDim = kWarp * kMaxDimsPerLane;
constexpr int kBiasPartials = 32 + 1;  // T5 buckets (model.md §3.3), then the scale's raw term

struct AttnInputs {
  const float* q;
  const float* k;
  const float* v;
  const float* k_cache;  // window only
  const float* v_cache;
  const float* scale;    // [H]
  const float* dout;     // backward only
  bool accumulate = true;  // backward: dq, dk, dv += the gradients (false: written)
};

__device__ __forceinline__ float row_dot(const float* shared_row, const float* global_row,
                                         int dh) {
  float acc = 0.0f;
  for (int d = 0; d < dh; ++d) acc += shared_row[d] * global_row[d];
  return acc;
}

// Forward (kDelta = false): out row and its log-sum-exp. kDelta = true: recompute O with the
// stored log-sum-exp and write delta = <dO, O> (first backward pass).
template <typename Geo, bool kDelta>
__global__ void __launch_bounds__(kAttnThreads, kAttnMinBlocks)
    attention_rows_kernel(Geo geo, AttnInputs in, float* out, float* lse_out,
                          const float* lse_in, float* delta) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int dh = geo.dh;
  const int tiles = (geo.queries + kAttnWarps - 1) / kAttnWarps;
  const int tile = blockIdx.x % tiles;
  const int h = blockIdx.x / tiles % geo.H;
  const int b = blockIdx.x / tiles / geo.H;
  const int i = tile * kAttnWarps + warp;
  if (i >= geo.queries) return;  // whole warp; no block-level barrier below
  float* qs = smem + warp * 2 * dh;
  float* dos = qs + dh;
  const int64_t qoff = geo.q_off(b, i) + int64_t{h} * dh;
  for (int d = lane; d < dh; d += kWarp) qs[d] = in.q[qoff + d];
  if (kDelta) {
    for (int d = lane; d < dh; d += kWarp) dos[d] = in.dout[qoff + d];
  }
  __syncwarp();
  const float s = in.scale[h];
  const int lo = geo.key_lo(i), hi = geo.key_hi(i);
  const int64_t lse_at = geo.lse_index(b, h, i);
  float m = -INFINITY, l = 0.0f;
  const float stored_lse = kDelta ? lse_in[lse_at] : 0.0f;
  float acc[kMaxDimsPerLane];
#pragma unroll
  for (int r = 0; r < kMaxDimsPerLane; ++r) acc[r] = 0.0f;

  for (int c0 = lo; c0 < hi; c0 += kWarp) {
    const int kv = c0 + lane;
    const bool valid = kv < hi;
    float logit = -INFINITY;
    if (valid) {
      const float raw = row_dot(qs, geo.key_row(in, b, h, kv), dh);
      logit = (raw + geo.bias(h, i, kv)) * s;
    }
    float p;
    if (kDelta) {
      p = valid ? expf(logit - stored_lse) : 0.0f;
    } else {
      const float new_m = fmaxf(m, warp_max(logit));
      p = valid ? expf(logit - new_m) : 0.0f;
      const float correction = expf(m - new_m);  // 0 on the first chunk (m = -inf)
      l = l * correction + warp_sum(p);
#pragma unroll
      for (int r = 0; r < kMaxDimsPerLane; ++r) acc[r] *= correction;
      m = new_m;
    }
    const int live = min(kWarp, hi - c0);
    for (int j = 0; j < live; ++j) {
      const float pj = __shfl_sync(kFullMask, p, j);
      const float* vrow = geo.value_row(in, b, h, c0 + j);
#pragma unroll
      for (int r = 0; r < kMaxDimsPerLane; ++r) {
        const int d = lane + r * kWarp;
        if (d < dh) acc[r] += pj * vrow[d];
      }
    }
  }
  if (kDelta) {
    float dot = 0.0f;
#pragma unroll
    for (int r = 0; r < kMaxDimsPerLane; ++r) {
      const int d = lane + r * kWarp;
      if (d < dh) dot += dos[d] * acc[r];
    }
    dot = warp_sum(dot);
    if (lane == 0) delta[geo.row_index(b, h, i)] = dot;
  } else {
    const float inv = 1.0f / l;
#pragma unroll
    for (int r = 0; r < kMaxDimsPerLane; ++r) {
      const int d = lane + r * kWarp;
      if (d < dh) out[qoff + d] = acc[r] * inv;
    }
    if (lane == 0) lse_out[lse_at] = m + logf(l);
  }
}

// by_bucket[bucket] += value with compile-time indices only, so the 32 sums stay in registers: a
// run-time index puts the array in local memory (a 128-byte stack frame per thread, spilled
// through L1 on every key). tests/kernels' ptxas check asserts no attention kernel has a stack
// frame. Adding 0 to the other buckets leaves them bit-identical.
__device__ __forceinline__ void add_to_bucket(float (&by_bucket)[32], int bucket, float value) {
#pragma unroll
  for (int r = 0; r < 32; ++r) by_bucket[r] += r == bucket ? value : 0.0f;
}

// The per-block partials of the bias and scale gradients that
// attention_bias_scale_reduce_kernel sums: each lane's sums by T5 bucket (kHasBias) and of
// dl·raw, reduced over the warp (fixed butterflies), then over the block's warps in warp
// order, into partials[blockIdx.x]. Every thread of the block calls it.
template <bool kHasBias>
__device__ void write_bias_scale_partials(const float* by_bucket, double raw_term,
                                          double* partials) {
  __shared__ double warp_partials[kAttnWarps][kBiasPartials];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  double mine = 0.0;
  if (kHasBias) {
#pragma unroll
    for (int r = 0; r < 32; ++r) {
      const double total = warp_sum(static_cast<double>(by_bucket[r]));
      if (lane == r) mine = total;
    }
  }
  raw_term = warp_sum(raw_term);
  warp_partials[warp][lane] = mine;
  if (lane == 0) warp_partials[warp][32] = raw_term;
  __syncthreads();
  if (threadIdx.x < kBiasPartials) {
    double sum = 0.0;
    for (int w = 0; w < kAttnWarps; ++w) sum += warp_partials[w][threadIdx.x];
    partials[static_cast<int64_t>(blockIdx.x) * kBiasPartials + threadIdx.x] = sum;
  }
}

// Second backward pass: dQ += s * dl . K per query row, and per-block partials of the bias
// gradient (by T5 bucket) and of the scale's raw term sum dl * raw. dl = P * (dP - delta).
template <typename Geo>
__global__ void __launch_bounds__(kAttnThreads, kAttnMinBlocks)
    attention_dq_kernel(Geo geo, AttnInputs in, const float* lse_store, const float* delta,
                        float* dq, double* partials) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int dh = geo.dh;
  const int tiles = (geo.queries + kAttnWarps - 1) / kAttnWarps;
  const int tile = blockIdx.x % tiles;
  const int h = blockIdx.x / tiles % geo.H;
  const int b = blockIdx.x / tiles / geo.H;
  const int i = tile * kAttnWarps + warp;
  float by_bucket[32];
#pragma unroll
  for (int r = 0; r < 32; ++r) by_bucket[r] = 0.0f;
  double raw_term = 0.0;  // sum dl * raw: a cancelling sum, kept in double
  if (i < geo.queries) {
    float* qs = smem + warp * 2 * dh;
    float* dos = qs + dh;
    const int64_t qoff = geo.q_off(b, i) + int64_t{h} * dh;
    for (int d = lane; d < dh; d += kWarp) {
      qs[d] = in.q[qoff + d];
      dos[d] = in.dout[qoff + d];
    }
    __syncwarp();
    const float s = in.scale[h];
    const float row_lse = lse_store[geo.lse_index(b, h, i)];
    const float row_delta = delta[geo.row_index(b, h, i)];
    const int lo = geo.key_lo(i), hi = geo.key_hi(i);
    float gq[kMaxDimsPerLane];
#pragma unroll
    for (int r = 0; r < kMaxDimsPerLane; ++r) gq[r] = 0.0f;
    for (int c0 = lo; c0 < hi; c0 += kWarp) {
      const int kv = c0 + lane;
      float dl = 0.0f;
      if (kv < hi) {
        const float raw = row_dot(qs, geo.key_row(in, b, h, kv), dh);
        const float p = expf((raw + geo.bias(h, i, kv)) * s - row_lse);
        const float dp = row_dot(dos, geo.value_row(in, b, h, kv), dh);
        dl = p * (dp - row_delta);
        raw_term += static_cast<double>(dl * raw);
        if (Geo::kHasBias) add_to_bucket(by_bucket, geo.bucket(i, kv), dl);
      }
      const int live = min(kWarp, hi - c0);
      for (int j = 0; j < live; ++j) {
        const float dlj = __shfl_sync(kFullMask, dl, j);
        const float* krow = geo.key_row(in, b, h, c0 + j);
#pragma unroll
        for (int r = 0; r < kMaxDimsPerLane; ++r) {
          const int d = lane + r * kWarp;
          if (d < dh) gq[r] += dlj * krow[d];
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kMaxDimsPerLane; ++r) {
      const int d = lane + r * kWarp;
      if (d < dh) dq[qoff + d] = in.accumulate ? dq[qoff + d] + s * gq[r] : s * gq[r];
    }
  }
  write_bias_scale_partials<Geo::kHasBias>(by_bucket, raw_term, partials);
}

// Per head: drel_bias[h, c] += s * sum(bucket c), dscale[h] += raw + sum_c bucket_c * R[h, c].
// Blocks of head h are summed in index order (b outer, tile inner): deterministic.
__global__ void attention_bias_scale_reduce_kernel(const double* partials, int batch, int H,
                                                   int tiles, const float* scale,
                                                   const float* rel_bias, float* drel_bias,
                                                   float* dscale);

// Third backward pass: dK, dV owned by key rows (warp per key row); each owned key walks the
// queries that see it, in order, over the batch entries that share it.
template <typename Geo>
__global__ void __launch_bounds__(kAttnThreads, kAttnMinBlocks)
    attention_dkdv_kernel(Geo geo, AttnInputs in, const float* lse_store, const float* delta,
                          float* dk, float* dv) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int dh = geo.dh;
  const int owners = geo.owned_keys();
  const int tiles = (owners + kAttnWarps - 1) / kAttnWarps;
  const int tile = blockIdx.x % tiles;
  const int h = blockIdx.x / tiles % geo.H;
  const int group = blockIdx.x / tiles / geo.H;
  const int owned = tile * kAttnWarps + warp;
  if (owned >= owners) return;
  const int kv = geo.owned_key(owned);
  float* ks = smem + warp * 2 * dh;
  float* vs = ks + dh;
  const float* krow = geo.key_row(in, group, h, kv);
  const float* vrow = geo.value_row(in, group, h, kv);
  for (int d = lane; d < dh; d += kWarp) {
    ks[d] = krow[d];
    vs[d] = vrow[d];
  }
  __syncwarp();
  const float s = in.scale[h];
  float gk[kMaxDimsPerLane], gv[kMaxDimsPerLane];
#pragma unroll
  for (int r = 0; r < kMaxDimsPerLane; ++r) gk[r] = gv[r] = 0.0f;
  const int b_end = geo.owner_batch_end(group);
  for (int b = geo.owner_batch_begin(group); b < b_end; ++b) {
    const int lo = geo.query_lo(kv), hi = geo.query_hi(kv);
    for (int c0 = lo; c0 < hi; c0 += kWarp) {
      const int i = c0 + lane;
      float p = 0.0f, dl = 0.0f;
      if (i < hi) {
        const int64_t qoff = geo.q_off(b, i) + int64_t{h} * dh;
        const float raw = row_dot(ks, in.q + qoff, dh);
        p = expf((raw + geo.bias(h, i, kv)) * s - lse_store[geo.lse_index(b, h, i)]);
        const float dp = row_dot(vs, in.dout + qoff, dh);
        dl = p * (dp - delta[geo.row_index(b, h, i)]);
      }
      const int live = min(kWarp, hi - c0);
      for (int j = 0; j < live; ++j) {
        const float pj = __shfl_sync(kFullMask, p, j);
        const float dlj = __shfl_sync(kFullMask, dl, j);
        const int64_t qoff = geo.q_off(b, c0 + j) + int64_t{h} * dh;
#pragma unroll
        for (int r = 0; r < kMaxDimsPerLane; ++r) {
          const int d = lane + r * kWarp;
          if (d < dh) {
            gv[r] += pj * in.dout[qoff + d];
            gk[r] += dlj * in.q[qoff + d];
          }
        }
      }
    }
  }
  const int64_t koff = geo.owned_key_off(group, kv) + int64_t{h} * dh;
#pragma unroll
  for (int r = 0; r < kMaxDimsPerLane; ++r) {
    const int d = lane + r * kWarp;
    if (d < dh) {
      dk[koff + d] = in.accumulate ? dk[koff + d] + s * gk[r] : s * gk[r];
      dv[koff + d] = in.accumulate ? dv[koff + d] + gv[r] : gv[r];
    }
  }
}

inline std::size_t attention_shared_bytes(int dh) {
  return static_cast<std::size_t>(kAttnWarps) * 2 * dh * sizeof(float);
}

}  // namespace brt::kernels::cuda
