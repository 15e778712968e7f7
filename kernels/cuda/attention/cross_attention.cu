// Cross-attention without position bias, optionally causal (model.md §3.4, §7.2), on the GPU.
// Batch entries are addressed by strides (CrossAttnDims). The probs buffer [batch, H, nq, nk]
// keeps only each query row's log-sum-exp (in the row's first element); backward recomputes
// the probabilities (attention_core.cuh). Batch entries may share K and V (kv_stride == 0):
// the dK/dV owner of a key row then walks every batch entry, in order.
#include <stdexcept>
#include <string>

#include "kernels/cuda/attention/attention_core.cuh"
#include "kernels/cuda/launchers.h"

namespace brt::kernels::cuda {

namespace {

struct CrossGeo {
  static constexpr bool kHasBias = false;
  int batch, nq, nk, H, dh, A, queries;
  int64_t q_stride, kv_stride;
  bool causal;

  __device__ int64_t q_off(int b, int i) const { return b * q_stride + int64_t{i} * A; }
  __device__ int key_lo(int) const { return 0; }
  __device__ int key_hi(int i) const { return causal ? min(i + 1, nk) : nk; }
  __device__ const float* key_row(const AttnInputs& in, int b, int h, int j) const {
    return in.k + b * kv_stride + int64_t{j} * A + int64_t{h} * dh;
  }
  __device__ const float* value_row(const AttnInputs& in, int b, int h, int j) const {
    return in.v + b * kv_stride + int64_t{j} * A + int64_t{h} * dh;
  }
  __device__ float bias(int, int, int) const { return 0.0f; }
  __device__ int bucket(int, int) const { return 0; }
  __device__ int64_t lse_index(int b, int h, int i) const {
    return ((int64_t{b} * H + h) * nq + i) * nk;
  }
  __device__ int64_t row_index(int b, int h, int i) const { return (int64_t{b} * H + h) * nq + i; }
  __device__ int owned_keys() const { return nk; }
  __device__ int owned_key(int o) const { return o; }
  __device__ int owner_batch_begin(int group) const { return kv_stride == 0 ? 0 : group; }
  __device__ int owner_batch_end(int group) const { return kv_stride == 0 ? batch : group + 1; }
  __device__ int query_lo(int j) const { return causal ? j : 0; }
  __device__ int query_hi(int) const { return nq; }
  __device__ int64_t owned_key_off(int group, int j) const {
    return group * kv_stride + int64_t{j} * A;
  }
};

CrossGeo make_geometry(const CrossAttnDims& d, const char* who) {
  const int64_t A = d.width();
  const bool shapes_ok = d.batch > 0 && d.queries > 0 && d.keys > 0 && d.heads > 0 &&
                         d.head_dim > 0 && d.head_dim <= kMaxHeadDim;
  // Outputs of different batch entries must not overlap; K/V are shared or disjoint.
  const bool strides_ok = (d.batch == 1 || d.q_stride >= d.queries * A) &&
                          (d.batch == 1 || d.kv_stride == 0 || d.kv_stride >= d.keys * A);
  if (!shapes_ok || !strides_ok) {
    throw std::runtime_error(
        std::string("kernels/cuda ") + who + ": invalid dims batch=" + std::to_string(d.batch) +
        " queries=" + std::to_string(d.queries) + " keys=" + std::to_string(d.keys) +
        " heads=" + std::to_string(d.heads) + " head_dim=" + std::to_string(d.head_dim) +
        " q_stride=" + std::to_string(d.q_stride) + " kv_stride=" + std::to_string(d.kv_stride) +
        " (head_dim <= " + std::to_string(kMaxHeadDim) +
        "; batch entries' rows may not overlap, except K/V shared with kv_stride 0)");
  }
  return CrossGeo{d.batch, d.queries, d.keys, d.heads, d.head_dim, d.width(), d.queries,
                  d.q_stride, d.kv_stride, d.causal};
}

int query_tiles(const CrossGeo& g) { return (g.queries + kAttnWarps - 1) / kAttnWarps; }

}  // namespace

void launch_cross_attention_forward(const CrossAttnDims& d, const float* q, const float* k,
                                    const float* v, const float* scale, float* out,
                                    float* probs, cudaStream_t stream) {
  const char* who = "cross_attention_forward";
  const CrossGeo g = make_geometry(d, who);
  const AttnInputs in{q, k, v, nullptr, nullptr, scale, nullptr};
  const int blocks = g.batch * g.H * query_tiles(g);
  attention_rows_kernel<CrossGeo, false><<<blocks, kAttnThreads, attention_shared_bytes(g.dh),
                                           stream>>>(g, in, out, probs, nullptr, nullptr);
  BRT_CUDA_CHECK_LAUNCH(who);
}

void launch_cross_attention_backward(const CrossAttnDims& d, const float* q, const float* k,
                                     const float* v, const float* scale, const float* probs,
                                     const float* dout, float* dq, float* dk, float* dv,
                                     float* dscale, DeviceArena& scratch, cudaStream_t stream) {
  const char* who = "cross_attention_backward";
  const CrossGeo g = make_geometry(d, who);
  const AttnInputs in{q, k, v, nullptr, nullptr, scale, dout};
  const int tiles = query_tiles(g);
  const int blocks = g.batch * g.H * tiles;
  const std::size_t shared = attention_shared_bytes(g.dh);
  float* delta =
      scratch.allocate_array<float>(static_cast<std::size_t>(g.batch) * g.H * g.nq, who);
  double* partials =
      scratch.allocate_array<double>(static_cast<std::size_t>(blocks) * kBiasPartials, who);
  attention_rows_kernel<CrossGeo, true><<<blocks, kAttnThreads, shared, stream>>>(
      g, in, nullptr, nullptr, probs, delta);
  BRT_CUDA_CHECK_LAUNCH(who);
  attention_dq_kernel<CrossGeo><<<blocks, kAttnThreads, shared, stream>>>(g, in, probs, delta, dq,
                                                                         partials);
  BRT_CUDA_CHECK_LAUNCH(who);
  attention_bias_scale_reduce_kernel<<<g.H, 256, 0, stream>>>(partials, g.batch, g.H, tiles,
                                                              scale, nullptr, nullptr, dscale);
  BRT_CUDA_CHECK_LAUNCH(who);
  const int groups = g.kv_stride == 0 ? 1 : g.batch;
  const int key_tiles = (g.nk + kAttnWarps - 1) / kAttnWarps;
  attention_dkdv_kernel<CrossGeo><<<groups * g.H * key_tiles, kAttnThreads, shared, stream>>>(
      g, in, probs, delta, dk, dv);
  BRT_CUDA_CHECK_LAUNCH(who);
}

}  // namespace brt::kernels::cuda
