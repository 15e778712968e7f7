// The cross-entropy over logits split by vocabulary (model.md §1 under tensor parallelism; the
// CPU version is kernels/cpu/xent_split.cpp): one block per row for each phase, row sums in
// double through the fixed-tree block reductions, the loss total summed in row order's fixed
// tree by a single block. The caller all-reduces the row statistics between the phases.
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"

namespace brt::kernels::cuda {

namespace {

constexpr int kSplitThreads = 256;

__global__ void split_max_kernel(const float* logits, int V, double* row_max) {
  __shared__ float shared[kWarp];
  const float* x = logits + static_cast<int64_t>(blockIdx.x) * V;
  float local = -INFINITY;
  for (int j = threadIdx.x; j < V; j += blockDim.x) local = fmaxf(local, x[j]);
  const float m = block_max(local, shared);
  if (threadIdx.x == 0) row_max[blockIdx.x] = static_cast<double>(m);
}

__global__ void split_sums_kernel(const float* logits, const int32_t* local_targets,
                                  const uint8_t* mask, int V, const double* row_max,
                                  double* sum_exp, double* target_logit) {
  __shared__ double shared[kWarp];
  const int r = blockIdx.x;
  const float* x = logits + static_cast<int64_t>(r) * V;
  const double m = row_max[r];
  double local = 0;
  for (int j = threadIdx.x; j < V; j += blockDim.x) local += exp(static_cast<double>(x[j]) - m);
  const double s = block_sum(local, shared);
  if (threadIdx.x == 0) {
    sum_exp[r] = s;
    const int32_t t = local_targets[r];
    target_logit[r] = mask[r] != 0 && t >= 0 ? static_cast<double>(x[t]) : 0.0;
  }
}

__global__ void split_finish_kernel(const float* logits, const int32_t* local_targets,
                                    const uint8_t* mask, int V, float grad_scale,
                                    const double* row_max, const double* sum_exp,
                                    const double* target_logit, float* dlogits,
                                    float* row_loss, double* row_nats) {
  const int r = blockIdx.x;
  const float* x = logits + static_cast<int64_t>(r) * V;
  float* d = dlogits + static_cast<int64_t>(r) * V;  // may alias x: each element read, then written
  if (mask[r] == 0) {
    for (int j = threadIdx.x; j < V; j += blockDim.x) d[j] = 0.0f;
    if (threadIdx.x == 0) {
      row_nats[r] = 0.0;
      row_loss[r] = 0.0f;
    }
    return;
  }
  const double log_z = log(sum_exp[r]) + row_max[r];
  const double scale = static_cast<double>(grad_scale);
  for (int j = threadIdx.x; j < V; j += blockDim.x)
    d[j] = static_cast<float>(scale * exp(static_cast<double>(x[j]) - log_z));
  __syncthreads();  // the target's element is written by one thread above
  if (threadIdx.x == 0) {
    const double loss = log_z - target_logit[r];
    row_nats[r] = loss;
    row_loss[r] = static_cast<float>(loss);
    if (local_targets[r] >= 0) d[local_targets[r]] -= grad_scale;
  }
}

constexpr int kTotalThreads = 1024;

__global__ void __launch_bounds__(kTotalThreads)
split_total_kernel(const double* row_nats, int n, double* total) {
  __shared__ double shared[kWarp];
  double local = 0;
  for (int r = threadIdx.x; r < n; r += blockDim.x) local += row_nats[r];
  local = block_sum(local, shared);
  if (threadIdx.x == 0) *total = local;
}

}  // namespace

void launch_xent_split_max(const float* logits, int n, int V, double* row_max,
                           cudaStream_t stream) {
  if (n <= 0 || V <= 0) return;
  split_max_kernel<<<n, kSplitThreads, 0, stream>>>(logits, V, row_max);
  BRT_CUDA_CHECK_LAUNCH("xent_split_max");
}

void launch_xent_split_sums(const float* logits, const int32_t* local_targets,
                            const uint8_t* mask, int n, int V, const double* row_max,
                            double* sum_exp, double* target_logit, cudaStream_t stream) {
  if (n <= 0 || V <= 0) return;
  split_sums_kernel<<<n, kSplitThreads, 0, stream>>>(logits, local_targets, mask, V, row_max,
                                                     sum_exp, target_logit);
  BRT_CUDA_CHECK_LAUNCH("xent_split_sums");
}

const double* launch_xent_split_finish(const float* logits, const int32_t* local_targets,
                                       const uint8_t* mask, int n, int V, float grad_scale,
                                       const double* row_max, const double* sum_exp,
                                       const double* target_logit, float* dlogits,
                                       float* row_loss, DeviceArena& scratch,
                                       cudaStream_t stream) {
  const char* who = "xent_split_finish";
  double* total = scratch.allocate_array<double>(1, who);
  double* row_nats = scratch.allocate_array<double>(n > 0 ? n : 1, who);
  if (n > 0 && V > 0) {
    split_finish_kernel<<<n, kSplitThreads, 0, stream>>>(logits, local_targets, mask, V,
                                                         grad_scale, row_max, sum_exp,
                                                         target_logit, dlogits, row_loss,
                                                         row_nats);
    BRT_CUDA_CHECK_LAUNCH(who);
  }
  split_total_kernel<<<1, kTotalThreads, 0, stream>>>(row_nats, n > 0 ? n : 0, total);
  BRT_CUDA_CHECK_LAUNCH(who);
  return total;
}

}  // namespace brt::kernels::cuda
