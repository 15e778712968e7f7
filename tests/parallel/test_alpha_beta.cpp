// The α-β fit (parallel/alpha_beta.h) against data generated from known α and β.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "parallel/alpha_beta.h"

namespace bp = brt::parallel;

namespace {

std::vector<bp::CommSample> samples_from(double alpha, double beta, double noise) {
  std::vector<bp::CommSample> s;
  int i = 0;
  for (double bytes = 4; bytes <= 64.0 * (1 << 20); bytes *= 4, ++i) {
    const double wobble = 1.0 + noise * ((i % 2) ? 1.0 : -1.0);  // alternating ± noise
    s.push_back({bytes, (alpha + beta * bytes) * wobble});
  }
  return s;
}

}  // namespace

TEST(AlphaBeta, RecoversExactModelWithEitherWeighting) {
  const double alpha = 3e-6, beta = 1.0 / 5e9;  // 3 µs, 5 GB/s
  const auto s = samples_from(alpha, beta, 0.0);
  for (auto w : {bp::FitWeighting::kRelative, bp::FitWeighting::kAbsolute}) {
    const auto m = bp::fit_alpha_beta(s, w);
    EXPECT_NEAR(m.alpha_seconds / alpha, 1.0, 1e-6);
    EXPECT_NEAR(m.beta_seconds_per_byte / beta, 1.0, 1e-6);
    EXPECT_NEAR(m.bandwidth(), 5e9, 5e9 * 1e-6);
    EXPECT_LT(bp::max_relative_error(m, s), 1e-6);
  }
}

TEST(AlphaBeta, RelativeWeightingKeepsSmallMessageErrorsBounded) {
  const auto s = samples_from(10e-6, 1.0 / 2e9, 0.05);
  const auto rel = bp::fit_alpha_beta(s, bp::FitWeighting::kRelative);
  // ±5 % noise on every sample: the relative fit stays within about that everywhere.
  EXPECT_LT(bp::max_relative_error(rel, s), 0.11);
  EXPECT_NEAR(rel.alpha_seconds / 10e-6, 1.0, 0.1);
}

TEST(AlphaBeta, RejectsDegenerateInput) {
  std::vector<bp::CommSample> one_size{{1024, 1e-5}, {1024, 2e-5}};
  EXPECT_THROW(bp::fit_alpha_beta(one_size), std::invalid_argument);
  std::vector<bp::CommSample> zero_time{{4, 0.0}, {1024, 1e-5}};
  EXPECT_THROW(bp::fit_alpha_beta(zero_time), std::invalid_argument);
}
