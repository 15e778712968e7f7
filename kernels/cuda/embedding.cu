// Embedding lookup and its deterministic backward (model.md §1).
//
// Backward without float atomics: the (token, position) pairs are radix-sorted by token (a
// stable sort, so positions stay ascending inside a token), and the first position of each
// run of equal tokens OWNS that table row: it adds the run's dout rows in position order. The
// summation order is therefore exactly the CPU backend's (row order), whatever the schedule.
// Tokens of -1 (another TP rank's, backend.h) sort first as signed keys and own no row.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"

namespace brt::kernels::cuda {

namespace {

__global__ void embedding_forward_kernel(const int32_t* tokens, int n, const float* table, int D,
                                         float* out) {
  const int64_t total = int64_t{n} * D;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = e / D;
    const int col = static_cast<int>(e % D);
    const int32_t token = tokens[row];  // -1: another TP rank's token, a zero row
    out[e] = token < 0 ? 0.0f : table[static_cast<int64_t>(token) * D + col];
  }
}

__global__ void iota_kernel(int32_t* x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = i;
}

// One block per sorted position; only the first of a run of equal tokens does work.
__global__ void embedding_backward_runs_kernel(const int32_t* sorted_tokens,
                                               const int32_t* sorted_positions, int n,
                                               const float* dout, int D, float* dtable) {
  const int start = blockIdx.x;
  const int32_t token = sorted_tokens[start];
  if (token < 0 || (start > 0 && sorted_tokens[start - 1] == token)) return;  // -1: no row
  int end = start + 1;
  while (end < n && sorted_tokens[end] == token) ++end;
  float* dst = dtable + static_cast<int64_t>(token) * D;
  for (int j = threadIdx.x; j < D; j += blockDim.x) {
    float acc = dst[j];
    for (int p = start; p < end; ++p) acc += dout[static_cast<int64_t>(sorted_positions[p]) * D + j];
    dst[j] = acc;
  }
}

}  // namespace

void launch_embedding_forward(const int32_t* tokens, int n, const float* table, int D,
                              float* out, cudaStream_t stream) {
  const int64_t total = int64_t{n} * D;
  if (total <= 0) return;
  embedding_forward_kernel<<<elementwise_blocks(total), 256, 0, stream>>>(tokens, n, table, D,
                                                                           out);
  BRT_CUDA_CHECK_LAUNCH("embedding_forward");
}

void launch_embedding_backward(const int32_t* tokens, int n, const float* dout, int D,
                               float* dtable, DeviceArena& scratch, cudaStream_t stream) {
  if (n <= 0 || D <= 0) return;
  const char* who = "embedding_backward";
  int32_t* positions = scratch.allocate_array<int32_t>(n, who);
  int32_t* sorted_tokens = scratch.allocate_array<int32_t>(n, who);
  int32_t* sorted_positions = scratch.allocate_array<int32_t>(n, who);
  iota_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(positions, n);
  BRT_CUDA_CHECK_LAUNCH(who);
  std::size_t temp_bytes = 0;
  BRT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens, sorted_tokens,
                                                 positions, sorted_positions, n, 0, 32, stream));
  void* temp = scratch.allocate(temp_bytes, who);
  BRT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, sorted_tokens,
                                                 positions, sorted_positions, n, 0, 32, stream));
  embedding_backward_runs_kernel<<<n, 128, 0, stream>>>(sorted_tokens, sorted_positions, n, dout,
                                                        D, dtable);
  BRT_CUDA_CHECK_LAUNCH(who);
}

}  // namespace brt::kernels::cuda
