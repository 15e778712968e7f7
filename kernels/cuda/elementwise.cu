// Element-wise helpers, ReLU (model.md §4), the column sum and the bf16 operand conversion.
#include <cuda_bf16.h>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"

namespace brt::kernels::cuda {

namespace {

__global__ void fill_kernel(float* x, int64_t n, float value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = value;
  }
}

__global__ void copy_kernel(const float* x, int64_t n, float* y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = x[i];
  }
}

__global__ void copy_2d_kernel(const float* x, int64_t ldx, int64_t cols, int64_t total,
                               float* y, int64_t ldy, bool accumulate) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = e / cols, j = e % cols;
    const float v = x[i * ldx + j];
    if (accumulate) y[i * ldy + j] += v;
    else y[i * ldy + j] = v;
  }
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] += x[i];
  }
}

__global__ void scale_kernel(float* x, int64_t n, float alpha) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] *= alpha;
  }
}

__global__ void add_rows_broadcast_kernel(float* out, const float* table, int rows_out,
                                          int rows_table, int D) {
  const int64_t total = int64_t{rows_out} * D;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = e / D;
    const int col = static_cast<int>(e % D);
    out[e] += table[(row % rows_table) * D + col];
  }
}

__global__ void relu_forward_kernel(const float* x, int64_t n, float* y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  }
}

__global__ void relu_backward_kernel(const float* y, const float* dy, int64_t n, float* dx) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  }
}

// relu_backward_kernel with y in bf16 (Backend::linear_relu_forward's y_for_products): y > 0
// read from its bits (sign clear, not zero, not NaN), as the fp32 comparison answers.
__global__ void relu_backward_bf16_kernel(const uint16_t* y16, const float* dy, int64_t n, float* dx) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const unsigned magnitude = y16[i] & 0x7fffu;
    const bool positive = (y16[i] & 0x8000u) == 0 && magnitude != 0 && magnitude <= 0x7f80u;
    dx[i] = positive ? dy[i] : 0.0f;
  }
}

__global__ void convert_to_bf16_kernel(const float* src, int rows, int cols, int ld,
                                       __nv_bfloat16* dst) {
  const int64_t total = int64_t{rows} * cols;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / cols;
    const int c = static_cast<int>(e % cols);
    dst[e] = __float2bfloat16_rn(src[r * ld + c]);
  }
}

struct MatrixEntry {
  const float* m;
  int D;
  __device__ float operator()(int i, int j) const { return m[static_cast<int64_t>(i) * D + j]; }
};

}  // namespace

void launch_fill(float* x, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  fill_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(x, n, value);
  BRT_CUDA_CHECK_LAUNCH("fill");
}

void launch_copy(const float* x, int64_t n, float* y, cudaStream_t stream) {
  if (n <= 0) return;
  copy_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(x, n, y);
  BRT_CUDA_CHECK_LAUNCH("copy");
}

void launch_copy_2d(const float* x, int64_t ldx, int rows, int64_t cols, float* y, int64_t ldy,
                    bool accumulate, cudaStream_t stream) {
  const int64_t total = int64_t{rows} * cols;
  if (total <= 0) return;
  copy_2d_kernel<<<elementwise_blocks(total), 256, 0, stream>>>(x, ldx, cols, total, y, ldy,
                                                                 accumulate);
  BRT_CUDA_CHECK_LAUNCH("copy_2d");
}

void launch_add_inplace(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(y, x, n);
  BRT_CUDA_CHECK_LAUNCH("add_inplace");
}

void launch_scale_inplace(float* x, int64_t n, float alpha, cudaStream_t stream) {
  if (n <= 0) return;
  scale_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(x, n, alpha);
  BRT_CUDA_CHECK_LAUNCH("scale_inplace");
}

void launch_add_rows_broadcast(float* out, const float* table, int rows_out, int rows_table,
                               int D, cudaStream_t stream) {
  const int64_t total = int64_t{rows_out} * D;
  if (total <= 0 || rows_table <= 0) return;
  add_rows_broadcast_kernel<<<elementwise_blocks(total), 256, 0, stream>>>(out, table, rows_out,
                                                                            rows_table, D);
  BRT_CUDA_CHECK_LAUNCH("add_rows_broadcast");
}

void launch_relu_forward(const float* x, int64_t n, float* y, cudaStream_t stream) {
  if (n <= 0) return;
  relu_forward_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(x, n, y);
  BRT_CUDA_CHECK_LAUNCH("relu_forward");
}

void launch_relu_backward(const float* y, const float* dy, int64_t n, float* dx,
                          cudaStream_t stream) {
  if (n <= 0) return;
  relu_backward_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(y, dy, n, dx);
  BRT_CUDA_CHECK_LAUNCH("relu_backward");
}

void launch_column_sum_accumulate(const float* dz, int n, int D, float* db, DeviceArena& scratch,
                                  cudaStream_t stream) {
  column_reduce_accumulate(n, D, MatrixEntry{dz, D}, PlainColumnSum{}, db, scratch, stream,
                           "column_sum_accumulate");
}

void launch_relu_backward_bf16(const void* y16, const float* dy, int64_t n, float* dx, cudaStream_t stream) {
  if (n <= 0) return;
  relu_backward_bf16_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(static_cast<const uint16_t*>(y16), dy, n, dx);
  BRT_CUDA_CHECK_LAUNCH("relu_backward_bf16");
}

void launch_convert_to_bf16(const float* src, int rows, int cols, int ld, void* dst,
                            cudaStream_t stream) {
  const int64_t total = int64_t{rows} * cols;
  if (total <= 0) return;
  convert_to_bf16_kernel<<<elementwise_blocks(total), 256, 0, stream>>>(
      src, rows, cols, ld, static_cast<__nv_bfloat16*>(dst));
  BRT_CUDA_CHECK_LAUNCH("convert_to_bf16");
}

}  // namespace brt::kernels::cuda
