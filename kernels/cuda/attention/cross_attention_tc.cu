// Cross-attention (model.md §3.4: the recurrent state's reads, §5.2; BST's context attention,
// §7.2) on the tensor cores, for the bf16 backend (docs/gpu.md, "Attention on the tensor
// cores"): the window path's design (attention_tc.cu) over dense, optionally causal tiles.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/attention/attention_core.cuh"
#include "kernels/cuda/attention/attention_tc.cuh"
#include "kernels/cuda/launchers.h"

namespace brt::kernels::cuda {

// Problems p = h·batch + b (head outer; the private probs layout is [H, batch, nq, nk], the
// same size as the interface's [batch, H, nq, nk]): Qh [H, batch, nq, dh], Kh, Vh
// [H, kb, nk, dh] (kb = 1 when the batch shares K and V, kv_stride 0), S = raw scores in probs.
// Shared K/V: the score-side products run per head over the batch with a K/V stride of 0, and
// dK, dV of head h are ONE product over all batch·nq query rows (the batch sum inside the
// GEMM's reduction). Backward recomputes each row's log-sum-exp from S (every column may be
// in use, so there is no spare slot to keep it).

namespace {

struct CrossTc {
  int batch, nq, nk, H, dh, A, kb;
  int64_t q_stride, kv_stride;
  bool causal;
  __host__ __device__ int64_t queries() const { return int64_t{H} * batch * nq * dh; }
  __host__ __device__ int64_t keys() const { return int64_t{H} * kb * nk * dh; }
  __host__ __device__ int64_t tiles() const { return int64_t{H} * batch * nq * nk; }
  __host__ __device__ int live(int i) const { return causal ? min(i + 1, nk) : nk; }
};

// Qh[h, b, i, d] = x[b·q_stride + i·A + h·dh + d]; with accumulate/unpack the reverse.
__global__ void cross_pack_rows_kernel(const float* x, CrossTc g, int rows, int groups,
                                       int64_t stride, __nv_bfloat16* out) {
  const int64_t total = int64_t{g.H} * groups * rows * g.dh;
  BRT_GRID_STRIDE(e, total) {
    const int d = static_cast<int>(e % g.dh);
    int64_t rest = e / g.dh;
    const int i = static_cast<int>(rest % rows);
    rest /= rows;
    const int64_t b = rest % groups, h = rest / groups;
    out[e] = __float2bfloat16_rn(x[b * stride + int64_t{i} * g.A + h * g.dh + d]);
  }
}

__global__ void cross_unpack_rows_kernel(const float* in, CrossTc g, int rows, int groups,
                                         int64_t stride, bool accumulate, float* out) {
  const int64_t total = int64_t{g.H} * groups * rows * g.dh;
  BRT_GRID_STRIDE(e, total) {
    const int d = static_cast<int>(e % g.dh);
    int64_t rest = e / g.dh;
    const int i = static_cast<int>(rest % rows);
    rest /= rows;
    const int64_t b = rest % groups, h = rest / groups;
    float& y = out[b * stride + int64_t{i} * g.A + h * g.dh + d];
    y = accumulate ? y + in[e] : in[e];
  }
}

// Blocks (b, h, tile of 8 query rows), the fp32 kernels' order, so the scale partials reduce
// with attention_bias_scale_reduce_kernel.
struct CrossRow {
  int b, h, i;
  int64_t row;  // [h, b, i] row of the nq × nk tiles
  __device__ CrossRow(const CrossTc& g, int warp) {
    const int tiles = (g.nq + kAttnWarps - 1) / kAttnWarps;
    const int tile = blockIdx.x % tiles;
    h = blockIdx.x / tiles % g.H;
    b = blockIdx.x / tiles / g.H;
    i = tile * kAttnWarps + warp;
    row = (int64_t{h} * g.batch + b) * g.nq + i;
  }
};

// The row's max and log-sum-exp of raw·s over its live keys (warp-wide, fixed order).
__device__ float cross_row_lse(const float* srow, int live, float s, int lane) {
  float m = -INFINITY;
  for (int j = lane; j < live; j += kWarp) m = fmaxf(m, srow[j] * s);
  m = warp_max(m);
  float l = 0.0f;
  for (int j = lane; j < live; j += kWarp) l += expf(srow[j] * s - m);
  return m + logf(warp_sum(l));
}

__global__ void __launch_bounds__(kAttnThreads)
    cross_softmax_forward_kernel(CrossTc g, const float* scale, const float* scores,
                                 __nv_bfloat16* pb) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const CrossRow rc(g, warp);
  if (rc.i >= g.nq) return;
  const float* srow = scores + rc.row * g.nk;
  const float s = scale[rc.h];
  const int live = g.live(rc.i);
  const float lse = cross_row_lse(srow, live, s, lane);
  for (int j = lane; j < g.nk; j += kWarp)
    pb[rc.row * g.nk + j] = __float2bfloat16_rn(j < live ? expf(srow[j] * s - lse) : 0.0f);
}

__global__ void __launch_bounds__(kAttnThreads)
    cross_softmax_backward_kernel(CrossTc g, const float* scale, const float* scores,
                                  const float* dp, __nv_bfloat16* dsb, __nv_bfloat16* pb,
                                  double* partials) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const CrossRow rc(g, warp);
  double raw_term = 0.0;
  if (rc.i < g.nq) {
    const float* srow = scores + rc.row * g.nk;
    const float* dprow = dp + rc.row * g.nk;
    const float s = scale[rc.h];
    const int live = g.live(rc.i);
    const float lse = cross_row_lse(srow, live, s, lane);
    float delta = 0.0f;
    for (int j = lane; j < live; j += kWarp) delta += expf(srow[j] * s - lse) * dprow[j];
    delta = warp_sum(delta);
    for (int j = lane; j < g.nk; j += kWarp) {
      float p = 0.0f, dl = 0.0f;
      if (j < live) {
        p = expf(srow[j] * s - lse);
        dl = p * (dprow[j] - delta);
        raw_term += static_cast<double>(dl * srow[j]);
      }
      dsb[rc.row * g.nk + j] = __float2bfloat16_rn(s * dl);
      pb[rc.row * g.nk + j] = __float2bfloat16_rn(p);
    }
  }
  write_bias_scale_partials<false>(nullptr, raw_term, partials);
}

CrossTc cross_tc(const CrossAttnDims& d, const char* who) {
  const int64_t A = d.width();
  const bool ok = d.batch > 0 && d.queries > 0 && d.keys > 0 && d.heads > 0 && d.head_dim > 0 &&
                  (d.batch == 1 || d.q_stride >= d.queries * A) &&
                  (d.batch == 1 || d.kv_stride == 0 || d.kv_stride >= d.keys * A);
  if (!ok)
    throw std::runtime_error(std::string("kernels/cuda ") + who + ": invalid dims batch=" +
                             std::to_string(d.batch) + " queries=" + std::to_string(d.queries) +
                             " keys=" + std::to_string(d.keys) + " q_stride=" +
                             std::to_string(d.q_stride) + " kv_stride=" + std::to_string(d.kv_stride));
  const bool shared = d.kv_stride == 0 && d.batch > 1;
  return {d.batch, d.queries, d.keys, d.heads, d.head_dim, d.width(), shared ? 1 : d.batch,
          d.q_stride, d.kv_stride, d.causal};
}

// The bf16 operands of both passes: Qh, Kh, Vh.
// The bf16 operands both passes start from, in scratch: Qh [H·batch, nq, dh], Kh, Vh
// [H·kb, nk, dh].
struct CrossOperands {
  __nv_bfloat16 *qh, *kh, *vh;
};
CrossOperands cross_pack_operands(const CrossTc& g, const float* q, const float* k, const float* v,
                                  DeviceArena& scratch, cudaStream_t stream, const char* who) {
  const CrossOperands p{scratch.allocate_array<__nv_bfloat16>(std::size_t(g.queries()), who),
                        scratch.allocate_array<__nv_bfloat16>(std::size_t(g.keys()), who),
                        scratch.allocate_array<__nv_bfloat16>(std::size_t(g.keys()), who)};
  cross_pack_rows_kernel<<<elementwise_blocks(g.queries()), 256, 0, stream>>>(q, g, g.nq, g.batch, g.q_stride, p.qh);
  cross_pack_rows_kernel<<<elementwise_blocks(g.keys()), 256, 0, stream>>>(k, g, g.nk, g.kb, g.kv_stride, p.kh);
  cross_pack_rows_kernel<<<elementwise_blocks(g.keys()), 256, 0, stream>>>(v, g, g.nk, g.kb, g.kv_stride, p.vh);
  BRT_CUDA_CHECK_LAUNCH(who);
  return p;
}

int cross_row_blocks(const CrossTc& g) { return g.batch * g.H * ((g.nq + kAttnWarps - 1) / kAttnWarps); }

// C_p = op(Q-side_p)·op(K-side_p) for every problem p = h·batch + b, where the K side has kb
// entries per head (kb = 1: shared over the batch). One batched call when the strides are
// uniform (kb = batch), else one per head with a K-side stride of 0.
void cross_products(cublasHandle_t handle, const CrossTc& g, bool ta, bool tb, int M, int N, int K,
                    const __nv_bfloat16* A, int lda, int64_t sa, const __nv_bfloat16* B, int ldb,
                    int64_t sb, float* C, int ldc, int64_t sc) {
  if (g.kb == g.batch) {
    batched_gemm(handle, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, 0.0f, C, ldc, sc,
                 int64_t{g.H} * g.batch);
    return;
  }
  for (int h = 0; h < g.H; ++h)
    batched_gemm(handle, ta, tb, M, N, K, A + h * sa * g.batch, lda, sa, B + h * sb, ldb, 0, 0.0f,
                 C + h * sc * g.batch, ldc, sc, g.batch);
}

}  // namespace

std::size_t cross_attention_tc_scratch_bytes(const CrossAttnDims& d) {
  const int64_t A = d.width(), q = int64_t{d.batch} * d.queries * A, k = int64_t{d.batch} * d.keys * A;
  const int64_t t = int64_t{d.batch} * d.heads * d.queries * d.keys;
  // Backward: Qh, dOh, Kh, Vh (bf16); dP (fp32), dSb, Pb (bf16); dQh, dKh, dVh (fp32).
  return std::size_t(2 * 2 * q + 2 * 2 * k + 4 * t + 2 * 2 * t + 4 * q + 2 * 4 * k) +
         8 * std::size_t(d.batch) * d.heads * ((d.queries + kAttnWarps - 1) / kAttnWarps) *
             kBiasPartials + 16 * 256;
}

void launch_cross_attention_forward_tc(const CrossAttnDims& d, const float* q, const float* k,
                                       const float* v, const float* scale, float* out,
                                       float* probs, cublasHandle_t handle, DeviceArena& scratch,
                                       cudaStream_t stream) {
  const char* who = "cross_attention_forward (tensor cores)";
  const CrossTc g = cross_tc(d, who);
  const auto [qh, kh, vh] = cross_pack_operands(g, q, k, v, scratch, stream, who);
  auto* pb = scratch.allocate_array<__nv_bfloat16>(std::size_t(g.tiles()), who);
  float* oh = scratch.allocate_array<float>(std::size_t(g.queries()), who);
  const int nq = g.nq, nk = g.nk, dh = g.dh;
  cross_products(handle, g, false, true, nq, nk, dh, qh, dh, int64_t{nq} * dh, kh, dh,
                 int64_t{nk} * dh, probs, nk, int64_t{nq} * nk);                 // S = Q·Kᵀ
  cross_softmax_forward_kernel<<<cross_row_blocks(g), kAttnThreads, 0, stream>>>(g, scale, probs, pb);
  BRT_CUDA_CHECK_LAUNCH(who);
  cross_products(handle, g, false, false, nq, dh, nk, pb, nk, int64_t{nq} * nk, vh, dh,
                 int64_t{nk} * dh, oh, dh, int64_t{nq} * dh);                    // O = P·V
  cross_unpack_rows_kernel<<<elementwise_blocks(g.queries()), 256, 0, stream>>>(oh, g, g.nq, g.batch, g.q_stride, false, out);
  BRT_CUDA_CHECK_LAUNCH(who);
}

void launch_cross_attention_backward_tc(const CrossAttnDims& d, const float* q, const float* k,
                                        const float* v, const float* scale, const float* probs,
                                        const float* dout, float* dq, float* dk, float* dv,
                                        float* dscale, cublasHandle_t handle, DeviceArena& scratch,
                                        cudaStream_t stream) {
  const char* who = "cross_attention_backward (tensor cores)";
  const CrossTc g = cross_tc(d, who);
  const auto [qh, kh, vh] = cross_pack_operands(g, q, k, v, scratch, stream, who);
  auto* doh = scratch.allocate_array<__nv_bfloat16>(std::size_t(g.queries()), who);
  float* dp = scratch.allocate_array<float>(std::size_t(g.tiles()), who);
  auto* dsb = scratch.allocate_array<__nv_bfloat16>(std::size_t(g.tiles()), who);
  auto* pb = scratch.allocate_array<__nv_bfloat16>(std::size_t(g.tiles()), who);
  float* dqh = scratch.allocate_array<float>(std::size_t(g.queries()), who);
  float* dkh = scratch.allocate_array<float>(std::size_t(g.keys()), who);
  float* dvh = scratch.allocate_array<float>(std::size_t(g.keys()), who);
  double* partials = scratch.allocate_array<double>(std::size_t(cross_row_blocks(g)) * kBiasPartials, who);
  cross_pack_rows_kernel<<<elementwise_blocks(g.queries()), 256, 0, stream>>>(dout, g, g.nq, g.batch, g.q_stride, doh);
  BRT_CUDA_CHECK_LAUNCH(who);
  const int nq = g.nq, nk = g.nk, dh = g.dh;
  const int64_t sq = int64_t{nq} * dh, sk = int64_t{nk} * dh, st = int64_t{nq} * nk;
  cross_products(handle, g, false, true, nq, nk, dh, doh, dh, sq, vh, dh, sk, dp, nk, st);  // dP = dO·Vᵀ
  cross_softmax_backward_kernel<<<cross_row_blocks(g), kAttnThreads, 0, stream>>>(g, scale, probs, dp, dsb, pb, partials);
  BRT_CUDA_CHECK_LAUNCH(who);
  attention_bias_scale_reduce_kernel<<<g.H, 256, 0, stream>>>(
      partials, g.batch, g.H, (g.nq + kAttnWarps - 1) / kAttnWarps, scale, nullptr, nullptr, dscale);
  BRT_CUDA_CHECK_LAUNCH(who);
  cross_products(handle, g, false, false, nq, dh, nk, dsb, nk, st, kh, dh, sk, dqh, dh, sq);  // dQ = dS·K
  cross_unpack_rows_kernel<<<elementwise_blocks(g.queries()), 256, 0, stream>>>(dqh, g, g.nq, g.batch, g.q_stride, true, dq);
  if (g.kb == g.batch) {  // dK = dSᵀ·Q, dV = Pᵀ·dO per problem
    batched_gemm(handle, true, false, nk, dh, nq, dsb, nk, st, qh, dh, sq, 0.0f, dkh, dh, sk, int64_t{g.H} * g.batch);
    batched_gemm(handle, true, false, nk, dh, nq, pb, nk, st, doh, dh, sq, 0.0f, dvh, dh, sk, int64_t{g.H} * g.batch);
  } else {  // shared K/V: per head, the batch's query rows are one [batch·nq] reduction
    const int rows = g.batch * nq;
    batched_gemm(handle, true, false, nk, dh, rows, dsb, nk, st * g.batch, qh, dh, sq * g.batch, 0.0f, dkh, dh, sk, g.H);
    batched_gemm(handle, true, false, nk, dh, rows, pb, nk, st * g.batch, doh, dh, sq * g.batch, 0.0f, dvh, dh, sk, g.H);
  }
  cross_unpack_rows_kernel<<<elementwise_blocks(g.keys()), 256, 0, stream>>>(dkh, g, g.nk, g.kb, g.kv_stride, true, dk);
  cross_unpack_rows_kernel<<<elementwise_blocks(g.keys()), 256, 0, stream>>>(dvh, g, g.nk, g.kb, g.kv_stride, true, dv);
  BRT_CUDA_CHECK_LAUNCH(who);
}

}  // namespace brt::kernels::cuda
