// Sliding-window self-attention with the T5 relative bias (model.md §3.2, §3.3) on the GPU.
//
// Query q of block t sees window keys [q, q + W) of [K_{t-1}; K_t]; in absolute positions that
// is exactly the W previous tokens (distances 1..W), with block 0's previous block taken from
// the cache. So the kernels index keys by a "virtual" position kv in [0, W + N): kv < W is
// cache row kv, kv >= W is segment row kv - W; query i sees kv in [i, i + W) at distance
// i + W - kv. The probs buffer [B, T, H, W, 2W] keeps only each query row's log-sum-exp (in
// the row's first element); backward recomputes the probabilities (attention_core.cuh).
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/attention/attention_core.cuh"
#include "kernels/cuda/launchers.h"

namespace brt::kernels::cuda {

namespace {

struct WindowGeo {
  static constexpr bool kHasBias = true;
  int batch, N, W, H, dh, A, queries, blocks;
  const float* bias_by_distance;  // [H, W + 1]: rel_bias[h, bucket(distance)]
  const int* bucket_by_distance;  // [W + 1]

  __device__ int64_t q_off(int b, int i) const { return (int64_t{b} * N + i) * A; }
  __device__ int key_lo(int i) const { return i; }
  __device__ int key_hi(int i) const { return i + W; }
  __device__ const float* key_row(const AttnInputs& in, int b, int h, int kv) const {
    return kv < W ? in.k_cache + (int64_t{b} * W + kv) * A + int64_t{h} * dh
                  : in.k + (int64_t{b} * N + kv - W) * A + int64_t{h} * dh;
  }
  __device__ const float* value_row(const AttnInputs& in, int b, int h, int kv) const {
    return kv < W ? in.v_cache + (int64_t{b} * W + kv) * A + int64_t{h} * dh
                  : in.v + (int64_t{b} * N + kv - W) * A + int64_t{h} * dh;
  }
  __device__ float bias(int h, int i, int kv) const {
    return bias_by_distance[h * (W + 1) + i + W - kv];
  }
  __device__ int bucket(int i, int kv) const { return bucket_by_distance[i + W - kv]; }
  // First element of the query's row in its [W, 2W] probs tile (b, t, h).
  __device__ int64_t lse_index(int b, int h, int i) const {
    const int t = i / W, r = i % W;
    return ((int64_t{b} * blocks + t) * H + h) * int64_t{W} * (2 * W) + int64_t{r} * (2 * W);
  }
  __device__ int64_t row_index(int b, int h, int i) const { return (int64_t{b} * H + h) * N + i; }
  // dK/dV: segment keys only (the cache is detached, model.md §8).
  __device__ int owned_keys() const { return N; }
  __device__ int owned_key(int o) const { return o + W; }
  __device__ int owner_batch_begin(int group) const { return group; }
  __device__ int owner_batch_end(int group) const { return group + 1; }
  __device__ int query_lo(int kv) const { return max(0, kv - W + 1); }
  __device__ int query_hi(int kv) const { return min(N, kv + 1); }
  __device__ int64_t owned_key_off(int group, int kv) const {
    return (int64_t{group} * N + kv - W) * A;
  }
};

__global__ void bias_by_distance_kernel(const float* rel_bias, const int* bucket, int H, int W,
                                        float* out) {
  const int total = H * (W + 1);
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
    const int h = e / (W + 1), distance = e % (W + 1);
    out[e] = distance == 0 ? 0.0f : rel_bias[h * kT5Buckets + bucket[distance]];
  }
}

}  // namespace

std::vector<int> t5_bucket_table(int max_distance) {
  // The same host function as the CPU backend (model.md §3.3, fp32 on the host), so a distance
  // never lands in a different bucket through a device logf rounding.
  std::vector<int> buckets(static_cast<std::size_t>(max_distance) + 1, 0);
  for (int distance = 1; distance <= max_distance; ++distance) buckets[distance] = t5_bucket(distance);
  return buckets;
}

WindowBiasTables window_bias_tables(const WindowAttnDims& d, const float* rel_bias,
                                    const T5Buckets& buckets, DeviceArena& scratch,
                                    cudaStream_t stream, const char* who) {
  const int W = d.window;
  if (W > buckets.max_distance)
    throw std::runtime_error(std::string("kernels/cuda ") + who + ": window " + std::to_string(W) +
                             " is beyond the T5 bucket table's " +
                             std::to_string(buckets.max_distance) + " distances");
  // No host copy here: the table is the backend's, uploaded once, so the call can be captured.
  const int* bucket_dev = buckets.table;
  float* bias_dev = scratch.allocate_array<float>(static_cast<std::size_t>(d.heads) * (W + 1), who);
  bias_by_distance_kernel<<<elementwise_blocks(int64_t{d.heads} * (W + 1)), 256, 0, stream>>>(
      rel_bias, bucket_dev, d.heads, W, bias_dev);
  BRT_CUDA_CHECK_LAUNCH(who);
  return {bias_dev, bucket_dev};
}

namespace {

WindowGeo make_geometry(const WindowAttnDims& d, const float* rel_bias, const T5Buckets& buckets,
                        DeviceArena& scratch, cudaStream_t stream, const char* who) {
  if (d.batch <= 0 || d.seq <= 0 || d.window <= 0 || d.heads <= 0 || d.head_dim <= 0 ||
      d.seq % d.window != 0 || d.head_dim > kMaxHeadDim) {
    throw std::runtime_error(
        std::string("kernels/cuda ") + who + ": invalid dims batch=" + std::to_string(d.batch) +
        " seq=" + std::to_string(d.seq) + " window=" + std::to_string(d.window) +
        " heads=" + std::to_string(d.heads) + " head_dim=" + std::to_string(d.head_dim) +
        " (seq a positive multiple of window; head_dim <= " + std::to_string(kMaxHeadDim) + ")");
  }
  const int W = d.window;
  const WindowBiasTables tables = window_bias_tables(d, rel_bias, buckets, scratch, stream, who);
  return WindowGeo{d.batch, d.seq, W, d.heads, d.head_dim, d.width(), d.seq, d.seq / W,
                   tables.bias, tables.bucket};
}

int query_tiles(const WindowGeo& g) { return (g.queries + kAttnWarps - 1) / kAttnWarps; }

}  // namespace

void launch_window_attention_forward(const WindowAttnDims& d, const float* q, const float* k,
                                     const float* v, const float* k_cache,
                                     const float* v_cache, const float* rel_bias,
                                     const float* scale, float* out, float* probs,
                                     const T5Buckets& buckets, DeviceArena& scratch,
                                     cudaStream_t stream) {
  const char* who = "window_attention_forward";
  const WindowGeo g = make_geometry(d, rel_bias, buckets, scratch, stream, who);
  const AttnInputs in{q, k, v, k_cache, v_cache, scale, nullptr};
  const int blocks = g.batch * g.H * query_tiles(g);
  attention_rows_kernel<WindowGeo, false><<<blocks, kAttnThreads, attention_shared_bytes(g.dh),
                                            stream>>>(g, in, out, probs, nullptr, nullptr);
  BRT_CUDA_CHECK_LAUNCH(who);
}

void launch_window_attention_backward(const WindowAttnDims& d, const float* q, const float* k,
                                      const float* v, const float* k_cache,
                                      const float* v_cache, const float* rel_bias,
                                      const float* scale, const float* probs,
                                      const float* dout, float* dq, float* dk, float* dv,
                                      float* drel_bias, float* dscale, bool accumulate,
                                      const T5Buckets& buckets, DeviceArena& scratch,
                                      cudaStream_t stream) {
  const char* who = "window_attention_backward";
  const WindowGeo g = make_geometry(d, rel_bias, buckets, scratch, stream, who);
  const AttnInputs in{q, k, v, k_cache, v_cache, scale, dout, accumulate};
  const int tiles = query_tiles(g);
  const int blocks = g.batch * g.H * tiles;
  const std::size_t shared = attention_shared_bytes(g.dh);
  float* delta = scratch.allocate_array<float>(static_cast<std::size_t>(g.batch) * g.H * g.N, who);
  double* partials =
      scratch.allocate_array<double>(static_cast<std::size_t>(blocks) * kBiasPartials, who);
  attention_rows_kernel<WindowGeo, true><<<blocks, kAttnThreads, shared, stream>>>(
      g, in, nullptr, nullptr, probs, delta);
  BRT_CUDA_CHECK_LAUNCH(who);
  attention_dq_kernel<WindowGeo><<<blocks, kAttnThreads, shared, stream>>>(g, in, probs, delta, dq,
                                                                          partials);
  BRT_CUDA_CHECK_LAUNCH(who);
  attention_bias_scale_reduce_kernel<<<g.H, 256, 0, stream>>>(partials, g.batch, g.H, tiles,
                                                              scale, rel_bias, drel_bias, dscale);
  BRT_CUDA_CHECK_LAUNCH(who);
  const int key_tiles = (g.N + kAttnWarps - 1) / kAttnWarps;
  attention_dkdv_kernel<WindowGeo><<<g.batch * g.H * key_tiles, kAttnThreads, shared, stream>>>(
      g, in, probs, delta, dk, dv);
  BRT_CUDA_CHECK_LAUNCH(who);
}

}  // namespace brt::kernels::cuda
