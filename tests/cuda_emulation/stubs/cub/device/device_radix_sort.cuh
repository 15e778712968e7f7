// Host emulation of the one cub call kernels/cuda/embedding.cu makes: a stable sort by key.
#pragma once
#include <algorithm>
#include <numeric>
#include <vector>
#include "cuda_runtime.h"
namespace cub {
struct DeviceRadixSort {
  template <typename K, typename V>
  static cudaError_t SortPairs(void* temp, size_t& temp_bytes, const K* keys_in, K* keys_out,
                               const V* values_in, V* values_out, int n, int, int, cudaStream_t stream) {
    if (temp == nullptr) { temp_bytes = 16; return cudaSuccess; }
    if (temp_bytes < 16) return emu::fail(cudaErrorInvalidValue, "cub::DeviceRadixSort: temporary storage smaller than it asked for");
    return emu::enqueue(stream, emu::NodeKind::kKernel, "cub::DeviceRadixSort", [=] {  // in stream order
      std::vector<int> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys_in[a] < keys_in[b]; });
      for (int i = 0; i < n; ++i) { keys_out[i] = keys_in[order[i]]; values_out[i] = values_in[order[i]]; }
    });
  }
};
}  // namespace cub
