// The step guard (launch/train/step_guard.h) and the fault injection spec (launch/process/fault_injection.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "launch/process/fault_injection.h"
#include "launch/train/step_guard.h"

namespace brt::launch {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(StepGuard, SkipsNonFiniteStepsAndCountsConsecutiveOnes) {
  StepGuard guard({3, 0, 0});
  EXPECT_EQ(guard.judge(1, 4.0, 1.0), StepVerdict::kApply);
  EXPECT_EQ(guard.judge(2, kNaN, 1.0), StepVerdict::kSkipNonFinite);
  EXPECT_TRUE(guard.take_reset());   // the bad forward's carried state is reset next step
  EXPECT_FALSE(guard.take_reset());
  EXPECT_EQ(guard.judge(3, 4.0, std::numeric_limits<double>::infinity()), StepVerdict::kSkipNonFinite);
  EXPECT_EQ(guard.consecutive_skips(), 2);
  EXPECT_FALSE(guard.exhausted());
  EXPECT_EQ(guard.judge(4, kNaN, kNaN), StepVerdict::kSkipNonFinite);
  EXPECT_TRUE(guard.exhausted());
  EXPECT_EQ(guard.recent_skips(), std::vector<int64_t>({2, 3, 4}));
  EXPECT_EQ(guard.total_skipped(), 3);
  EXPECT_EQ(guard.judge(5, 4.0, 1.0), StepVerdict::kApply);
  EXPECT_EQ(guard.consecutive_skips(), 0);
  EXPECT_TRUE(guard.recent_skips().empty());
}

TEST(StepGuard, ZScoreSpikesAreSkippedOnlyWithEnoughHistory) {
  StepGuard guard({5, 4.0, 4.0});
  // A spike before kMinHistory applied steps is applied (no statistics yet).
  for (int s = 1; s < ZWindow::kMinHistory; ++s) EXPECT_EQ(guard.judge(s, 3.0 + 0.01 * (s % 3), 1.0 + 0.01 * (s % 5)), StepVerdict::kApply);
  EXPECT_EQ(guard.judge(100, 30.0, 1.0), StepVerdict::kApply);
  StepGuard fresh({5, 4.0, 4.0});
  for (int s = 1; s <= 40; ++s) fresh.judge(s, 3.0 + 0.01 * (s % 3), 1.0 + 0.01 * (s % 5));
  EXPECT_EQ(fresh.judge(41, 3.5, 1.0), StepVerdict::kSkipLossSpike);
  EXPECT_EQ(fresh.judge(42, 3.0, 50.0), StepVerdict::kSkipGradSpike);
  EXPECT_EQ(fresh.judge(43, 3.01, 1.02), StepVerdict::kApply);
  // Off by default: no spike is skipped.
  StepGuard off({5, 0, 0});
  for (int s = 1; s <= 40; ++s) off.judge(s, 3.0, 1.0 + 0.01 * (s % 5));
  EXPECT_EQ(off.judge(41, 300.0, 1000.0), StepVerdict::kApply);
}

TEST(StepGuard, CheckpointFormRestoresEveryDecisionExactly) {
  StepGuard a({4, 3.0, 3.0});
  for (int s = 1; s <= 150; ++s) a.judge(s, s == 90 ? kNaN : 3.0 + std::sin(s), 1.0 + 0.1 * std::cos(s));
  a.add_skip_batches({7, 8});
  a.judge(151, kNaN, 1.0);
  StepGuard b({4, 3.0, 3.0});
  b.restore(a.counters(), a.windows(), a.skip_batches());
  EXPECT_EQ(b.counters(), a.counters());
  EXPECT_EQ(b.windows(), a.windows());
  EXPECT_TRUE(b.skips_batch(7) && b.skips_batch(8) && !b.skips_batch(9));
  EXPECT_EQ(b.take_reset(), a.take_reset());
  for (int s = 152; s <= 200; ++s) {
    const double loss = 3.0 + std::sin(s) * (s == 170 ? 9 : 1), norm = 1.0 + 0.1 * std::cos(s);
    EXPECT_EQ(a.judge(s, loss, norm), b.judge(s, loss, norm)) << s;
  }
  EXPECT_THROW(b.restore({1, 2}, a.windows(), {}), std::invalid_argument);
}

TEST(FaultInjection, ParsesEveryActionAndRefusesBadSpecs) {
  const FaultInjection f("nonfinite@step=5;gradspike@step=9;kill@checkpoint save: renaming@rank=1@nth=2");
  EXPECT_TRUE(f.nonfinite_at(5));
  EXPECT_FALSE(f.nonfinite_at(6));
  EXPECT_TRUE(f.grad_spike_at(9));
  f.at_phase("checkpoint save: renaming", 0);  // another rank: nothing
  f.at_phase("checkpoint save: renaming", 1);  // the first time on rank 1: nothing (nth=2)
  EXPECT_THROW(FaultInjection("explode@step=3"), std::invalid_argument);
  EXPECT_THROW(FaultInjection("nonfinite"), std::invalid_argument);
  EXPECT_THROW(FaultInjection("kill@step=x"), std::invalid_argument);
  EXPECT_THROW(FaultInjection("kill"), std::invalid_argument);
}

TEST(FaultInjectionDeathTest, KillFiresAtTheNthMatchingPhase) {
  const FaultInjection f("kill@checkpoint save: writing@nth=2");
  EXPECT_EXIT(
      {
        f.at_phase("checkpoint save: writing /model/a", 0);
        f.at_phase("checkpoint save: writing /model/b", 0);
        std::exit(0);
      },
      testing::KilledBySignal(9), "SIGKILL at 'checkpoint save: writing /model/b' on world rank 0");
}

}  // namespace
}  // namespace brt::launch
