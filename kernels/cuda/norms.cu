// RMSNorm (model.md §2) and per-head L2 normalisation (model.md §3.1). Row sums in double, like the
// CPU backend; one block per RMSNorm row, one warp per (position, head) for the L2 norm.
#include <cuda_bf16.h>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"

namespace brt::kernels::cuda {

namespace {

constexpr double kRmsEps = 1e-6;  // model.md §2
constexpr double kL2Eps = 1e-6;   // model.md §3.1
constexpr int kRowThreads = 256;

// y16 (not null): y written in bf16 there instead, rounded to nearest even as the conversion
// kernel rounds the fp32 value.
__global__ void rmsnorm_forward_kernel(const float* x, const float* gamma, int D, float* y,
                                       __nv_bfloat16* y16, float* rstd) {
  __shared__ double shared[kWarp];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * D;
  float* yr = y + row * D;
  double ss = 0;
  for (int j = threadIdx.x; j < D; j += blockDim.x) ss += static_cast<double>(xr[j]) * xr[j];
  ss = block_sum(ss, shared);
  const float r = static_cast<float>(1.0 / sqrt(ss / D + kRmsEps));
  if (threadIdx.x == 0) rstd[row] = r;
  for (int j = threadIdx.x; j < D; j += blockDim.x) {
    const float v = xr[j] * r * gamma[j];
    if (y16 != nullptr) y16[row * D + j] = __float2bfloat16_rn(v);
    else yr[j] = v;
  }
}

// dx = base + (r*gamma_j*dy_j - x_j*coef), base as kernels/backend.h's
// rmsnorm_backward_residual says (the CPU's additions in the CPU's order).
__global__ void rmsnorm_backward_kernel(const float* x, const float* gamma, const float* rstd,
                                        const float* dy, const float* residual, int accumulate,
                                        int D, float* dx) {
  __shared__ double shared[kWarp];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * D;
  const float* dyr = dy + row * D;
  const float* res = residual != nullptr ? residual + row * D : nullptr;
  float* dxr = dx + row * D;
  double dot = 0;
  for (int j = threadIdx.x; j < D; j += blockDim.x) {
    dot += static_cast<double>(gamma[j]) * dyr[j] * xr[j];
  }
  dot = block_sum(dot, shared);
  const float r = rstd[row];
  const float coef = static_cast<float>(dot * static_cast<double>(r) * r * r / D);
  for (int j = threadIdx.x; j < D; j += blockDim.x) {
    const float term = r * gamma[j] * dyr[j] - xr[j] * coef;
    if (accumulate && res != nullptr) dxr[j] = (dxr[j] + res[j]) + term;
    else if (accumulate) dxr[j] += term;
    else if (res != nullptr) dxr[j] = res[j] + term;
    else dxr[j] = 0.0f + term;  // 0 + t: as the fill it replaces
  }
}

struct GammaGradTerm {
  const float* x;
  const float* dy;
  const float* rstd;
  int D;
  __device__ float operator()(int i, int j) const {
    const int64_t at = static_cast<int64_t>(i) * D + j;
    return dy[at] * x[at] * rstd[i];
  }
};

// One warp per (position, head) row of dh elements.
__global__ void head_l2norm_forward_kernel(const float* x, int64_t rows, int dh, float* y,
                                           float* rnorm) {
  const int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  const float* xr = x + r * dh;
  float* yr = y + r * dh;
  double ss = 0;
  for (int j = lane; j < dh; j += kWarp) ss += static_cast<double>(xr[j]) * xr[j];
  ss = warp_sum(ss);
  const float rn = static_cast<float>(1.0 / sqrt(ss + kL2Eps));
  if (lane == 0) rnorm[r] = rn;
  for (int j = lane; j < dh; j += kWarp) yr[j] = xr[j] * rn;  // y may alias x
}

// dx16 (not null): dx written in bf16 there instead, rounded to nearest even as the conversion
// kernel rounds the fp32 value.
__global__ void head_l2norm_backward_kernel(const float* y, const float* rnorm, const float* dy,
                                            int64_t rows, int dh, float* dx, __nv_bfloat16* dx16) {
  const int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  const float* yr = y + r * dh;
  const float* dyr = dy + r * dh;
  double dot = 0;
  for (int j = lane; j < dh; j += kWarp) dot += static_cast<double>(yr[j]) * dyr[j];
  dot = warp_sum(dot);
  const float rn = rnorm[r];
  const float d = static_cast<float>(dot);
  for (int j = lane; j < dh; j += kWarp) {
    const float v = rn * (dyr[j] - yr[j] * d);  // written
    if (dx16 != nullptr) dx16[r * dh + j] = __float2bfloat16_rn(v);
    else dx[r * dh + j] = v;
  }
}

int warp_row_blocks(int64_t rows) { return static_cast<int>((rows * kWarp + 255) / 256); }

}  // namespace

void launch_rmsnorm_forward(const float* x, const float* gamma, int n, int D, float* y,
                            float* rstd, cudaStream_t stream) {
  if (n <= 0 || D <= 0) return;
  rmsnorm_forward_kernel<<<n, kRowThreads, 0, stream>>>(x, gamma, D, y, nullptr, rstd);
  BRT_CUDA_CHECK_LAUNCH("rmsnorm_forward");
}

void launch_rmsnorm_forward_bf16(const float* x, const float* gamma, int n, int D, void* y16, float* rstd,
                                 cudaStream_t stream) {
  if (n <= 0 || D <= 0) return;
  rmsnorm_forward_kernel<<<n, kRowThreads, 0, stream>>>(x, gamma, D, nullptr, static_cast<__nv_bfloat16*>(y16),
                                                        rstd);
  BRT_CUDA_CHECK_LAUNCH("rmsnorm_forward_bf16");
}

void launch_rmsnorm_backward(const float* x, const float* gamma, const float* rstd,
                             const float* dy, int n, int D, float* dx, float* dgamma,
                             DeviceArena& scratch, cudaStream_t stream) {
  launch_rmsnorm_backward_residual(x, gamma, rstd, dy, nullptr, true, n, D, dx, dgamma, scratch, stream);
}

void launch_rmsnorm_backward_residual(const float* x, const float* gamma, const float* rstd,
                                      const float* dy, const float* residual, bool accumulate, int n,
                                      int D, float* dx, float* dgamma, DeviceArena& scratch,
                                      cudaStream_t stream) {
  if (n <= 0 || D <= 0) return;
  rmsnorm_backward_kernel<<<n, kRowThreads, 0, stream>>>(x, gamma, rstd, dy, residual, accumulate ? 1 : 0,
                                                         D, dx);
  BRT_CUDA_CHECK_LAUNCH("rmsnorm_backward");
  column_reduce_accumulate(n, D, GammaGradTerm{x, dy, rstd, D}, PlainColumnSum{}, dgamma, scratch,
                           stream, "rmsnorm_backward");
}

void launch_head_l2norm_forward(const float* x, int n, int H, int dh, float* y, float* rnorm,
                                cudaStream_t stream) {
  const int64_t rows = int64_t{n} * H;
  if (rows <= 0 || dh <= 0) return;
  head_l2norm_forward_kernel<<<warp_row_blocks(rows), 256, 0, stream>>>(x, rows, dh, y, rnorm);
  BRT_CUDA_CHECK_LAUNCH("head_l2norm_forward");
}

void launch_head_l2norm_backward(const float* y, const float* rnorm, const float* dy, int n,
                                 int H, int dh, float* dx, cudaStream_t stream) {
  const int64_t rows = int64_t{n} * H;
  if (rows <= 0 || dh <= 0) return;
  head_l2norm_backward_kernel<<<warp_row_blocks(rows), 256, 0, stream>>>(y, rnorm, dy, rows, dh,
                                                                          dx, nullptr);
  BRT_CUDA_CHECK_LAUNCH("head_l2norm_backward");
}

void launch_head_l2norm_backward_bf16(const float* y, const float* rnorm, const float* dy, int n, int H, int dh,
                                      void* dx16, cudaStream_t stream) {
  const int64_t rows = int64_t{n} * H;
  if (rows <= 0 || dh <= 0) return;
  head_l2norm_backward_kernel<<<warp_row_blocks(rows), 256, 0, stream>>>(
      y, rnorm, dy, rows, dh, nullptr, static_cast<__nv_bfloat16*>(dx16));
  BRT_CUDA_CHECK_LAUNCH("head_l2norm_backward_bf16");
}

}  // namespace brt::kernels::cuda
