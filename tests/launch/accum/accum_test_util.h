// Shared pieces of the gradient-accumulation tests (tests/launch/accum): the newest checkpoint's
// tensors and the comparison of an accumulated run with its big batch (the trainer run, train(),
// is tests/core/dp's).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "launch/train/trainer.h"
#include "tests/core/dp/dp_test_util.h"

namespace brt::testing {

// The tolerance of an accumulated step against its big batch, relative. Both compute the same
// sums of float32 terms, only grouped differently: the big batch sums a weight's gradient over
// its B·N = 4·32 = 128 token rows inside one GEMM, accumulation over 2 x 64 rows, then adds the
// two partial sums in the arena (data parallelism: over the ranks). A re-ordered float32 sum of
// n terms differs from the exact one by at most γ_{n-1}·Σ|x| with γ_k = k·u/(1 − k·u), u =
// 2^-24, so two orderings differ by at most 2·γ_127·Σ|x| ≈ 1.5e-5·Σ|x|. The gradient norm, the
// losses of the next steps and the parameters (Adam's update moves with the gradient's relative
// error) stay inside that bound relative to their own size over these few steps (measured over
// 5 steps: losses ~1e-8, gradient norms ~1e-7, parameters and carried state up to ~1e-6).
inline double reordered_sum_tolerance() {
  const double u = std::ldexp(1.0, -24);
  const double k = 127;
  return 2 * k * u / (1 - k * u);
}

// Every dataset under `group` ("/model", "/state", "/data") of the newest checkpoint in `dir`,
// by name, every value as a double (the data cursor's integers too).
inline std::vector<std::pair<std::string, std::vector<double>>> checkpoint_tensors(const std::string& dir,
                                                                                   const std::string& group) {
  const auto latest = checkpoint::find_latest_good(dir);
  if (!latest.path) throw std::runtime_error("no checkpoint in " + dir);
  checkpoint::CheckpointReader reader(*latest.path);
  std::vector<std::pair<std::string, std::vector<double>>> out;
  for (const auto& t : reader.tensors()) {
    if (t.path.rfind(group + "/", 0) != 0) continue;
    std::vector<double> values;
    if (t.dtype == checkpoint::DType::kI64) {
      for (int64_t v : reader.read_whole<int64_t>(t.path)) values.push_back(double(v));
    } else if (t.dtype == checkpoint::DType::kF64) {
      values = reader.read_whole<double>(t.path);
    } else {
      for (float v : reader.read_whole<float>(t.path)) values.push_back(double(v));
    }
    out.emplace_back(t.path, std::move(values));
  }
  return out;
}

// |got − want| <= tol·|want| step by step.
inline void expect_steps_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                               const std::string& what, double* worst = nullptr) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double rel = std::abs(got[i] - want[i]) / std::abs(want[i]);
    if (worst) *worst = std::max(*worst, rel);
    EXPECT_LE(rel, tol) << what << " step " << i + 1 << ": " << got[i] << " vs " << want[i];
  }
}

// Every tensor of `group` in the two newest checkpoints: same names and shapes, values within
// tol (relative, over the tensor: ||got − want|| / ||want||).
inline void expect_checkpoints_close(const std::string& got_dir, const std::string& want_dir, const std::string& group,
                                     double tol, double* worst = nullptr) {
  const auto got = checkpoint_tensors(got_dir, group), want = checkpoint_tensors(want_dir, group);
  ASSERT_EQ(got.size(), want.size()) << group;
  ASSERT_FALSE(got.empty()) << group;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].first, want[i].first);
    ASSERT_EQ(got[i].second.size(), want[i].second.size()) << got[i].first;
    const double rel = relative_error(got[i].second.data(), want[i].second.data(), int64_t(got[i].second.size()));
    if (worst) *worst = std::max(*worst, rel);
    EXPECT_LE(rel, tol) << got[i].first;
  }
}

}  // namespace brt::testing
