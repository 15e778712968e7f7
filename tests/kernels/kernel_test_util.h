// Helpers for the kernel tests: seeded random inputs (seed printed on failure), tolerance
// checks against float64 references, and central finite differences.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tests/common/test_seed.h"
namespace brt::kernels::test {

// The test's seed (tests/common/test_seed.h: a fixed list, printed, BRT_TEST_SEED replays);
// SCOPED_TRACE(trace()) puts it into every failure.
class Rng {
 public:
  Rng() : seed_(brt::test::test_seed()), gen_(seed_) {}
  uint32_t seed() const { return seed_; }
  std::string trace() const { return "random seed " + std::to_string(seed_); }
  std::vector<double> uniform(std::size_t n, double lo, double hi) {
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<double> out(n);
    for (double& x : out) x = dist(gen_);
    return out;
  }
  std::vector<double> normal(std::size_t n, double sd) {
    std::normal_distribution<double> dist(0.0, sd);
    std::vector<double> out(n);
    for (double& x : out) x = dist(gen_);
    return out;
  }
  int uniform_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen_); }

 private:
  uint32_t seed_;
  std::mt19937 gen_;
};

template <typename T, typename U>
std::vector<T> cast_to(const std::vector<U>& x) {
  return std::vector<T>(x.begin(), x.end());
}

inline double rms(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return x.empty() ? 0.0 : std::sqrt(s / x.size());
}

// |actual - expected| <= tol * (|expected| + rms(expected)) element-wise: relative for
// large entries, relative to the vector's scale for entries near zero.
template <typename T>
void expect_close(const std::vector<T>& actual, const std::vector<double>& expected, double tol,
                  const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  const double scale = rms(expected);
  int reported = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double err = std::abs(static_cast<double>(actual[i]) - expected[i]);
    if (!(err <= tol * (std::abs(expected[i]) + scale)) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << static_cast<double>(actual[i])
                    << ", expected " << expected[i] << " (tol " << tol << ", scale " << scale
                    << ")";
    }
  }
}

// Central differences of `objective` with respect to every element of *param, compared to
// `analytic` with expect_close's criterion.
inline void expect_gradient(const std::function<double()>& objective, std::vector<double>* param,
                            const std::vector<double>& analytic, const std::string& what,
                            double eps = 1e-6, double tol = 1e-6) {
  ASSERT_EQ(param->size(), analytic.size()) << what;
  std::vector<double> numeric(param->size());
  for (std::size_t i = 0; i < param->size(); ++i) {
    const double saved = (*param)[i];
    (*param)[i] = saved + eps;
    const double up = objective();
    (*param)[i] = saved - eps;
    const double down = objective();
    (*param)[i] = saved;
    numeric[i] = (up - down) / (2 * eps);
  }
  expect_close(analytic, numeric, tol, "d/d" + what);
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace brt::kernels::test
