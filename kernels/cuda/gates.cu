// Recurrent-state gates (model.md §5.3): element-wise, with the 'fixed' bias gradient through the
// deterministic column reduction.
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"

namespace brt::kernels::cuda {

namespace {

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void fixed_forward_kernel(const float* carry, const float* u, const float* bias, int n,
                                     int D, float* out) {
  const int64_t total = int64_t{n} * D;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const float g = sigmoid(bias[e % D]);
    out[e] = carry[e] * g + u[e] * (1.0f - g);
  }
}

__global__ void fixed_backward_kernel(const float* bias, const float* dout, int n, int D,
                                      float* dcarry, float* du) {
  const int64_t total = int64_t{n} * D;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const float g = sigmoid(bias[e % D]);
    const float d = dout[e];
    dcarry[e] += d * g;
    du[e] += d * (1.0f - g);
  }
}

// d out / d g summed over rows: dout * (carry - u).
struct GateSlopeTerm {
  const float* carry;
  const float* u;
  const float* dout;
  int D;
  __device__ float operator()(int i, int j) const {
    const int64_t e = static_cast<int64_t>(i) * D + j;
    return dout[e] * (carry[e] - u[e]);
  }
};

// dbias = sum * g * (1 - g) (the sigmoid's slope), in double like the CPU backend.
struct SigmoidSlopeFinish {
  const float* bias;
  __device__ float operator()(int j, double sum) const {
    const double g = sigmoid(bias[j]);
    return static_cast<float>(sum * g * (1.0 - g));
  }
};

__global__ void lstm_forward_kernel(const float* carry, const float* u, const float* zf,
                                    const float* zi, int64_t total, float* out, float* f,
                                    float* i) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const float fe = sigmoid(zf[e] + 1.0f);
    const float ie = sigmoid(zi[e] - 1.0f);
    f[e] = fe;
    i[e] = ie;
    out[e] = carry[e] * fe + u[e] * ie;
  }
}

__global__ void lstm_backward_kernel(const float* carry, const float* u, const float* f,
                                     const float* i, const float* dout, int64_t total,
                                     float* dcarry, float* du, float* dzf, float* dzi) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const float g = dout[e];
    dcarry[e] += g * f[e];
    du[e] += g * i[e];
    dzf[e] += g * carry[e] * f[e] * (1.0f - f[e]);
    dzi[e] += g * u[e] * i[e] * (1.0f - i[e]);
  }
}

}  // namespace

void launch_fixed_gate_forward(const float* carry, const float* u, const float* bias, int n,
                               int D, float* out, cudaStream_t stream) {
  const int64_t total = int64_t{n} * D;
  if (total <= 0) return;
  fixed_forward_kernel<<<elementwise_blocks(total), 256, 0, stream>>>(carry, u, bias, n, D, out);
  BRT_CUDA_CHECK_LAUNCH("fixed_gate_forward");
}

void launch_fixed_gate_backward(const float* carry, const float* u, const float* bias,
                                const float* dout, int n, int D, float* dcarry, float* du,
                                float* dbias, DeviceArena& scratch, cudaStream_t stream) {
  const int64_t total = int64_t{n} * D;
  if (total <= 0) return;
  fixed_backward_kernel<<<elementwise_blocks(total), 256, 0, stream>>>(bias, dout, n, D, dcarry,
                                                                        du);
  BRT_CUDA_CHECK_LAUNCH("fixed_gate_backward");
  column_reduce_accumulate(n, D, GateSlopeTerm{carry, u, dout, D}, SigmoidSlopeFinish{bias},
                           dbias, scratch, stream, "fixed_gate_backward");
}

void launch_lstm_gate_forward(const float* carry, const float* u, const float* zf,
                              const float* zi, int n, int D, float* out, float* f, float* i,
                              cudaStream_t stream) {
  const int64_t total = int64_t{n} * D;
  if (total <= 0) return;
  lstm_forward_kernel<<<elementwise_blocks(total), 256, 0, stream>>>(carry, u, zf, zi, total, out,
                                                                      f, i);
  BRT_CUDA_CHECK_LAUNCH("lstm_gate_forward");
}

void launch_lstm_gate_backward(const float* carry, const float* u, const float* f,
                               const float* i, const float* dout, int n, int D, float* dcarry,
                               float* du, float* dzf, float* dzi, cudaStream_t stream) {
  const int64_t total = int64_t{n} * D;
  if (total <= 0) return;
  lstm_backward_kernel<<<elementwise_blocks(total), 256, 0, stream>>>(carry, u, f, i, dout, total,
                                                                       dcarry, du, dzf, dzi);
  BRT_CUDA_CHECK_LAUNCH("lstm_gate_backward");
}

}  // namespace brt::kernels::cuda
