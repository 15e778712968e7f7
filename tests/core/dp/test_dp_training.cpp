// Training with data parallelism through the trainer (launch/train/trainer.h), against one process
// on the same global batch of kGlobalStreams streams:
//  (b) 20 steps track the single-process loss curve (<= 1e-4 relative);
//  (c) ZeRO-1 gives bit-identical weights and optimizer state to plain DP after 10 steps;
//  (d) two DP runs are bit-identical;
//  (e) a checkpoint saved at DP = world resumes at DP = 1 (and one saved at DP = 1 resumes at
//      DP = world) on the same loss curve as an uninterrupted run (<= 1e-5).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "launch/train/trainer.h"
#include "tests/core/dp/dp_test_util.h"

namespace brt::testing {
namespace {

namespace fs = std::filesystem;

int per_rank_streams() { return kGlobalStreams / world_size(); }

// Every float32 dataset under `group` of the newest checkpoint in `dir`, by name.
std::vector<std::pair<std::string, std::vector<float>>> read_group(const std::string& dir,
                                                                   const std::string& group) {
  const auto latest = checkpoint::find_latest_good(dir);
  if (!latest.path) throw std::runtime_error("no checkpoint in " + dir);
  checkpoint::CheckpointReader reader(*latest.path);
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (const auto& t : reader.tensors())
    if (t.path.rfind(group + "/", 0) == 0) out.emplace_back(t.path, reader.read_whole<float>(t.path));
  return out;
}

TEST(DpTraining, TwentyStepsTrackTheSingleProcessLossCurve) {
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, 1);
  for (const std::string kind : {"adamw", "adafactor"}) {
    const auto ref = train(small_run("rec:fixed:skip", kGlobalStreams, 20, {"optim.kind=" + kind}), nullptr);
    const auto got = train(small_run("rec:fixed:skip", per_rank_streams(), 20, {"optim.kind=" + kind}), &groups);
    ASSERT_EQ(got.losses.size(), 20u);
    for (size_t i = 0; i < 20; ++i)
      EXPECT_NEAR(got.losses[i], ref.losses[i], 1e-4 * ref.losses[i]) << kind << " step " << i;
    EXPECT_LT(got.losses.back(), got.losses.front());  // it trains
  }
}

TEST(DpTraining, ZeroOneGivesTheSameWeightsAsPlainDp) {
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, 1);
  const std::string dir = shared_temp_dir("zero");
  for (const std::string kind : {"adamw", "adafactor"}) {
    // Adafactor factors matrices with both dims >= 32 here, so both of its state layouts occur.
    const std::vector<std::string> common = {"optim.kind=" + kind, "optim.min_dim_to_factor=32"};
    auto plain_cfg = small_run("rec:lstm:dual", per_rank_streams(), 10, common);
    plain_cfg.checkpoint.dir = dir + "/plain-" + kind;
    auto zero_cfg = plain_cfg;
    zero_cfg.checkpoint.dir = dir + "/zero-" + kind;
    zero_cfg.train.zero = 1;
    const auto plain = train(plain_cfg, &groups);
    const auto zero = train(zero_cfg, &groups);
    EXPECT_TRUE(bit_identical(plain.losses, zero.losses)) << kind;
    if (world_rank() == 0) {
      for (const std::string group : {"/model", "/optim"}) {
        const auto a = read_group(plain_cfg.checkpoint.dir, group);
        const auto b = read_group(zero_cfg.checkpoint.dir, group);
        ASSERT_EQ(a.size(), b.size());
        ASSERT_FALSE(a.empty());
        for (size_t i = 0; i < a.size(); ++i) {
          EXPECT_EQ(a[i].first, b[i].first);
          EXPECT_TRUE(bit_identical(a[i].second, b[i].second)) << kind << " " << a[i].first;
        }
      }
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove_all(dir);
}

TEST(DpTraining, TwoRunsAreBitIdentical) {
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, 1);
  const auto cfg = small_run("rec:lstm:dual", per_rank_streams(), 12, {"optim.kind=adafactor"});
  const auto a = train(cfg, &groups);
  const auto b = train(cfg, &groups);
  ASSERT_EQ(a.losses.size(), 12u);
  EXPECT_TRUE(bit_identical(a.losses, b.losses));
}

// Trains `first` steps at one layout into `dir`, then resumes to `total` at the other layout.
std::vector<double> split_run(const std::string& dir, bool save_in_parallel, int first, int total,
                              const parallel::ProcessGroups& groups) {
  const int dp_streams = per_rank_streams();
  // The first part stops early but keeps the whole run's learning-rate schedule.
  const std::string schedule = "optim.total_steps=" + std::to_string(total);
  auto part1 = small_run("rec:lstm:dual", save_in_parallel ? dp_streams : kGlobalStreams, first,
                         {"optim.kind=adafactor", schedule, "checkpoint.dir=" + dir});
  auto part2 = small_run("rec:lstm:dual", save_in_parallel ? kGlobalStreams : dp_streams, total,
                         {"optim.kind=adafactor", schedule, "checkpoint.dir=" + dir, "checkpoint.resume=true"});
  std::vector<double> resumed;
  if (save_in_parallel) {
    train(part1, &groups);
    if (world_rank() == 0) resumed = train(part2, nullptr).losses;
  } else {
    if (world_rank() == 0) train(part1, nullptr);
    MPI_Barrier(MPI_COMM_WORLD);
    resumed = train(part2, &groups).losses;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return resumed;
}

TEST(DpTraining, CheckpointResumesAtAnotherDataParallelSize) {
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, 1);
  const std::string dir = shared_temp_dir("resume");
  constexpr int kFirst = 6, kTotal = 12;
  const auto straight =
      train(small_run("rec:lstm:dual", per_rank_streams(), kTotal,
                      {"optim.kind=adafactor", "optim.total_steps=" + std::to_string(kTotal)}), &groups);
  for (const bool save_in_parallel : {true, false}) {
    const std::string sub = dir + (save_in_parallel ? "/dp-to-1" : "/1-to-dp");
    const auto resumed = split_run(sub, save_in_parallel, kFirst, kTotal, groups);
    if (!save_in_parallel || world_rank() == 0) {
      ASSERT_EQ(resumed.size(), size_t(kTotal - kFirst)) << sub;
      for (int i = 0; i < kTotal - kFirst; ++i)
        EXPECT_NEAR(resumed[size_t(i)], straight.losses[size_t(kFirst + i)],
                    1e-5 * straight.losses[size_t(kFirst + i)])
            << sub << " step " << kFirst + i;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace brt::testing
