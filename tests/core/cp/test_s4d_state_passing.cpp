// The S4D state-passing kernels of context parallelism (kernels/ssm/s4d_state_passing.h) on
// seeded random inputs in float64: the advance against its formula, and every gradient against
// central finite differences of the forward ops it differentiates (s4d_carry_apply,
// s4d_state_advance, s4d_carry_update), over every state, input and S4D parameter element.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <random>
#include <vector>

#include "kernels/ssm/s4d_kernel.h"
#include "kernels/ssm/s4d_state_passing.h"

namespace brt::kernels::ssm {
namespace {

using cplx = std::complex<double>;

struct Problem {
  S4dCarryDims d{2, 2, 3, 4, 7};  // B, C, Ds, M, L
  std::vector<double> log_dt, a_re, a_im, c_re, c_im;
  std::mt19937 gen{20261202};

  Problem() {
    std::uniform_real_distribution<double> u01(0, 1);
    std::normal_distribution<double> normal(0, 1);
    const int R = d.filters(), M = d.modes;
    for (int r = 0; r < R; ++r) log_dt.push_back(s4d_log_dt_from_uniform(u01(gen)) + 1.5);  // Δ up to ~0.45: w^L far from 1
    for (int i = 0; i < R * M; ++i) {
      a_re.push_back(std::log(0.5) + 0.3 * normal(gen));
      a_im.push_back(M_PI * (i % M) + 0.2 * normal(gen));
      c_re.push_back(normal(gen));
      c_im.push_back(normal(gen));
    }
  }
  S4dParams<double> params() const {
    return {log_dt.data(), a_re.data(), a_im.data(), c_re.data(), c_im.data()};
  }
  std::vector<double> random(size_t n) {
    std::normal_distribution<double> normal(0, 1);
    std::vector<double> v(n);
    for (auto& x : v) x = normal(gen);
    return v;
  }
  size_t state_elems() const { return size_t(d.batch) * d.filters() * d.modes * 2; }
  // Every parameter the state-passing gradients reach, for finite differences.
  std::vector<std::vector<double>*> delta_a_params() { return {&log_dt, &a_re, &a_im}; }
};

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Central difference of loss() with respect to every element of v, against analytic.
void expect_gradient(std::vector<double>& v, const std::vector<double>& analytic,
                     const std::function<double()>& loss, const char* what) {
  ASSERT_EQ(v.size(), analytic.size()) << what;
  for (size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i], h = 1e-6 * std::max(1.0, std::abs(keep));
    v[i] = keep + h;
    const double up = loss();
    v[i] = keep - h;
    const double down = loss();
    v[i] = keep;
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(analytic[i], numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << what << "[" << i << "]";
  }
}

TEST(S4dStatePassing, AdvanceIsPowerTimesStatePlusSummary) {
  Problem p;
  const auto h = p.random(p.state_elems()), x0 = p.random(p.state_elems());
  for (const bool adjoint : {false, true}) {
    std::vector<double> x = x0;
    s4d_state_advance(p.d, p.params(), h.data(), x.data(), adjoint);
    const int R = p.d.filters(), M = p.d.modes;
    for (int b = 0; b < p.d.batch; ++b)
      for (int r = 0; r < R; ++r)
        for (int n = 0; n < M; ++n) {
          const size_t at = ((size_t(b) * R + r) * M + n) * 2;
          const double dt = std::exp(p.log_dt[size_t(r)]);
          const cplx a(-std::exp(p.a_re[size_t(r * M + n)]), p.a_im[size_t(r * M + n)]);
          cplx z = std::exp(double(p.d.length) * dt * a);
          if (adjoint) z = std::conj(z);
          const cplx want = z * cplx(x0[at], x0[at + 1]) + cplx(h[at], h[at + 1]);
          EXPECT_NEAR(x[at], want.real(), 1e-13);
          EXPECT_NEAR(x[at + 1], want.imag(), 1e-13);
        }
  }
}

TEST(S4dStatePassing, ApplyGradMatchesFiniteDifferencesOfCarryApply) {
  Problem p;
  std::vector<double> x = p.random(p.state_elems());
  const size_t ys = size_t(p.d.batch) * p.d.channels * p.d.length * p.d.features;
  const auto dy = p.random(ys);
  std::vector<double> g(p.state_elems());
  s4d_state_apply_grad(p.d, p.params(), dy.data(), g.data());
  const auto loss = [&] {
    std::vector<double> y(ys, 0.0);
    s4d_carry_apply(p.d, p.params(), x.data(), y.data());
    return dot(dy, y);
  };
  expect_gradient(x, g, loss, "state");
}

TEST(S4dStatePassing, AdvanceBackwardMatchesFiniteDifferencesOfTheParameters) {
  Problem p;
  const auto x_prev = p.random(p.state_elems()), gnext = p.random(p.state_elems());
  const int R = p.d.filters(), M = p.d.modes;
  std::vector<double> dlog_dt(static_cast<size_t>(R), 0.0), da_re(static_cast<size_t>(R * M), 0.0), da_im(static_cast<size_t>(R * M), 0.0);
  s4d_state_advance_backward(p.d, p.params(), x_prev.data(), gnext.data(),
                             S4dGrads<double>{dlog_dt.data(), da_re.data(), da_im.data(), nullptr, nullptr});
  const std::vector<double> zero(p.state_elems(), 0.0);
  const auto loss = [&] {
    std::vector<double> x = x_prev;
    s4d_state_advance(p.d, p.params(), zero.data(), x.data(), false);
    return dot(gnext, x);
  };
  expect_gradient(p.log_dt, dlog_dt, loss, "log_dt");
  expect_gradient(p.a_re, da_re, loss, "a_re");
  expect_gradient(p.a_im, da_im, loss, "a_im");
}

TEST(S4dStatePassing, SummaryBackwardMatchesFiniteDifferencesOfCarryUpdate) {
  Problem p;
  const size_t us = size_t(p.d.batch) * p.d.length * p.d.features;
  std::vector<double> u = p.random(us);
  const auto dh = p.random(p.state_elems());
  const int R = p.d.filters(), M = p.d.modes;
  std::vector<double> du(us, 0.0), dlog_dt(static_cast<size_t>(R), 0.0), da_re(static_cast<size_t>(R * M), 0.0), da_im(static_cast<size_t>(R * M), 0.0);
  s4d_summary_backward(p.d, p.params(), u.data(), dh.data(), du.data(),
                       S4dGrads<double>{dlog_dt.data(), da_re.data(), da_im.data(), nullptr, nullptr});
  const auto loss = [&] {
    std::vector<double> h(p.state_elems(), 0.0);
    s4d_carry_update(p.d, p.params(), u.data(), h.data());
    return dot(dh, h);
  };
  expect_gradient(u, du, loss, "u");
  expect_gradient(p.log_dt, dlog_dt, loss, "log_dt");
  expect_gradient(p.a_re, da_re, loss, "a_re");
  expect_gradient(p.a_im, da_im, loss, "a_im");
}

}  // namespace
}  // namespace brt::kernels::ssm
