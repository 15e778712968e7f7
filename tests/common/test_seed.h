// Seeds of randomised tests (replayable): the running test's seed comes from a fixed list,
// chosen by the test's name, so every run of a test draws the same inputs and a failure can be
// replayed; BRT_TEST_SEED=<n> overrides it (to replay a seed from a failure, or to explore
// others). The seed is printed when a test takes it, and callers put it into SCOPED_TRACE.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace brt::test {

inline uint32_t test_seed() {
  uint32_t seed = 0;
  if (const char* v = std::getenv("BRT_TEST_SEED")) {
    seed = uint32_t(std::strtoul(v, nullptr, 10));
  } else {
    static constexpr uint32_t kSeeds[] = {20261202u, 1234567u, 42u,     987654321u,
                                          31337u,    271828u,  314159u, 8675309u};
    std::string name = "unnamed";
    if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info())
      name = std::string(info->test_suite_name()) + "." + info->name();
    uint32_t h = 2166136261u;  // FNV-1a of the name picks the list entry
    for (const char c : name) h = (h ^ uint8_t(c)) * 16777619u;
    seed = kSeeds[h % (sizeof kSeeds / sizeof kSeeds[0])];
  }
  std::printf("[   SEED   ] %u (BRT_TEST_SEED=%u replays it)\n", seed, seed);
  return seed;
}

}  // namespace brt::test
