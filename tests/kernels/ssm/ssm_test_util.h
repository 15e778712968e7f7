// Helpers for the SSM kernel tests: direct (O(L^2)) float64 convolution references and
// finite differences over a random subset of a parameter's elements (so long sequences stay
// cheap, also under the sanitizers).
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "tests/kernels/kernel_test_util.h"

namespace brt::kernels::test {

// y[b, c, t, f] = Σ_{τ≤t} k[c, f, τ]·u[b, t−τ, f] + dskip[c, f]·u[b, t, f]  (model.md §7.1).
inline std::vector<double> direct_causal_conv(int B, int C, int L, int F,
                                              const std::vector<double>& k,
                                              const std::vector<double>& u,
                                              const std::vector<double>& dskip) {
  std::vector<double> y(static_cast<std::size_t>(B) * C * L * F);
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c)
      for (int f = 0; f < F; ++f)
        for (int t = 0; t < L; ++t) {
          double s = dskip.empty() ? 0.0 : dskip[c * F + f] * u[(b * L + t) * F + f];
          for (int tau = 0; tau <= t; ++tau)
            s += k[(c * F + f) * L + tau] * u[(b * L + t - tau) * F + f];
          y[((b * C + c) * L + t) * F + f] = s;
        }
  return y;
}

// The direct correlations that are the convolution's gradients.
struct ConvGrads {
  std::vector<double> du, dk, ddskip;
};
inline ConvGrads direct_causal_conv_backward(int B, int C, int L, int F,
                                             const std::vector<double>& k,
                                             const std::vector<double>& u,
                                             const std::vector<double>& dskip,
                                             const std::vector<double>& dy) {
  ConvGrads g{std::vector<double>(u.size()), std::vector<double>(k.size()),
              std::vector<double>(static_cast<std::size_t>(C) * F)};
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c)
      for (int f = 0; f < F; ++f) {
        const auto DY = [&](int t) { return dy[((b * C + c) * L + t) * F + f]; };
        const auto U = [&](int t) { return u[(b * L + t) * F + f]; };
        for (int t = 0; t < L; ++t) {
          double du = dskip.empty() ? 0.0 : dskip[c * F + f] * DY(t);
          for (int s = t; s < L; ++s) du += k[(c * F + f) * L + s - t] * DY(s);
          g.du[(b * L + t) * F + f] += du;
          double dk = 0;
          for (int s = t; s < L; ++s) dk += DY(s) * U(s - t);
          g.dk[(c * F + f) * L + t] += dk;
          g.ddskip[c * F + f] += DY(t) * U(t);
        }
      }
  return g;
}

// Central differences at up to `max_checks` randomly chosen elements of *param.
inline void expect_gradient_subset(Rng& rng, const std::function<double()>& objective,
                                   std::vector<double>* param, const std::vector<double>& analytic,
                                   const std::string& what, int max_checks, double eps = 1e-6,
                                   double tol = 1e-6) {
  ASSERT_EQ(param->size(), analytic.size()) << what;
  const double scale = rms(analytic);
  const int n = static_cast<int>(param->size());
  const int checks = std::min(n, max_checks);
  for (int j = 0; j < checks; ++j) {
    const int i = checks == n ? j : rng.uniform_int(0, n - 1);
    const double saved = (*param)[i];
    (*param)[i] = saved + eps;
    const double up = objective();
    (*param)[i] = saved - eps;
    const double down = objective();
    (*param)[i] = saved;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(analytic[i], numeric, tol * (std::abs(numeric) + scale))
        << "d/d" << what << "[" << i << "]";
  }
}

}  // namespace brt::kernels::test
