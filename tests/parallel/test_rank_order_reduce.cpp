// The left-to-right reduction that fixes the MPI backend's summation order.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "parallel/rank_order_reduce.h"

namespace bp = brt::parallel;

namespace {

template <typename T>
std::vector<const std::byte*> as_sources(const std::vector<std::vector<T>>& v) {
  std::vector<const std::byte*> s;
  for (const auto& x : v) s.push_back(reinterpret_cast<const std::byte*>(x.data()));
  return s;
}

}  // namespace

TEST(RankOrderReduce, SumsLeftToRight) {
  // (1e16 + 1) + -1e16 == 0 in double (1e16 + 1 rounds back to 1e16); any other order gives 1.
  const std::vector<std::vector<double>> src{{1e16, 1.0}, {1.0, 1e16}, {-1e16, -1e16}};
  std::vector<double> out(2);
  bp::reduce_in_rank_order(bp::DataType::kFloat64, bp::ReduceOp::kSum, as_sources(src),
                           reinterpret_cast<std::byte*>(out.data()), 2);
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[1], 0.0);  // (1 + 1e16) + -1e16: also 0 — the fold is per element, in rank order
}

TEST(RankOrderReduce, LongBuffersAcrossTilesAndInPlace) {
  const int64_t n = 5000;  // several tiles plus a remainder
  std::vector<std::vector<float>> src(3, std::vector<float>(n));
  for (int64_t i = 0; i < n; ++i) {
    src[0][i] = 0.1f * static_cast<float>(i);
    src[1][i] = 1e-3f * static_cast<float>(i % 17);
    src[2][i] = -3.0f;
  }
  std::vector<float> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = (src[0][i] + src[1][i]) + src[2][i];
  auto sources = as_sources(src);
  bp::reduce_in_rank_order(bp::DataType::kFloat32, bp::ReduceOp::kSum, sources,
                           reinterpret_cast<std::byte*>(src[1].data()), n);  // out aliases a source
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(src[1][i], want[i]) << i;
}

TEST(RankOrderReduce, MaxForIntegersAndNanPropagatesFromAnyRank) {
  const std::vector<std::vector<int64_t>> ints{{3, -5}, {7, -9}, {1, -2}};
  std::vector<int64_t> out(2);
  bp::reduce_in_rank_order(bp::DataType::kInt64, bp::ReduceOp::kMax, as_sources(ints),
                           reinterpret_cast<std::byte*>(out.data()), 2);
  EXPECT_EQ(out, (std::vector<int64_t>{7, -2}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::vector<float>> f{{1.0f, nan}, {nan, 2.0f}, {0.0f, 3.0f}};
  std::vector<float> fo(2);
  bp::reduce_in_rank_order(bp::DataType::kFloat32, bp::ReduceOp::kMax, as_sources(f),
                           reinterpret_cast<std::byte*>(fo.data()), 2);
  EXPECT_TRUE(std::isnan(fo[0]));
  EXPECT_TRUE(std::isnan(fo[1]));
}
