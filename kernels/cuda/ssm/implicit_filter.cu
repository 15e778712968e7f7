// The implicit (Hyena) filter network's element-wise ops (model.md §7.1 `unstructured`;
// kernels/implicit_filter.h composes the network from these, cuBLAS gemm and the column
// sums, so it runs on the device with its parameters). Same arithmetic as the CPU's
// kernels/implicit_filter.cpp: sinf/cosf in fp32, the decay factor in double.
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"

namespace brt::kernels::cuda {

namespace {

__global__ void sine_forward_kernel(const float* a, const float* freq, int64_t total, int O,
                                    float* s) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    s[e] = sinf(freq[e % O] * a[e]);
  }
}

__global__ void sine_input_grad_kernel(const float* a, const float* freq, const float* ds,
                                       int64_t total, int O, float* da) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const float w = freq[e % O];
    da[e] += ds[e] * cosf(w * a[e]) * w;
  }
}

// dω's term for the deterministic column reduction: ds·a·cos(ω a) at (row i, unit o).
struct SineFreqTerm {
  const float* a;
  const float* freq;
  const float* ds;
  int O;
  __device__ float operator()(int i, int o) const {
    const int64_t e = int64_t{i} * O + o;
    return ds[e] * cosf(freq[o] * a[e]) * a[e];
  }
};

__global__ void implicit_filter_decay_kernel(float* x, const double* rate, int length,
                                             int64_t total) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / length;
    const int l = static_cast<int>(e % length);
    const double t = static_cast<double>(l) / length;
    x[e] *= static_cast<float>(exp(-t * rate[r]));
  }
}

}  // namespace

void launch_sine_forward(const float* a, const float* freq, int n, int O, float* s,
                         cudaStream_t stream) {
  const int64_t total = int64_t{n} * O;
  if (total <= 0) return;
  sine_forward_kernel<<<elementwise_blocks(total), 256, 0, stream>>>(a, freq, total, O, s);
  BRT_CUDA_CHECK_LAUNCH("sine_forward");
}

void launch_sine_backward(const float* a, const float* freq, const float* ds, int n, int O,
                          float* da, float* dfreq, DeviceArena& scratch, cudaStream_t stream) {
  const int64_t total = int64_t{n} * O;
  if (total <= 0) return;
  sine_input_grad_kernel<<<elementwise_blocks(total), 256, 0, stream>>>(a, freq, ds, total, O,
                                                                        da);
  BRT_CUDA_CHECK_LAUNCH("sine_backward");
  column_reduce_accumulate(n, O, SineFreqTerm{a, freq, ds, O}, PlainColumnSum{}, dfreq, scratch,
                           stream, "sine_backward (dfreq)");
}

void launch_implicit_filter_decay(float* x, const double* rate, int filters, int length,
                                  cudaStream_t stream) {
  const int64_t total = int64_t{filters} * length;
  if (total <= 0) return;
  implicit_filter_decay_kernel<<<elementwise_blocks(total), 256, 0, stream>>>(x, rate, length,
                                                                              total);
  BRT_CUDA_CHECK_LAUNCH("implicit_filter_decay");
}

}  // namespace brt::kernels::cuda
