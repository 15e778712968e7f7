// Fused softmax cross-entropy and its gradient over the output logits (model.md §1): one block
// per row; row sums in double; the total is summed in a fixed order by a single block.
// Targets are validated on the device: the first bad row is recorded (integer atomicMin, an
// order-independent result) beside the total, and whoever reads the total throws
// (bad_target_message, kernels/backend.h): the backend at once, or Model::step_nats after a
// deferred (graph-captured) loss.
#include <climits>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"

namespace brt::kernels::cuda {

namespace {

constexpr int kXentThreads = 256;

__global__ void __launch_bounds__(kXentThreads)
xent_rows_kernel(const float* logits, const int32_t* targets, const uint8_t* mask, int V,
                 float grad_scale_value, const float* grad_scale_device, float* dlogits,
                 float* row_loss, double* row_nats, int* first_bad_row) {
  __shared__ float shared_max[kWarp];
  __shared__ double shared_sum[kWarp];
  const int r = blockIdx.x;
  const float* x = logits + static_cast<int64_t>(r) * V;
  float* dx = dlogits + static_cast<int64_t>(r) * V;  // may alias x
  if (mask[r] == 0) {
    for (int j = threadIdx.x; j < V; j += blockDim.x) dx[j] = 0.0f;
    if (threadIdx.x == 0) {
      row_nats[r] = 0.0;
      row_loss[r] = 0.0f;
    }
    return;
  }
  // The scale from device memory when staged there (a CUDA graph replays it with each step's).
  const float grad_scale = grad_scale_device != nullptr ? *grad_scale_device : grad_scale_value;
  const int target = targets[r];
  if (target < 0 || target >= V) {  // uniform over the block
    if (threadIdx.x == 0) {
      atomicMin(first_bad_row, r);
      row_nats[r] = 0.0;
      row_loss[r] = 0.0f;
    }
    return;
  }
  const float x_target = x[target];  // read before any thread overwrites dx (block_max syncs)
  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < V; j += blockDim.x) local_max = fmaxf(local_max, x[j]);
  const float row_max = block_max(local_max, shared_max);
  double local_sum = 0;
  for (int j = threadIdx.x; j < V; j += blockDim.x) {
    const float e = expf(x[j] - row_max);
    dx[j] = e;
    local_sum += static_cast<double>(e);
  }
  const double sum = block_sum(local_sum, shared_sum);
  const float coef = static_cast<float>(static_cast<double>(grad_scale) / sum);
  for (int j = threadIdx.x; j < V; j += blockDim.x) dx[j] *= coef;
  __syncthreads();
  if (threadIdx.x == 0) {
    const double nats = log(sum) + static_cast<double>(row_max) - x_target;
    row_nats[r] = nats;
    row_loss[r] = static_cast<float>(nats);
    dx[target] -= grad_scale;
  }
}

constexpr int kSumThreads = 1024;

// result[0] = Σ row_nats (fixed order), result[1] = the first bad row or -1.
__global__ void __launch_bounds__(kSumThreads)
sum_rows_kernel(const double* row_nats, int n, const int* first_bad_row, double* result) {
  __shared__ double shared[kWarp];
  double local = 0;
  for (int r = threadIdx.x; r < n; r += blockDim.x) local += row_nats[r];
  local = block_sum(local, shared);
  if (threadIdx.x == 0) {
    result[0] = local;
    result[1] = *first_bad_row == INT_MAX ? -1.0 : double(*first_bad_row);
  }
}

__global__ void init_flag_kernel(int* flag) { *flag = INT_MAX; }

}  // namespace

const double* launch_softmax_xent(const float* logits, const int32_t* targets,
                                  const uint8_t* mask, int n, int V, float grad_scale,
                                  const float* grad_scale_device, float* dlogits, float* row_loss,
                                  DeviceArena& scratch, cudaStream_t stream, double* result_out) {
  const char* who = "softmax_xent_forward_backward";
  double* result = result_out != nullptr ? result_out : scratch.allocate_array<double>(2, who);
  int* first_bad_row = scratch.allocate_array<int>(1, who);
  double* row_nats = scratch.allocate_array<double>(n > 0 ? n : 1, who);
  init_flag_kernel<<<1, 1, 0, stream>>>(first_bad_row);
  BRT_CUDA_CHECK_LAUNCH(who);
  if (n > 0 && V > 0) {
    xent_rows_kernel<<<n, kXentThreads, 0, stream>>>(logits, targets, mask, V, grad_scale,
                                                     grad_scale_device, dlogits, row_loss,
                                                     row_nats, first_bad_row);
    BRT_CUDA_CHECK_LAUNCH(who);
  }
  sum_rows_kernel<<<1, kSumThreads, 0, stream>>>(row_nats, n > 0 ? n : 0, first_bad_row, result);
  BRT_CUDA_CHECK_LAUNCH(who);
  return result;
}

}  // namespace brt::kernels::cuda
