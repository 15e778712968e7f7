// Which checkpoints count as good (launch/train/checkpoint/checkpoint_trust.h): provisional when saved,
// confirmed after checkpoint.confirm_steps applied steps, recomputed by a later start from the
// checkpoints' own step and skip counts, set aside unconfirmed when the step guard gives up.
#include <gtest/gtest.h>

#include <fstream>

#include "checkpoint/checkpoint.h"
#include "launch/train/checkpoint/checkpoint_trust.h"

namespace brt::launch {
namespace {

namespace fs = std::filesystem;
namespace ck = brt::checkpoint;

struct TempDir {
  fs::path path;
  TempDir() {
    char name[] = "/tmp/brt-trust-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path file(int64_t step) const { return path / ck::checkpoint_file_name(step); }
};

// A checkpoint whose step guard had skipped `skipped` steps in all (StepGuard::counters()[1]).
void write_checkpoint(const TempDir& dir, int64_t step, int64_t skipped) {
  ck::WriterOptions options;
  options.keep_last = 0;
  ck::CheckpointWriter writer(dir.path, step, MPI_COMM_SELF, options);
  ck::Metadata meta;
  meta.step = step;
  writer.set_metadata(meta);
  writer.write_whole<float>("/model/w", {2}, std::vector<float>{1.0f, 2.0f});
  writer.write_whole<int64_t>("/data/guard_counters", {8}, std::vector<int64_t>{0, skipped, 0, 0, 0, 0, 0, 0});
  writer.commit();
}

TEST(CheckpointTrust, ConfirmsAfterAppliedStepsOnlyOnceCommitted) {
  TempDir dir;
  ck::GoodCheckpoints good;
  CheckpointTrust trust(dir.path, 2, good, true);
  trust.saving(dir.file(5));
  EXPECT_TRUE(good.provisional(dir.file(5)));  // before its commit prunes
  EXPECT_TRUE(trust.saved(dir.file(5), 5, true).empty());
  EXPECT_TRUE(trust.step_applied().empty());   // 1 of 2; a skipped step in between counts for nothing
  EXPECT_EQ(trust.step_applied(), std::vector<int64_t>({5}));
  EXPECT_EQ(trust.last_confirmed(), dir.file(5));
  EXPECT_FALSE(good.provisional(dir.file(5)));
  // A background save whose G steps pass before its commit is confirmed at the commit.
  trust.saving(dir.file(7));
  EXPECT_TRUE(trust.step_applied().empty());
  EXPECT_TRUE(trust.step_applied().empty());
  EXPECT_EQ(trust.saved(dir.file(7), 7, true), std::vector<int64_t>({7}));
  // A failed or refused save leaves nothing behind.
  trust.saving(dir.file(9));
  EXPECT_TRUE(trust.saved(dir.file(9), 9, false).empty());
  EXPECT_FALSE(good.provisional(dir.file(9)));
  EXPECT_TRUE(trust.give_up().empty());
  EXPECT_EQ(trust.last_confirmed(), dir.file(7));
}

TEST(CheckpointTrust, GivingUpSetsTheProvisionalOnesAsideAndRepointsLatest) {
  TempDir dir;
  for (int64_t step : {4, 5, 6}) std::ofstream(dir.file(step)) << "x";
  ck::write_latest_pointer(dir.path, dir.file(6).filename().string());
  ck::GoodCheckpoints good;
  CheckpointTrust trust(dir.path, 1, good, true);
  trust.saving(dir.file(4));
  trust.saved(dir.file(4), 4, true);
  trust.saving(dir.file(5));
  trust.saved(dir.file(5), 5, true);
  EXPECT_EQ(trust.step_applied(), std::vector<int64_t>({4, 5}));  // both: 1 step each
  trust.saving(dir.file(6));
  trust.saved(dir.file(6), 6, true);
  const std::vector<std::string> notes = trust.give_up();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("set aside unconfirmed checkpoint " + dir.file(6).string()), std::string::npos) << notes[0];
  EXPECT_TRUE(fs::exists(dir.file(6).string() + ck::kUnconfirmedSuffix));
  EXPECT_FALSE(fs::exists(dir.file(6)));
  EXPECT_EQ(ck::read_latest_pointer(dir.path), dir.file(5));
  EXPECT_EQ(trust.last_confirmed(), dir.file(5));
  // Another directory's file (a --resume FILE elsewhere) is never renamed, only forgotten.
  TempDir other;
  std::ofstream(other.file(3)) << "x";
  CheckpointTrust elsewhere(dir.path, 1, good, true);
  elsewhere.saving(other.file(3));
  elsewhere.saved(other.file(3), 3, true);
  EXPECT_TRUE(elsewhere.give_up().empty());
  EXPECT_TRUE(fs::exists(other.file(3)));
}

TEST(CheckpointTrust, ALaterStartRecomputesConfirmationFromStepsAndSkips) {
  // Steps 3 and 6 were skipped: ckpt-2 (0 skipped), ckpt-4 and ckpt-5 (1), the start ckpt-7 (2).
  // With G = 2: from 5, steps 7 only (6 skipped) -> provisional; from 4, steps 5 and 7 ->
  // confirmed, and with it everything older.
  TempDir dir;
  write_checkpoint(dir, 2, 0);
  write_checkpoint(dir, 4, 1);
  write_checkpoint(dir, 5, 1);
  write_checkpoint(dir, 7, 2);
  ck::GoodCheckpoints good;
  CheckpointTrust trust(dir.path, 2, good, true);
  trust.start(dir.file(7), 7, 2, nullptr);
  EXPECT_EQ(trust.last_confirmed(), dir.file(4));
  EXPECT_TRUE(good.provisional(dir.file(5)) && good.provisional(dir.file(7)));
  EXPECT_FALSE(good.provisional(dir.file(4)) || good.provisional(dir.file(2)));
  EXPECT_EQ(trust.step_applied(), std::vector<int64_t>({5}));  // 5: 2 steps; 7: 1
  EXPECT_EQ(trust.step_applied(), std::vector<int64_t>({7}));
  EXPECT_EQ(trust.last_confirmed(), dir.file(7));
}

}  // namespace
}  // namespace brt::launch
