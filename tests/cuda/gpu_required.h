// Whether a GPU test may skip (tests/cuda; docs/gpu.md "Running the GPU checks"). Without a
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

// The seed of the running test: BRT_TEST_SEED if set, else an entry of a fixed list chosen by
// the test's name (FNV-1a), so every test has its own stream and every run the same one.
inline uint32_t test_seed() {
  if (const char* v = std::getenv("BRT_TEST_SEED")) return uint32_t(std::strtoul(v, nullptr, 10));
  static constexpr uint32_t kSeeds[] = {20261202u, 1234567u, 42u, 987654321u,
                                        31337u,    271828u,  314159u, 8675309u};
  std::string name = "unnamed";
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info())
    name = std::string(info->test_suite_name()) + "." + info->name();
  uint32_t h = 2166136261u;
  for (const char c : name) h = (h ^ uint8_t(c)) * 16777619u;
  return kSeeds[h % (sizeof kSeeds / sizeof kSeeds[0])];
}

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
