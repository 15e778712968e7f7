// An honest MFU (launch/train/mfu.h): never above 100% without saying why; a measured peak is
// measured again before an MFU above 100% is printed.
#include <gtest/gtest.h>

#include "launch/train/mfu.h"

namespace brt::launch {
namespace {

TEST(MfuPeak, AConfiguredPeakBelowTheAchievedRateIsNamed) {
  MfuPeak peak(10.0, /*on_gpu=*/false);
  std::string note;
  EXPECT_DOUBLE_EQ(peak.mfu(5.0, 1, note), 0.5);
  EXPECT_TRUE(note.empty());
  EXPECT_DOUBLE_EQ(peak.mfu(40.0, 2, note), 2.0);
  EXPECT_NE(note.find("train.peak_gflops = 10.0 GFLOP/s per rank is below the achieved rate"), std::string::npos)
      << note;
}

TEST(MfuPeak, AMeasuredPeakIsMeasuredAgainBeforeAnMfuAbove100Percent) {
  // 256³ sgemm calls, not training's 2048³: the same measuring and re-measuring at 1/512 of
  // the arithmetic (4 x 7 calls of 2048³ took ~35 s on one core).
  MfuPeak peak(0.0, /*on_gpu=*/false, /*cpu_peak_size=*/256);
  ASSERT_GT(peak.gflops(), 0.0);
  EXPECT_NE(peak.source().find("best of 7 256^3 sgemm"), std::string::npos) << peak.source();
  std::string note;
  EXPECT_LT(peak.mfu(0.5 * peak.gflops(), 1, note), 1.0);
  EXPECT_TRUE(note.empty());
  // Ten times the best sgemm rate cannot be real: re-measured (kMaxRemeasures times), then
  // printed with the reason.
  const double before = peak.gflops();
  const double mfu = peak.mfu(10.0 * before, 1, note);
  EXPECT_GE(peak.gflops(), before);
  EXPECT_GT(mfu, 1.0);
  EXPECT_NE(note.find("measured 4 times"), std::string::npos) << note;
  // Further lines do not measure again (the budget is spent) but still say why.
  peak.mfu(10.0 * before, 1, note);
  EXPECT_NE(note.find("above 100%"), std::string::npos);
}

}  // namespace
}  // namespace brt::launch
