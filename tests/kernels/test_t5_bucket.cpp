// T5 relative-position buckets (model.md §3.3) against its table of each bucket's first distance.
#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "reference.h"

namespace brt::kernels::test {
namespace {

TEST(T5Bucket, FirstDistanceOfEachBucket) {
  const std::pair<int, int> first[] = {{19, 17}, {21, 18}, {24, 19}, {27, 20}, {31, 21},
                                       {35, 22}, {40, 23}, {46, 24}, {52, 25}, {59, 26},
                                       {67, 27}, {77, 28}, {87, 29}, {99, 30}, {113, 31}};
  for (auto [distance, bucket] : first) {
    EXPECT_EQ(t5_bucket(distance), bucket) << "distance " << distance;
    EXPECT_EQ(t5_bucket(distance - 1), bucket - 1) << "distance " << distance - 1;
  }
  for (int n = 1; n <= 16; ++n) EXPECT_EQ(t5_bucket(n), n);
  for (int n : {113, 128, 200, 512, 4096, 1 << 20}) EXPECT_EQ(t5_bucket(n), 31) << n;
}

TEST(T5Bucket, EveryDistanceMatchesTable) {
  for (int n = 1; n <= 1024; ++n) EXPECT_EQ(t5_bucket(n), reference_t5_bucket(n)) << n;
}

}  // namespace
}  // namespace brt::kernels::test
