// Rank -> GPU binding by local rank (launch/run/gpu_binding.h). The arithmetic is
// checked here; on a machine without GPUs binding must bind nothing and say why.
#include <gtest/gtest.h>

#include "launch/run/gpu_binding.h"

namespace brt::launch {
namespace {

TEST(GpuBinding, EightRanksPerNodeTakeEightDistinctGpus) {
  for (int local = 0; local < 8; ++local) EXPECT_EQ(gpu_for_local_rank(local, 8), local);
}

TEST(GpuBinding, MoreRanksThanGpusShareThemRoundRobin) {
  EXPECT_EQ(gpu_for_local_rank(8, 8), 0);
  EXPECT_EQ(gpu_for_local_rank(5, 2), 1);
  EXPECT_EQ(gpu_for_local_rank(3, 1), 0);
}

TEST(GpuBinding, NoGpusMeansNoDevice) {
  EXPECT_EQ(gpu_for_local_rank(0, 0), -1);
  EXPECT_EQ(gpu_for_local_rank(-1, 4), -1);
}

TEST(GpuBinding, BindingWithoutAGpuBindsNothingAndSaysWhy) {
  const GpuBinding b = bind_gpu_for_local_rank(0);
  if (b.devices_on_node > 0) {
    EXPECT_EQ(b.device, 0);
    EXPECT_FALSE(b.description.empty());
  } else {
    EXPECT_EQ(b.device, -1);
    EXPECT_NE(b.description.find("none"), std::string::npos) << b.description;
  }
}

}  // namespace
}  // namespace brt::launch
