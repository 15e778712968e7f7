// The DP x TP grid arithmetic and the layout refusal messages (parallel/layout.h).
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "parallel/layout.h"

namespace bp = brt::parallel;

TEST(GridLayout, TpGroupsAreConsecutiveAndDpGroupsStrided) {
  const bp::GridLayout g{8, 2};
  EXPECT_EQ(g.dp_cp(), 4);
  EXPECT_EQ(g.tp_group_members(5), (std::vector<int>{4, 5}));
  EXPECT_EQ(g.dp_cp_group_members(5), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(g.tp_rank(5), 1);
  EXPECT_EQ(g.dp_cp_rank(5), 2);
  EXPECT_EQ(g.tp_group_name(5), "tp[2]");
  EXPECT_EQ(g.dp_cp_group_name(5), "dp_cp[1]");
}

TEST(GridLayout, GroupsPartitionTheWorldAndRankPositionsMatch) {
  for (auto [world, tp] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}, {2, 2}, {4, 2}, {4, 4}, {12, 3}}) {
    const bp::GridLayout g{world, tp};
    std::set<std::vector<int>> tp_groups, dp_groups;
    for (int r = 0; r < world; ++r) {
      const auto t = g.tp_group_members(r);
      const auto d = g.dp_cp_group_members(r);
      ASSERT_EQ(static_cast<int>(t.size()), tp);
      ASSERT_EQ(static_cast<int>(d.size()), world / tp);
      EXPECT_EQ(t[g.tp_rank(r)], r);  // group rank = position in the ascending member list
      EXPECT_EQ(d[g.dp_cp_rank(r)], r);
      tp_groups.insert(t);
      dp_groups.insert(d);
    }
    EXPECT_EQ(static_cast<int>(tp_groups.size()), world / tp);
    EXPECT_EQ(static_cast<int>(dp_groups.size()), tp);
  }
}

TEST(Layout, ConsistentLayoutsPass) {
  EXPECT_EQ(bp::layout_problem(4, 2), "");
  const std::vector<bp::SplitByTp> sizes{{"model.heads", 8}, {"model.d_ff", 1024}};
  EXPECT_EQ(bp::layout_problem(8, 4, sizes), "");
  EXPECT_NO_THROW(bp::validate_layout(64, 8, sizes));
}

TEST(Layout, WorldNotDivisibleByTpIsRefusedWithTheValuesThatFit) {
  const std::string m = bp::layout_problem(6, 4);
  EXPECT_NE(m.find("--tp 4 does not fit"), std::string::npos) << m;
  EXPECT_NE(m.find("6 ranks are not divisible by 4"), std::string::npos) << m;
  EXPECT_NE(m.find("Values of --tp that fit 6 ranks: 1, 2, 3, 6."), std::string::npos) << m;
  EXPECT_THROW(bp::validate_layout(6, 4), bp::LayoutError);
}

TEST(Layout, TpBelowOneIsRefused) {
  EXPECT_NE(bp::layout_problem(4, 0).find("--tp must be at least 1"), std::string::npos);
  EXPECT_NE(bp::layout_problem(4, -2).find("--tp must be at least 1"), std::string::npos);
}

TEST(Layout, ModelSizesNotDivisibleAreEachNamed) {
  const std::vector<bp::SplitByTp> sizes{{"model.heads", 6}, {"model.d_ff", 1002}, {"vocab", 4096}};
  const std::string m = bp::layout_problem(8, 4, sizes);
  EXPECT_NE(m.find("model.heads = 6 is not divisible by 4"), std::string::npos) << m;
  EXPECT_NE(m.find("model.d_ff = 1002 is not divisible by 4"), std::string::npos) << m;
  EXPECT_EQ(m.find("vocab"), std::string::npos) << m;  // 4096 is fine
  EXPECT_NE(m.find("Values of --tp that fit 8 ranks and these sizes: 1, 2."), std::string::npos) << m;
  try {
    bp::validate_layout(8, 4, sizes);
    FAIL() << "expected LayoutError";
  } catch (const bp::LayoutError& e) {
    EXPECT_EQ(std::string(e.what()), m);
  }
}
