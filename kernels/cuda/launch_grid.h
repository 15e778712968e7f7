// The grids the CUDA launchers choose, host-only: device_common.cuh's kernels use them, and so
// does the planner's list of the optimizer's launches (kernels/cuda_optimizer_launches.cpp), so
// the threads it counts are the ones launched.
#pragma once

#include <algorithm>
#include <cstdint>

namespace brt::kernels::cuda {

// Grid for a grid-stride loop over n elements.
inline int elementwise_blocks(int64_t n, int threads = 256) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<int>(std::clamp<int64_t>(blocks, 1, 132 * 16));
}

// The optimizer's blocks (kernels/cuda/optim/optimizer.cu): one per chunk, or a grid-stride loop.
constexpr int kOptimThreads = 256;

}  // namespace brt::kernels::cuda
