// The T5 bucket table a CudaBackend uploads at construction, for the checks that call the
// attention launchers directly (in the emulator host memory is device memory).
#pragma once
#include <vector>
#include "kernels/cuda/launchers.h"

inline brt::kernels::cuda::T5Buckets emu_t5_buckets() {
  using namespace brt::kernels::cuda;
  static const std::vector<int> table = t5_bucket_table(kT5TableDistances);
  return {table.data(), kT5TableDistances};
}
