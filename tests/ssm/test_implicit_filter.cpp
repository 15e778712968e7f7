// The unstructured (Hyena-style implicit) filter of model.md §7.1: forward against a naive
// per-tap float64 evaluation, gradients of every parameter against central differences, and
// the float path against the double path. The network runs as Backend calls (here the CPU
// backend's, on host vectors); on the GPU the same calls are device kernels and cuBLAS
// (tests/cuda check the filter ops against these).
#include <gtest/gtest.h>

#include <memory>
#include <numbers>

#include "kernels/backend.h"
#include "kernels/ssm/implicit_filter.h"
#include "tests/ssm/ssm_test_util.h"

namespace brt::kernels::test {
namespace {

using ssm::ImplicitFilter;

template <typename T>
Backend<T>& cpu() {
  static const std::unique_ptr<Backend<T>> backend = make_cpu_backend<T>();
  return *backend;
}

struct FilterSet {
  int O, R;
  std::vector<double> w0, b0, w1, b1, w2, b2, freq, w_out;
  FilterSet(Rng& rng, int order, int filters) : O(order), R(filters) {
    const auto uni = [&](std::size_t n, int fan_in) {
      const double a = 1.0 / std::sqrt(fan_in);
      return rng.uniform(n, -a, a);
    };
    w0 = uni(3 * O, 3);
    b0 = uni(O, 3);
    w1 = uni(O * O, O);
    b1 = uni(O, O);
    w2 = uni(O * O, O);
    b2 = uni(O, O);
    freq = rng.uniform(O, 0.5, 1.5);  // around the init ω = 1, distinct per unit
    w_out = uni(static_cast<std::size_t>(O) * R, O);
  }
  template <typename T>
  struct Cast {
    std::vector<T> w0, b0, w1, b1, w2, b2, freq, w_out;
    ssm::ImplicitFilterParams<T> params() const {
      return {w0.data(), b0.data(), w1.data(),   b1.data(),
              w2.data(), b2.data(), freq.data(), w_out.data()};
    }
  };
  template <typename T>
  Cast<T> as() const {
    return {cast_to<T>(w0), cast_to<T>(b0), cast_to<T>(w1),   cast_to<T>(b1),
            cast_to<T>(w2), cast_to<T>(b2), cast_to<T>(freq), cast_to<T>(w_out)};
  }
};

// Naive evaluation of model.md §7.1, tap by tap.
std::vector<double> reference_kernel(const FilterSet& s, int L) {
  const int O = s.O, R = s.R;
  std::vector<double> k(static_cast<std::size_t>(R) * L);
  for (int l = 0; l < L; ++l) {
    const double t = double(l) / L;
    std::vector<double> x = {t, std::cos(2 * std::numbers::pi * t),
                             std::sin(2 * std::numbers::pi * t)};
    const std::vector<double>* w[3] = {&s.w0, &s.w1, &s.w2};
    const std::vector<double>* b[3] = {&s.b0, &s.b1, &s.b2};
    for (int i = 0; i < 3; ++i) {
      std::vector<double> y(O);
      for (int o = 0; o < O; ++o) {
        double a = (*b[i])[o];
        for (std::size_t j = 0; j < x.size(); ++j) a += x[j] * (*w[i])[j * O + o];
        y[o] = std::sin(s.freq[o] * a);
      }
      x = y;
    }
    for (int r = 0; r < R; ++r) {
      double h = 0;
      for (int o = 0; o < O; ++o) h += x[o] * s.w_out[o * R + r];
      const double delta =
          std::log(1e-2) / 1.5 + (std::log(1e-2) / 0.3 - std::log(1e-2) / 1.5) * r / (R - 1);
      k[r * L + l] = h * std::exp(-t * std::abs(delta));
    }
  }
  return k;
}

TEST(ImplicitFilter, DeltaSpansTheSpecifiedInterval) {
  EXPECT_DOUBLE_EQ(ssm::implicit_filter_delta(0, 5), std::log(1e-2) / 1.5);
  EXPECT_DOUBLE_EQ(ssm::implicit_filter_delta(4, 5), std::log(1e-2) / 0.3);
  EXPECT_EQ(ImplicitFilter<float>(cpu<float>(), 16, 10, 64).parameter_count(),
            3 * 64 + 64 + 2 * (64 * 64 + 64) + 64 + 64 * 10);
}

TEST(ImplicitFilter, ForwardMatchesNaiveEvaluation) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int L = 300;
  const FilterSet s(rng, 64, 6);
  const auto p = s.as<double>();
  ImplicitFilter<double> filter(cpu<double>(), L, s.R, s.O);
  std::vector<double> k(static_cast<std::size_t>(s.R) * L, 3.0);
  filter.forward(p.params(), k.data());
  expect_close(k, reference_kernel(s, L), 1e-12, "K");
}

TEST(ImplicitFilter, GradientsMatchFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int L = 37;
  FilterSet s(rng, 8, 5);
  const std::vector<double> dk = rng.normal(static_cast<std::size_t>(s.R) * L, 1.0);
  ImplicitFilter<double> filter(cpu<double>(), L, s.R, s.O);
  std::vector<double> k(dk.size());
  const auto objective = [&] {
    const auto p = s.as<double>();
    filter.forward(p.params(), k.data());
    return dot(k, dk);
  };
  objective();  // activations for backward
  FilterSet::Cast<double> g{
      std::vector<double>(s.w0.size()),   std::vector<double>(s.b0.size()),
      std::vector<double>(s.w1.size()),   std::vector<double>(s.b1.size()),
      std::vector<double>(s.w2.size()),   std::vector<double>(s.b2.size()),
      std::vector<double>(s.freq.size()), std::vector<double>(s.w_out.size())};
  const auto p = s.as<double>();
  std::vector<double> dk_consumed = dk;  // backward scales its dK in place
  filter.backward(p.params(), dk_consumed.data(),
                  {g.w0.data(), g.b0.data(), g.w1.data(), g.b1.data(), g.w2.data(), g.b2.data(),
                   g.freq.data(), g.w_out.data()});
  expect_gradient(objective, &s.w0, g.w0, "w0", 1e-6, 1e-6);
  expect_gradient(objective, &s.b0, g.b0, "b0", 1e-6, 1e-6);
  expect_gradient(objective, &s.w1, g.w1, "w1", 1e-6, 1e-6);
  expect_gradient(objective, &s.b1, g.b1, "b1", 1e-6, 1e-6);
  expect_gradient(objective, &s.w2, g.w2, "w2", 1e-6, 1e-6);
  expect_gradient(objective, &s.b2, g.b2, "b2", 1e-6, 1e-6);
  expect_gradient(objective, &s.freq, g.freq, "freq", 1e-6, 1e-6);
  expect_gradient(objective, &s.w_out, g.w_out, "w_out", 1e-6, 1e-6);
}

TEST(ImplicitFilter, LongKernelGradientsMatchFiniteDifferencesOnASubset) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int L = 700;  // several backward chunks, one partial
  FilterSet s(rng, 16, 3);
  const std::vector<double> dk = rng.normal(static_cast<std::size_t>(s.R) * L, 1.0);
  ImplicitFilter<double> filter(cpu<double>(), L, s.R, s.O);
  std::vector<double> k(dk.size());
  const auto objective = [&] {
    const auto p = s.as<double>();
    filter.forward(p.params(), k.data());
    return dot(k, dk);
  };
  objective();
  std::vector<double> gw0(s.w0.size()), gb0(s.b0.size()), gw1(s.w1.size()), gb1(s.b1.size()),
      gw2(s.w2.size()), gb2(s.b2.size()), gf(s.freq.size()), gwo(s.w_out.size());
  const auto p = s.as<double>();
  std::vector<double> dk_consumed = dk;  // backward scales its dK in place
  filter.backward(p.params(), dk_consumed.data(),
                  {gw0.data(), gb0.data(), gw1.data(), gb1.data(), gw2.data(), gb2.data(),
                   gf.data(), gwo.data()});
  expect_gradient_subset(rng, objective, &s.w0, gw0, "w0", 10, 1e-6, 1e-6);
  expect_gradient_subset(rng, objective, &s.freq, gf, "freq", 10, 1e-6, 1e-6);
  expect_gradient_subset(rng, objective, &s.w_out, gwo, "w_out", 10, 1e-6, 1e-6);
}

TEST(ImplicitFilter, FloatMatchesDouble) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int L = 4096;
  const FilterSet s(rng, 64, 4);
  const auto p64 = s.as<double>();
  const auto p32 = s.as<float>();
  ImplicitFilter<double> f64(cpu<double>(), L, s.R);
  ImplicitFilter<float> f32(cpu<float>(), L, s.R);
  std::vector<double> k64(static_cast<std::size_t>(s.R) * L);
  std::vector<float> k32(k64.size());
  f64.forward(p64.params(), k64.data());
  f32.forward(p32.params(), k32.data());
  expect_close(k32, k64, 1e-5, "K float");
}

}  // namespace
}  // namespace brt::kernels::test
