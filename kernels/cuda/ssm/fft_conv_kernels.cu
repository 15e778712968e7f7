// Gather, spectral-product and scatter kernels of the cuFFT convolution (fft_conv.h,
// model.md §7.1). The transforms themselves are cuFFT's (fft_conv.cpp).
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"

namespace brt::kernels::cuda {

namespace {

// Grid-stride over rows x n_fft, t fastest: writes of the padded real rows are coalesced.
__global__ void gather_input_kernel(FftConvShape s, const float* u, float* real) {
  const int64_t total = int64_t{s.Bm} * s.Fm * s.n_fft;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int t = static_cast<int>(e % s.n_fft);
    const int64_t row = e / s.n_fft;
    const int f = static_cast<int>(row % s.Fm), b = static_cast<int>(row / s.Fm);
    real[e] = (t < s.L && f < s.F && b < s.B) ? u[(int64_t{b} * s.L + t) * s.F + f] : 0.0f;
  }
}

__global__ void gather_kernel_kernel(FftConvShape s, const float* k, const float* dskip,
                                     float* real) {
  const int64_t total = int64_t{s.C} * s.Fm * s.n_fft;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int t = static_cast<int>(e % s.n_fft);
    const int64_t row = e / s.n_fft;
    const int f = static_cast<int>(row % s.Fm), c = static_cast<int>(row / s.Fm);
    float value = 0.0f;
    if (t < s.L && f < s.F) {
      value = k[(int64_t{c} * s.F + f) * s.L + t];
      if (t == 0 && dskip != nullptr) value += dskip[int64_t{c} * s.F + f];  // skip = tap 0
    }
    real[e] = value;
  }
}

__global__ void gather_output_grad_kernel(FftConvShape s, const float* dy, float* real) {
  const int64_t total = int64_t{s.Bm} * s.C * s.Fm * s.n_fft;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int t = static_cast<int>(e % s.n_fft);
    const int64_t row = e / s.n_fft;
    const int f = static_cast<int>(row % s.Fm);
    const int64_t bc = row / s.Fm;  // b * C + c
    const int b = static_cast<int>(bc / s.C);
    real[e] = (t < s.L && f < s.F && b < s.B) ? dy[(bc * s.L + t) * s.F + f] : 0.0f;
  }
}

__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ __forceinline__ float2 cmul_conj_first(float2 a, float2 b) {  // conj(a) * b
  return make_float2(a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x);
}

__global__ void multiply_kernel(FftConvShape s, const float2* U, const float2* K, float2* Y) {
  const int64_t total = int64_t{s.Bm} * s.C * s.Fm * s.n_freq;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int w = static_cast<int>(e % s.n_freq);
    const int64_t row = e / s.n_freq;
    const int f = static_cast<int>(row % s.Fm);
    const int64_t bc = row / s.Fm;
    const int c = static_cast<int>(bc % s.C), b = static_cast<int>(bc / s.C);
    Y[e] = cmul(U[(int64_t{b} * s.Fm + f) * s.n_freq + w], K[(int64_t{c} * s.Fm + f) * s.n_freq + w]);
  }
}

__global__ void correlate_input_kernel(FftConvShape s, const float2* K, const float2* DY,
                                       float2* DU) {
  const int64_t total = int64_t{s.Bm} * s.Fm * s.n_freq;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int w = static_cast<int>(e % s.n_freq);
    const int64_t row = e / s.n_freq;
    const int f = static_cast<int>(row % s.Fm), b = static_cast<int>(row / s.Fm);
    float2 acc = make_float2(0.0f, 0.0f);
    for (int c = 0; c < s.C; ++c) {
      const float2 p = cmul_conj_first(K[(int64_t{c} * s.Fm + f) * s.n_freq + w],
                                       DY[((int64_t{b} * s.C + c) * s.Fm + f) * s.n_freq + w]);
      acc.x += p.x;
      acc.y += p.y;
    }
    DU[e] = acc;
  }
}

__global__ void correlate_kernel_kernel(FftConvShape s, const float2* U, const float2* DY,
                                        float2* DK) {
  const int64_t total = int64_t{s.C} * s.Fm * s.n_freq;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int w = static_cast<int>(e % s.n_freq);
    const int64_t row = e / s.n_freq;
    const int f = static_cast<int>(row % s.Fm), c = static_cast<int>(row / s.Fm);
    float2 acc = make_float2(0.0f, 0.0f);
    for (int b = 0; b < s.B; ++b) {
      const float2 p = cmul_conj_first(U[(int64_t{b} * s.Fm + f) * s.n_freq + w],
                                       DY[((int64_t{b} * s.C + c) * s.Fm + f) * s.n_freq + w]);
      acc.x += p.x;
      acc.y += p.y;
    }
    DK[e] = acc;
  }
}

// Grid-stride over the OUTPUT layout, f fastest: the row-major activations are written
// coalesced; the strided reads of the real rows go through L2.
__global__ void scatter_output_kernel(FftConvShape s, const float* real, float* y) {
  const int64_t total = int64_t{s.B} * s.C * s.L * s.F;
  const float inv = 1.0f / static_cast<float>(s.n_fft);
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int f = static_cast<int>(e % s.F);
    const int t = static_cast<int>(e / s.F % s.L);
    const int64_t bc = e / (int64_t{s.F} * s.L);
    y[e] = real[(bc * s.Fm + f) * s.n_fft + t] * inv;
  }
}

__global__ void scatter_input_grad_kernel(FftConvShape s, const float* real, float* du) {
  const int64_t total = int64_t{s.B} * s.L * s.F;
  const float inv = 1.0f / static_cast<float>(s.n_fft);
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int f = static_cast<int>(e % s.F);
    const int t = static_cast<int>(e / s.F % s.L);
    const int b = static_cast<int>(e / (int64_t{s.F} * s.L));
    du[e] += real[(int64_t{b} * s.Fm + f) * s.n_fft + t] * inv;
  }
}

__global__ void scatter_kernel_grad_kernel(FftConvShape s, const float* real, float* dk,
                                           float* ddskip) {
  const int64_t total = int64_t{s.C} * s.F * s.L;
  const float inv = 1.0f / static_cast<float>(s.n_fft);
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int t = static_cast<int>(e % s.L);
    const int64_t cf = e / s.L;  // c * F + f
    const int f = static_cast<int>(cf % s.F), c = static_cast<int>(cf / s.F);
    const float value = real[(int64_t{c} * s.Fm + f) * s.n_fft + t] * inv;
    if (dk != nullptr) dk[e] += value;
    if (t == 0 && ddskip != nullptr) ddskip[cf] += value;
  }
}

}  // namespace

void launch_fft_gather_input(const FftConvShape& s, const float* u, float* real,
                             cudaStream_t stream) {
  gather_input_kernel<<<elementwise_blocks(int64_t{s.Bm} * s.Fm * s.n_fft), 256, 0, stream>>>(
      s, u, real);
  BRT_CUDA_CHECK_LAUNCH("fft_conv gather input");
}

void launch_fft_gather_kernel(const FftConvShape& s, const float* k, const float* dskip,
                              float* real, cudaStream_t stream) {
  gather_kernel_kernel<<<elementwise_blocks(int64_t{s.C} * s.Fm * s.n_fft), 256, 0, stream>>>(
      s, k, dskip, real);
  BRT_CUDA_CHECK_LAUNCH("fft_conv gather kernel");
}

void launch_fft_gather_output_grad(const FftConvShape& s, const float* dy, float* real,
                                   cudaStream_t stream) {
  gather_output_grad_kernel<<<elementwise_blocks(int64_t{s.Bm} * s.C * s.Fm * s.n_fft), 256, 0,
                              stream>>>(s, dy, real);
  BRT_CUDA_CHECK_LAUNCH("fft_conv gather output gradient");
}

void launch_fft_multiply(const FftConvShape& s, const float2* U, const float2* K, float2* Y,
                         cudaStream_t stream) {
  multiply_kernel<<<elementwise_blocks(int64_t{s.Bm} * s.C * s.Fm * s.n_freq), 256, 0, stream>>>(
      s, U, K, Y);
  BRT_CUDA_CHECK_LAUNCH("fft_conv multiply");
}

void launch_fft_correlate(const FftConvShape& s, const float2* U, const float2* K,
                          const float2* DY, float2* DU, float2* DK, cudaStream_t stream) {
  if (DU != nullptr) {
    correlate_input_kernel<<<elementwise_blocks(int64_t{s.Bm} * s.Fm * s.n_freq), 256, 0,
                             stream>>>(s, K, DY, DU);
    BRT_CUDA_CHECK_LAUNCH("fft_conv correlate input");
  }
  if (DK != nullptr) {
    correlate_kernel_kernel<<<elementwise_blocks(int64_t{s.C} * s.Fm * s.n_freq), 256, 0,
                              stream>>>(s, U, DY, DK);
    BRT_CUDA_CHECK_LAUNCH("fft_conv correlate kernel");
  }
}

void launch_fft_scatter_output(const FftConvShape& s, const float* real, float* y,
                               cudaStream_t stream) {
  scatter_output_kernel<<<elementwise_blocks(int64_t{s.B} * s.C * s.L * s.F), 256, 0, stream>>>(
      s, real, y);
  BRT_CUDA_CHECK_LAUNCH("fft_conv scatter output");
}

void launch_fft_scatter_input_grad(const FftConvShape& s, const float* real, float* du,
                                   cudaStream_t stream) {
  scatter_input_grad_kernel<<<elementwise_blocks(int64_t{s.B} * s.L * s.F), 256, 0, stream>>>(
      s, real, du);
  BRT_CUDA_CHECK_LAUNCH("fft_conv scatter input gradient");
}

void launch_fft_scatter_kernel_grad(const FftConvShape& s, const float* real, float* dk,
                                    float* ddskip, cudaStream_t stream) {
  scatter_kernel_grad_kernel<<<elementwise_blocks(int64_t{s.C} * s.F * s.L), 256, 0, stream>>>(
      s, real, dk, ddskip);
  BRT_CUDA_CHECK_LAUNCH("fft_conv scatter kernel gradient");
}

}  // namespace brt::kernels::cuda
