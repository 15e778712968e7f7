// Retention that keeps good runs: a good ckpt-10 beside damaged ckpt-20 and
// ckpt-30. Resume sets the damaged ones aside and repoints `latest`; later saves with keep = 2
// or keep = 1 never delete themselves or the newest good checkpoint; a prune that meets an
// unverified damaged file sets it aside instead of counting it.
#include <gtest/gtest.h>

#include "tests/checkpoint/test_util.h"

namespace brt::checkpoint {
namespace {
using namespace brt::checkpoint::testing;

std::vector<int64_t> committed_steps(const fs::path& dir) {
  std::vector<int64_t> steps;
  for (const auto& e : list_checkpoints(dir)) steps.push_back(e.step);
  return steps;
}

std::string latest_name(const fs::path& dir) {
  const auto latest = read_latest_pointer(dir);
  return latest ? latest->filename().string() : "";
}

// ckpt-10 good; ckpt-20 with a flipped data byte; ckpt-30 truncated.
void good_then_two_damaged(const fs::path& dir) {
  WriterOptions keep_all;
  keep_all.keep_last = 0;
  for (int64_t step : {10, 20, 30}) write_simple(dir, step, keep_all);
  const fs::path f20 = dir / checkpoint_file_name(20), f30 = dir / checkpoint_file_name(30);
  flip_byte(f20, dataset_data_offset(f20, "/model/big") + 100);
  fs::resize_file(f30, fs::file_size(f30) / 2);
}

TEST(Retention, ResumeSetsDamagedAsideAndLaterSavesKeepTheGoodOnes) {
  for (int keep : {1, 2}) {
    ScratchDir dir;
    good_then_two_damaged(dir.path());
    GoodCheckpoints good;
    const LatestGood found = find_latest_good(dir.path(), MPI_COMM_SELF, &good);
    ASSERT_TRUE(found.path.has_value());
    EXPECT_EQ(found.step, 10);
    EXPECT_EQ(found.set_aside.size(), 2u);
    EXPECT_EQ(committed_steps(dir.path()), std::vector<int64_t>({10}));
    EXPECT_EQ(latest_name(dir.path()), "ckpt-00000010.h5");
    EXPECT_EQ(list_set_aside(dir.path()).size(), 2u);

    WriterOptions options;
    options.keep_last = keep;
    options.good = &good;
    for (int64_t step : {11, 12, 13}) {
      write_simple(dir.path(), step, options);
      const auto steps = committed_steps(dir.path());
      ASSERT_FALSE(steps.empty());
      EXPECT_EQ(steps.front(), step) << "keep " << keep << ": the save just made was pruned";
      EXPECT_EQ(int(steps.size()), std::min(keep, int(step - 10) + 1)) << "keep " << keep;
      EXPECT_EQ(latest_name(dir.path()), checkpoint_file_name(step));
    }
    // The set-aside files are still there (never pruned, never chosen) and resume picks 13.
    EXPECT_EQ(list_set_aside(dir.path()).size(), 2u);
    EXPECT_EQ(find_latest_good(dir.path()).step, 13);
  }
}

TEST(Retention, PruneSetsAsideUnverifiedDamagedCheckpointsInsteadOfCountingThem) {
  // No resume before the save (a writer without a known-good set): the damaged ckpt-20 and
  // ckpt-30 have higher steps than the new ckpt-15, yet the new save and ckpt-10 are kept.
  ScratchDir dir;
  good_then_two_damaged(dir.path());
  WriterOptions options;
  options.keep_last = 2;
  write_simple(dir.path(), 15, options);
  EXPECT_EQ(committed_steps(dir.path()), std::vector<int64_t>({15, 10}));
  EXPECT_EQ(list_set_aside(dir.path()).size(), 2u);
  EXPECT_EQ(latest_name(dir.path()), "ckpt-00000015.h5");
  for (const auto& e : list_checkpoints(dir.path())) EXPECT_TRUE(verify(e.path).ok) << e.path;
}

TEST(Retention, ProvisionalCheckpointsAreNeitherCountedNorDeleted) {
  // Saves made while a run may be diverging are provisional (launch/train/checkpoint/checkpoint_trust.h): however
  // many follow, keep = 2 keeps the two newest confirmed checkpoints from before them.
  ScratchDir dir;
  GoodCheckpoints good;
  WriterOptions options;
  options.keep_last = 2;
  options.good = &good;
  const auto file = [&](int64_t step) { return dir.path() / checkpoint_file_name(step); };
  for (int64_t step : {1, 2, 3}) write_simple(dir.path(), step, options);
  for (int64_t step : {4, 5, 6}) {
    good.mark_provisional(file(step));
    write_simple(dir.path(), step, options);
  }
  EXPECT_EQ(committed_steps(dir.path()), std::vector<int64_t>({6, 5, 4, 3, 2}));
  good.confirm(file(4));
  good.mark_provisional(file(7));
  write_simple(dir.path(), 7, options);
  EXPECT_EQ(committed_steps(dir.path()), std::vector<int64_t>({7, 6, 5, 4, 3}));
  EXPECT_TRUE(good.provisional(file(7)) && !good.provisional(file(4)));
  // Set aside unconfirmed: out of every listing, listed as set aside, never pruned.
  const fs::path aside = set_aside(file(7), kUnconfirmedSuffix);
  EXPECT_EQ(aside.filename().string(), "ckpt-00000007.h5.unconfirmed");
  EXPECT_EQ(list_set_aside(dir.path()), std::vector<fs::path>({aside}));
  good.forget(file(7));
  EXPECT_FALSE(good.provisional(file(7)) || good.contains(file(7)));
}

TEST(Retention, AllDamagedIsReportedAndNothingIsRenamed) {
  ScratchDir dir;
  good_then_two_damaged(dir.path());
  const fs::path f10 = dir.path() / checkpoint_file_name(10);
  fs::resize_file(f10, fs::file_size(f10) - 1000);
  GoodCheckpoints good;
  const LatestGood found = find_latest_good(dir.path(), MPI_COMM_SELF, &good);
  EXPECT_FALSE(found.path.has_value());
  EXPECT_EQ(found.damaged.size(), 3u);
  EXPECT_TRUE(found.set_aside.empty());
  EXPECT_EQ(committed_steps(dir.path()), std::vector<int64_t>({30, 20, 10}));
}

TEST(Retention, SetAsideNeverOverwritesAnEarlierSetAsideFile) {
  ScratchDir dir;
  write_simple(dir.path(), 5);
  const fs::path file = dir.path() / checkpoint_file_name(5);
  const fs::path first = set_aside_damaged(file);
  write_simple(dir.path(), 5);
  const fs::path second = set_aside_damaged(file);
  EXPECT_NE(first, second);
  EXPECT_TRUE(fs::exists(first));
  EXPECT_TRUE(fs::exists(second));
  EXPECT_EQ(list_set_aside(dir.path()).size(), 2u);
}

}  // namespace
}  // namespace brt::checkpoint
