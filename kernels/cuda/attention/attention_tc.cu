// Window self-attention (model.md §3.2/§3.3) on the tensor cores, for the bf16 backend
// (docs/gpu.md, "Attention on the tensor cores"). The score and value products of every
// (stream, block, head) run as cuBLAS strided-batched GEMMs with bf16 operands and fp32
// accumulation and output (CUDA_R_16BF × CUDA_R_16BF → CUDA_R_32F, CUBLAS_COMPUTE_32F); the
// mask, T5 bias, scale and softmax are row kernels between them. Layouts, per block t of
// stream b and head h (bt = b·T + t), all in the backend's scratch arena:
//   Qh [bt, h, W, dh] bf16         the block's queries
//   Kw, Vw [bt, h, 2W, dh] bf16    its window [previous block (the cache for t = 0); block t]
//   S  [bt, h, W, 2W] fp32         raw scores <q, k>, kept in `probs` for backward, with the
//                                  row's log-sum-exp in the out-of-band column r + W
//   Pb, dSb [bt, h, W, 2W] bf16    probabilities, scale·dlogits (zero outside the band)
// so each product is ONE batched call over B·T·H problems of W × 2W × dh (uniform strides).
// Query r of a block sees window columns c ∈ [r, r + W) at distance W + r − c ∈ [1, W], the
// same band as the fp32 kernels (attention_core.cuh). Backward: dP = dO·Vwᵀ, then per row
// δ = Σ P·dP, dl = P·(dP − δ) with the bias/scale partials in fixed order, dQ = dSb·Kw,
// dKw = dSbᵀ·Qh, dVw = Pbᵀ·dO, and the window gradients folded back onto the segment rows
// (row r of block t gets its block-t half plus the previous-block half of block t + 1; the
// cache half is dropped: detached, model.md §8). Deterministic: no atomics, fixed reductions,
// cuBLAS on a fixed workspace.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/attention/attention_core.cuh"
#include "kernels/cuda/attention/attention_tc.cuh"
#include "kernels/cuda/launchers.h"

namespace brt::kernels::cuda {

namespace {

struct TcDims {
  int B, N, W, H, dh, T, A;
  __host__ __device__ int64_t problems() const { return int64_t{B} * T * H; }      // GEMM batch
  __host__ __device__ int64_t act() const { return int64_t{B} * N * A; }             // [B, N, A]
  __host__ __device__ int64_t windows() const { return problems() * 2 * W * dh; }   // Kw, Vw
  __host__ __device__ int64_t tiles() const { return problems() * W * 2 * W; }       // S, P, dP
};

TcDims tc_dims(const WindowAttnDims& d) {
  return {d.batch, d.seq, d.window, d.heads, d.head_dim, d.seq / d.window, d.width()};
}

// Element e of a per-block array [bt, h, r, d]: its offset in the [B, N, A] rows,
// [b, t·W + r, h·dh + d].
__device__ inline int64_t row_offset(int64_t e, const TcDims& g) {
  const int d = static_cast<int>(e % g.dh);
  int64_t rest = e / g.dh;
  const int r = static_cast<int>(rest % g.W);
  rest /= g.W;
  const int h = static_cast<int>(rest % g.H);
  const int64_t bt = rest / g.H;
  const int64_t b = bt / g.T, t = bt % g.T;
  return (b * g.N + t * g.W + r) * g.A + int64_t{h} * g.dh + d;
}

// Qh[bt, h, r, d] = q[b, t·W + r, h·dh + d]
__global__ void pack_queries_kernel(const float* x, TcDims g, __nv_bfloat16* out) {
  BRT_GRID_STRIDE(e, g.act()) { out[e] = __float2bfloat16_rn(x[row_offset(e, g)]); }
}

// Kw[bt, h, c, d]: c < W the previous block (the cache at t = 0), c >= W block t.
__global__ void pack_windows_kernel(const float* x, const float* cache, TcDims g,
                                    __nv_bfloat16* out) {
  BRT_GRID_STRIDE(e, g.windows()) {
    const int d = static_cast<int>(e % g.dh);
    int64_t rest = e / g.dh;
    const int c = static_cast<int>(rest % (2 * g.W));
    rest /= 2 * g.W;
    const int h = static_cast<int>(rest % g.H);
    const int64_t bt = rest / g.H;
    const int64_t b = bt / g.T, t = bt % g.T;
    const int64_t row = t * g.W + c - g.W;  // segment row; < 0: cache row c
    const float* src = row >= 0 ? x + (b * g.N + row) * g.A : cache + (b * g.W + c) * g.A;
    out[e] = __float2bfloat16_rn(src[int64_t{h} * g.dh + d]);
  }
}

// out[b, t·W + r, h·dh + d] (=, or += with accumulate) in[bt, h, r, d]
__global__ void unpack_rows_kernel(const float* in, TcDims g, bool accumulate, float* out) {
  BRT_GRID_STRIDE(e, g.act()) {
    float& y = out[row_offset(e, g)];
    y = accumulate ? y + in[e] : in[e];
  }
}

// The same rows into out16 in bf16, each rounded to nearest even as the conversion kernel rounds.
__global__ void unpack_rows_bf16_kernel(const float* in, TcDims g, __nv_bfloat16* out16) {
  BRT_GRID_STRIDE(e, g.act()) { out16[row_offset(e, g)] = __float2bfloat16_rn(in[e]); }
}

// dx[b, t·W + r] (+)= dwin[bt, h, W + r] + dwin[bt + 1, h, r] (t + 1 < T), in that order; with
// dx16 (not null, not accumulating) the sum is written there in bf16 instead, rounded to nearest
// even as the conversion kernel rounds it.
__global__ void fold_windows_kernel(const float* dwin, TcDims g, bool accumulate, float* dx, __nv_bfloat16* dx16) {
  BRT_GRID_STRIDE(e, g.act()) {
    const int64_t row = e / g.A;
    const int col = static_cast<int>(e % g.A);
    const int h = col / g.dh, d = col % g.dh;
    const int64_t b = row / g.N;
    const int i = static_cast<int>(row % g.N), t = i / g.W, r = i % g.W;
    const int64_t bt = b * g.T + t;
    float v = dwin[((bt * g.H + h) * 2 * g.W + g.W + r) * g.dh + d];
    if (t + 1 < g.T) v += dwin[(((bt + 1) * g.H + h) * 2 * g.W + r) * g.dh + d];
    if (dx16 != nullptr) dx16[e] = __float2bfloat16_rn(v);
    else dx[e] = accumulate ? dx[e] + v : v;
  }
}

// One warp per query row, 8 rows (same stream and head) per block, blocks ordered (b, h, tile)
// as the fp32 kernels' (so the bias/scale partials reduce with the same kernel and order).
struct RowCoords {
  int b, h, i, t, r;
  int64_t row;  // [bt, h, r] row of the W × 2W tiles
  __device__ RowCoords(const TcDims& g, int warp) {
    const int tiles = (g.N + kAttnWarps - 1) / kAttnWarps;
    const int tile = blockIdx.x % tiles;
    h = blockIdx.x / tiles % g.H;
    b = blockIdx.x / tiles / g.H;
    i = tile * kAttnWarps + warp;
    t = i / g.W;
    r = i % g.W;
    row = ((int64_t{b} * g.T + t) * g.H + h) * g.W + r;
  }
};

// S (raw scores) → Pb = softmax over the band of (S + bias)·s, and the log-sum-exp stored at
// column r + W of S's row (outside the band, never a score the backward reads).
__global__ void __launch_bounds__(kAttnThreads)
    tc_softmax_forward_kernel(TcDims g, const float* bias_by_distance, const float* scale,
                              float* scores, __nv_bfloat16* pb) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const RowCoords rc(g, warp);
  if (rc.i >= g.N) return;  // whole warp
  const int W = g.W, r = rc.r;
  float* srow = scores + rc.row * 2 * W;
  __nv_bfloat16* prow = pb + rc.row * 2 * W;
  const float* bias = bias_by_distance + int64_t{rc.h} * (W + 1);
  const float s = scale[rc.h];
  float m = -INFINITY;
  for (int c = r + lane; c < r + W; c += kWarp) m = fmaxf(m, (srow[c] + bias[W + r - c]) * s);
  m = warp_max(m);
  float l = 0.0f;
  for (int c = r + lane; c < r + W; c += kWarp) l += expf((srow[c] + bias[W + r - c]) * s - m);
  l = warp_sum(l);
  const float lse = m + logf(l);
  for (int c = lane; c < 2 * W; c += kWarp) {
    const bool band = c >= r && c < r + W;
    prow[c] = __float2bfloat16_rn(band ? expf((srow[c] + bias[W + r - c]) * s - lse) : 0.0f);
  }
  __syncwarp();
  if (lane == 0) srow[r + W] = lse;
}

// P recomputed from S and the stored log-sum-exp; δ = Σ P·dP; dl = P·(dP − δ);
// dSb = bf16(s·dl), Pb = bf16(P); per block the partials of Σ dl by T5 bucket and Σ dl·raw
// (attention_bias_scale_reduce_kernel turns them into drel_bias and dscale).
__global__ void __launch_bounds__(kAttnThreads)
    tc_softmax_backward_kernel(TcDims g, const float* bias_by_distance,
                               const int* bucket_by_distance, const float* scale,
                               const float* scores, const float* dp, __nv_bfloat16* dsb,
                               __nv_bfloat16* pb, double* partials) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const RowCoords rc(g, warp);
  float by_bucket[32];
#pragma unroll
  for (int k = 0; k < 32; ++k) by_bucket[k] = 0.0f;
  double raw_term = 0.0;
  if (rc.i < g.N) {
    const int W = g.W, r = rc.r;
    const float* srow = scores + rc.row * 2 * W;
    const float* dprow = dp + rc.row * 2 * W;
    const float* bias = bias_by_distance + int64_t{rc.h} * (W + 1);
    const float s = scale[rc.h], lse = srow[r + W];
    float delta = 0.0f;
    for (int c = r + lane; c < r + W; c += kWarp)
      delta += expf((srow[c] + bias[W + r - c]) * s - lse) * dprow[c];
    delta = warp_sum(delta);
    for (int c = lane; c < 2 * W; c += kWarp) {
      float p = 0.0f, dl = 0.0f;
      if (c >= r && c < r + W) {
        const float raw = srow[c];
        p = expf((raw + bias[W + r - c]) * s - lse);
        dl = p * (dprow[c] - delta);
        raw_term += static_cast<double>(dl * raw);
        add_to_bucket(by_bucket, bucket_by_distance[W + r - c], dl);
      }
      dsb[rc.row * 2 * W + c] = __float2bfloat16_rn(s * dl);
      pb[rc.row * 2 * W + c] = __float2bfloat16_rn(p);
    }
  }
  write_bias_scale_partials<true>(by_bucket, raw_term, partials);
}

void check_dims(const WindowAttnDims& d, const char* who) {
  if (d.batch <= 0 || d.seq <= 0 || d.window <= 0 || d.heads <= 0 || d.head_dim <= 0 ||
      d.seq % d.window != 0)
    throw std::runtime_error(std::string("kernels/cuda ") + who + ": invalid dims batch=" +
                             std::to_string(d.batch) + " seq=" + std::to_string(d.seq) +
                             " window=" + std::to_string(d.window));
}

int row_blocks(const TcDims& g) { return g.B * g.H * ((g.N + kAttnWarps - 1) / kAttnWarps); }

// The bf16 operands of both passes: Qh and the K, V windows.
// The bf16 operands both passes start from, in scratch: Qh [problems, W, dh] and the key and
// value windows Kw, Vw [problems, 2W, dh].
struct PackedOperands {
  __nv_bfloat16 *qh, *kw, *vw;
};
PackedOperands pack_operands(const TcDims& g, const float* q, const float* k, const float* v,
                             const float* k_cache, const float* v_cache, DeviceArena& scratch,
                             cudaStream_t stream, const char* who) {
  const PackedOperands p{scratch.allocate_array<__nv_bfloat16>(std::size_t(g.act()), who),
                         scratch.allocate_array<__nv_bfloat16>(std::size_t(g.windows()), who),
                         scratch.allocate_array<__nv_bfloat16>(std::size_t(g.windows()), who)};
  pack_queries_kernel<<<elementwise_blocks(g.act()), 256, 0, stream>>>(q, g, p.qh);
  pack_windows_kernel<<<elementwise_blocks(g.windows()), 256, 0, stream>>>(k, k_cache, g, p.kw);
  pack_windows_kernel<<<elementwise_blocks(g.windows()), 256, 0, stream>>>(v, v_cache, g, p.vw);
  BRT_CUDA_CHECK_LAUNCH(who);
  return p;
}

}  // namespace

std::size_t window_attention_tc_scratch_bytes(const WindowAttnDims& d) {
  const TcDims g = tc_dims(d);
  // Backward, the larger: Qh, dOh (bf16), Kw, Vw (bf16), dP (fp32), dSb, Pb (bf16), dQh
  // (fp32), dKw, dVw (fp32), the bias tables and partials; 256 bytes of alignment each.
  const std::size_t bytes = 2 * (2 * g.act()) + 2 * (2 * g.windows()) + 4 * g.tiles() +
                            2 * (2 * g.tiles()) + 4 * g.act() + 2 * (4 * g.windows()) +
                            8 * std::size_t(row_blocks(g)) * kBiasPartials +
                            (std::size_t(g.H) + 1) * (g.W + 1) * 4 + 16 * 256;
  return bytes;
}

void launch_window_attention_forward_tc(const WindowAttnDims& d, const float* q, const float* k,
                                        const float* v, const float* k_cache,
                                        const float* v_cache, const float* rel_bias,
                                        const float* scale, float* out, float* probs,
                                        const T5Buckets& buckets, cublasHandle_t handle,
                                        DeviceArena& scratch, cudaStream_t stream, void* out16) {
  const char* who = "window_attention_forward (tensor cores)";
  check_dims(d, who);
  const TcDims g = tc_dims(d);
  const WindowBiasTables tables = window_bias_tables(d, rel_bias, buckets, scratch, stream, who);
  const auto [qh, kw, vw] = pack_operands(g, q, k, v, k_cache, v_cache, scratch, stream, who);
  auto* pb = scratch.allocate_array<__nv_bfloat16>(std::size_t(g.tiles()), who);
  float* oh = scratch.allocate_array<float>(std::size_t(g.act()), who);
  const int W = g.W, dh = g.dh;
  // S = Qh·Kwᵀ: [W × dh]·[dh × 2W] per problem, into probs.
  batched_gemm(handle, false, true, W, 2 * W, dh, qh, dh, int64_t{W} * dh, kw, dh,
               int64_t{2} * W * dh, 0.0f, probs, 2 * W, int64_t{W} * 2 * W, g.problems());
  tc_softmax_forward_kernel<<<row_blocks(g), kAttnThreads, 0, stream>>>(g, tables.bias, scale,
                                                                        probs, pb);
  BRT_CUDA_CHECK_LAUNCH(who);
  // O = Pb·Vw: [W × 2W]·[2W × dh].
  batched_gemm(handle, false, false, W, dh, 2 * W, pb, 2 * W, int64_t{W} * 2 * W, vw, dh,
               int64_t{2} * W * dh, 0.0f, oh, dh, int64_t{W} * dh, g.problems());
  if (out16 != nullptr)
    unpack_rows_bf16_kernel<<<elementwise_blocks(g.act()), 256, 0, stream>>>(oh, g,
                                                                             static_cast<__nv_bfloat16*>(out16));
  else
    unpack_rows_kernel<<<elementwise_blocks(g.act()), 256, 0, stream>>>(oh, g, false, out);
  BRT_CUDA_CHECK_LAUNCH(who);
}

void launch_window_attention_backward_tc(const WindowAttnDims& d, const float* q, const float* k,
                                         const float* v, const float* k_cache,
                                         const float* v_cache, const float* rel_bias,
                                         const float* scale, const float* probs,
                                         const float* dout, float* dq, float* dk, float* dv,
                                         float* drel_bias, float* dscale, bool accumulate,
                                         const T5Buckets& buckets, cublasHandle_t handle,
                                         DeviceArena& scratch, cudaStream_t stream, void* dv16) {
  const char* who = "window_attention_backward (tensor cores)";
  check_dims(d, who);
  const TcDims g = tc_dims(d);
  const WindowBiasTables tables = window_bias_tables(d, rel_bias, buckets, scratch, stream, who);
  const auto [qh, kw, vw] = pack_operands(g, q, k, v, k_cache, v_cache, scratch, stream, who);
  auto* doh = scratch.allocate_array<__nv_bfloat16>(std::size_t(g.act()), who);
  float* dp = scratch.allocate_array<float>(std::size_t(g.tiles()), who);
  auto* dsb = scratch.allocate_array<__nv_bfloat16>(std::size_t(g.tiles()), who);
  auto* pb = scratch.allocate_array<__nv_bfloat16>(std::size_t(g.tiles()), who);
  float* dqh = scratch.allocate_array<float>(std::size_t(g.act()), who);
  float* dkw = scratch.allocate_array<float>(std::size_t(g.windows()), who);
  float* dvw = scratch.allocate_array<float>(std::size_t(g.windows()), who);
  double* partials =
      scratch.allocate_array<double>(std::size_t(row_blocks(g)) * kBiasPartials, who);
  pack_queries_kernel<<<elementwise_blocks(g.act()), 256, 0, stream>>>(dout, g, doh);
  BRT_CUDA_CHECK_LAUNCH(who);
  const int W = g.W, dh = g.dh;
  const int64_t sq = int64_t{W} * dh, sw = int64_t{2} * W * dh, st = int64_t{W} * 2 * W;
  // dP = dO·Vwᵀ.
  batched_gemm(handle, false, true, W, 2 * W, dh, doh, dh, sq, vw, dh, sw, 0.0f, dp, 2 * W, st,
               g.problems());
  tc_softmax_backward_kernel<<<row_blocks(g), kAttnThreads, 0, stream>>>(
      g, tables.bias, tables.bucket, scale, probs, dp, dsb, pb, partials);
  BRT_CUDA_CHECK_LAUNCH(who);
  attention_bias_scale_reduce_kernel<<<g.H, 256, 0, stream>>>(
      partials, g.B, g.H, (g.N + kAttnWarps - 1) / kAttnWarps, scale, rel_bias, drel_bias, dscale);
  BRT_CUDA_CHECK_LAUNCH(who);
  // dQ = dSb·Kw (dSb carries the scale), accumulated into dq or written.
  batched_gemm(handle, false, false, W, dh, 2 * W, dsb, 2 * W, st, kw, dh, sw, 0.0f, dqh, dh, sq,
               g.problems());
  unpack_rows_kernel<<<elementwise_blocks(g.act()), 256, 0, stream>>>(dqh, g, accumulate, dq);
  // dKw = dSbᵀ·Qh and dVw = Pbᵀ·dO: [2W × W]·[W × dh].
  batched_gemm(handle, true, false, 2 * W, dh, W, dsb, 2 * W, st, qh, dh, sq, 0.0f, dkw, dh, sw,
               g.problems());
  batched_gemm(handle, true, false, 2 * W, dh, W, pb, 2 * W, st, doh, dh, sq, 0.0f, dvw, dh, sw,
               g.problems());
  fold_windows_kernel<<<elementwise_blocks(g.act()), 256, 0, stream>>>(dkw, g, accumulate, dk, nullptr);
  fold_windows_kernel<<<elementwise_blocks(g.act()), 256, 0, stream>>>(dvw, g, accumulate && dv16 == nullptr, dv,
                                                                       static_cast<__nv_bfloat16*>(dv16));
  BRT_CUDA_CHECK_LAUNCH(who);
}

}  // namespace brt::kernels::cuda
