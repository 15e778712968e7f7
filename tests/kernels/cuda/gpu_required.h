// Whether a GPU test may skip (tests/kernels/cuda; docs/gpu.md "Running the GPU checks"). Without a
// usable device a GPU test skips and says why (the CUDA error when the runtime failed, not just
// "no device"); with BRT_REQUIRE_GPU=1 in the environment (scripts/gpu-check.sh sets it when
// nvidia-smi lists a GPU) it FAILS instead, so a GPU the runtime cannot use is never reported
// as a pass. And every random input comes from a seed of a fixed list, printed, so a failure
// can be replayed (BRT_TEST_SEED overrides).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "kernels/cuda/cuda_backend.h"
#include "tests/common/test_seed.h"

namespace brt::kernels::cuda::test {

inline bool gpu_required() {
  const char* v = std::getenv("BRT_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

// BRT_SMALL_SHAPES=1: the kernel tests use their smallest shapes only (compute-sanitizer runs,
// which are 10-100x slower).
inline bool small_shapes() {
  const char* v = std::getenv("BRT_SMALL_SHAPES");
  return v != nullptr && std::string(v) == "1";
}

// The seed of the running test (tests/common/test_seed.h: a fixed list by the test's name,
// printed, BRT_TEST_SEED overrides).
inline uint32_t test_seed() { return brt::test::test_seed(); }

}  // namespace brt::kernels::cuda::test

// In SetUp() or a test body: skip (or, under BRT_REQUIRE_GPU=1, fail) naming why no device is
// usable.
#define BRT_REQUIRE_CUDA_DEVICE()                                                          \
  do {                                                                                     \
    const ::brt::kernels::cuda::CudaDeviceQuery brt_query =                                \
        ::brt::kernels::cuda::query_cuda_devices();                                        \
    if (brt_query.count == 0) {                                                            \
      if (::brt::kernels::cuda::test::gpu_required())                                      \
        GTEST_FAIL() << "BRT_REQUIRE_GPU=1 but " << brt_query.describe();                  \
      GTEST_SKIP() << brt_query.describe() << ": GPU test skipped";                       \
    }                                                                                      \
  } while (0)
