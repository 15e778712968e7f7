// The last step of both attention backwards: per-block partials of the bias and scale
// gradients summed per head in a fixed order (attention_core.cuh).
#include "kernels/cuda/attention/attention_core.cuh"

namespace brt::kernels::cuda {

__global__ void attention_bias_scale_reduce_kernel(const double* partials, int batch, int H,
                                                   int tiles, const float* scale,
                                                   const float* rel_bias, float* drel_bias,
                                                   float* dscale) {
  __shared__ double shared[kWarp];
  __shared__ double totals[kBiasPartials];
  const int h = blockIdx.x;
  for (int item = 0; item < kBiasPartials; ++item) {
    double local = 0.0;
    for (int b = 0; b < batch; ++b) {
      const int64_t first = (int64_t{b} * H + h) * tiles;
      for (int t = threadIdx.x; t < tiles; t += blockDim.x) {
        local += partials[(first + t) * kBiasPartials + item];
      }
    }
    const double total = block_sum(local, shared);
    if (threadIdx.x == 0) totals[item] = total;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const double s = scale[h];
    double dscale_sum = totals[32];  // sum dl * raw
    if (rel_bias != nullptr) {
      for (int c = 0; c < 32; ++c) {
        drel_bias[h * 32 + c] += static_cast<float>(totals[c] * s);
        dscale_sum += totals[c] * static_cast<double>(rel_bias[h * 32 + c]);
      }
    }
    dscale[h] += static_cast<float>(dscale_sum);
  }
}

}  // namespace brt::kernels::cuda
