// Plain functions of data parallelism, no MPI: the bucket plan (contiguous, in hook order,
// covering the arena once, within the size cap), the ZeRO-1 partition (contiguous, whole
// parameters, balanced), and the optimizer-state count of model.md §10c.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/data_parallel.h"
#include "parallel/grad_buckets.h"

namespace brt::testing {
namespace {

TEST(GradBucketPlan, CoversTheArenaOnceInHookOrderWithinTheCap) {
  // embed [0,100) | layer0 [100,400) | layer1 [400,450) | layer2 [450,1000) | norm [1000,1010)
  const std::vector<std::pair<int64_t, int64_t>> layers = {{100, 400}, {400, 450}, {450, 1000}};
  for (int64_t cap : {1, 7, 64, 128, 300, 5000}) {
    const auto buckets = parallel::plan_grad_buckets(1010, layers, cap);
    std::vector<int> covered(1010, 0);
    int last_ready_rank = -1;  // hooks run 2, 1, 0, then -1
    for (const auto& b : buckets) {
      ASSERT_LT(b.begin, b.end);
      EXPECT_LE(b.end - b.begin, cap);
      for (int64_t i = b.begin; i < b.end; ++i) ++covered[size_t(i)];
      const int rank = b.ready_after == -1 ? 3 : 2 - b.ready_after;
      EXPECT_GE(rank, last_ready_rank) << "buckets must come in hook order";
      last_ready_rank = rank;
      // Everything in the bucket is final once its hook ran.
      for (int64_t i = b.begin; i < b.end; ++i) {
        int layer = -1;
        for (int l = 0; l < 3; ++l)
          if (i >= layers[size_t(l)].first && i < layers[size_t(l)].second) layer = l;
        if (b.ready_after != -1) {
          EXPECT_GE(layer, b.ready_after) << "element " << i << " cap " << cap;
        }
      }
    }
    EXPECT_TRUE(std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; })) << cap;
  }
  // A cap above the arena: the layers merge into one bucket, ready after layer 0; the ranges
  // outside every layer (final norm, then embedding) come last, ready at -1.
  const auto one = parallel::plan_grad_buckets(1010, layers, 5000);
  ASSERT_EQ(one.size(), 3u);
  EXPECT_EQ(one[0].begin, 100);
  EXPECT_EQ(one[0].end, 1000);
  EXPECT_EQ(one[0].ready_after, 0);
  EXPECT_EQ(one[1].begin, 1000);
  EXPECT_EQ(one[1].ready_after, -1);
  EXPECT_EQ(one[2].begin, 0);
  EXPECT_EQ(one[2].end, 100);
  EXPECT_EQ(one[2].ready_after, -1);
}

TEST(ZeroPartition, ContiguousWholeParametersBalanced) {
  const std::vector<int64_t> numels = {100, 10, 10, 30, 30, 10, 10, 100};
  const auto p = core::partition_parameters(numels, 2);
  EXPECT_EQ(p.owner, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  ASSERT_EQ(p.rank_ranges.size(), 2u);
  EXPECT_EQ(p.rank_ranges[0], (std::pair<int64_t, int64_t>{0, 150}));
  EXPECT_EQ(p.rank_ranges[1], (std::pair<int64_t, int64_t>{150, 300}));
  const auto four = core::partition_parameters(numels, 4);
  for (size_t i = 1; i < numels.size(); ++i) EXPECT_GE(four.owner[i], four.owner[i - 1]);
  EXPECT_EQ(four.rank_ranges.back().second, 300);
  const auto many = core::partition_parameters({5}, 3);  // more ranks than parameters
  ASSERT_EQ(many.rank_ranges.size(), 3u);
  int64_t covered = 0;
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(many.rank_ranges[size_t(r)].first, covered);
    covered = many.rank_ranges[size_t(r)].second;
    if (r == many.owner[0]) {
      EXPECT_EQ(many.rank_ranges[size_t(r)].second - many.rank_ranges[size_t(r)].first, 5);
    }
  }
  EXPECT_EQ(covered, 5);
}

TEST(OptimizerStateCount, FollowsModel10c) {
  std::vector<core::ParamSpec> specs = {{"a", {256, 512}, {}}, {"b", {512}, {}}, {"c", {4, 300, 200}, {}}};
  core::OptimConfig adamw;
  adamw.kind = core::OptimKind::kAdamW;
  adamw.total_steps = 10;
  EXPECT_EQ(core::expected_optimizer_state_elems(adamw, specs, {}), 2 * (256 * 512 + 512 + 4 * 300 * 200));
  EXPECT_EQ(core::expected_optimizer_state_elems(adamw, specs, {false, true, false}), 2 * 512);
  core::OptimConfig ada;
  ada.kind = core::OptimKind::kAdafactor;
  ada.total_steps = 10;
  ada.min_dim_to_factor = 128;
  // a factored: m + R (256) + C (512); b: m + v; c factored over (300, 200): m + 4*200 + 4*300.
  EXPECT_EQ(core::expected_optimizer_state_elems(ada, specs, {}),
            (256 * 512 + 256 + 512) + 2 * 512 + (4 * 300 * 200 + 4 * 200 + 4 * 300));
  // Below min_dim_to_factor an axis is not factored: [64, 512] keeps m and a full v; an owned
  // mask counts only the owned tensors; AdamW is m and v whatever the shape.
  const std::vector<core::ParamSpec> narrow = {{"d", {64, 512}, {}}};
  EXPECT_EQ(core::expected_optimizer_state_elems(ada, narrow, {}), 2 * 64 * 512);
  EXPECT_EQ(core::expected_optimizer_state_elems(ada, specs, {true, false, false}), 256 * 512 + 256 + 512);
}

}  // namespace
}  // namespace brt::testing
