// The unstructured (Hyena-style implicit) filter of model.md §7.1: forward against a naive
// per-tap float64 evaluation, gradients of every parameter against central differences, and
// the float path against the double path. The network runs as Backend calls (here the CPU
// backend's, on host vectors); on the GPU the same calls are device kernels and cuBLAS
// (tests/kernels/cuda check the filter ops against these).
#include <gtest/gtest.h>

#include <memory>
#include <numbers>

#include "kernels/backend.h"
#include "kernels/implicit_filter.h"
#include "tests/kernels/ssm/ssm_test_util.h"

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

// The filter's K in T at the set's parameters (cast to T), into a buffer first filled with `fill`.
template <typename T>
std::vector<T> filter_kernel(const FilterSet& s, int L, T fill = T(0)) {
  const auto p = s.as<T>();
  ImplicitFilter<T> filter(cpu<T>(), L, s.R, s.O);
  std::vector<T> k(static_cast<std::size_t>(s.R) * L, fill);
  filter.forward(p.params(), k.data());
  return k;
}

// <K, dK> for a fixed random dK, K the double filter's output at the parameters in the set as
// they are at each call (the finite differences move them), and the analytic gradient of it.
class FilterObjective {
 public:
  FilterObjective(Rng& rng, const FilterSet& s, int L)
      : s_(s),
        dk_(rng.normal(static_cast<std::size_t>(s.R) * L, 1.0)),
        filter_(cpu<double>(), L, s.R, s.O),
        k_(dk_.size()) {}
  double value() {
    const auto p = s_.as<double>();
    filter_.forward(p.params(), k_.data());
    return dot(k_, dk_);
  }
  // One backward at the set's parameters, after the forward that leaves its activations.
  FilterSet::Cast<double> gradients() {
    value();  // activations for backward
    FilterSet::Cast<double> g{
        std::vector<double>(s_.w0.size()),   std::vector<double>(s_.b0.size()),
        std::vector<double>(s_.w1.size()),   std::vector<double>(s_.b1.size()),
        std::vector<double>(s_.w2.size()),   std::vector<double>(s_.b2.size()),
        std::vector<double>(s_.freq.size()), std::vector<double>(s_.w_out.size())};
    const auto p = s_.as<double>();
    std::vector<double> dk_consumed = dk_;  // backward scales its dK in place
    filter_.backward(p.params(), dk_consumed.data(),
                     {g.w0.data(), g.b0.data(), g.w1.data(), g.b1.data(), g.w2.data(),
                      g.b2.data(), g.freq.data(), g.w_out.data()});
    return g;
  }

 private:
  const FilterSet& s_;
  const std::vector<double> dk_;
  ImplicitFilter<double> filter_;
  std::vector<double> k_;
};

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
  expect_close(filter_kernel<double>(s, L, 3.0), reference_kernel(s, L), 1e-12, "K");
}

TEST(ImplicitFilter, GradientsMatchFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int L = 37;
  FilterSet s(rng, 8, 5);
  FilterObjective f(rng, s, L);
  const auto objective = [&] { return f.value(); };
  const auto g = f.gradients();
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
  FilterObjective f(rng, s, L);
  const auto objective = [&] { return f.value(); };
  const auto g = f.gradients();
  expect_gradient_subset(rng, objective, &s.w0, g.w0, "w0", 10, 1e-6, 1e-6);
  expect_gradient_subset(rng, objective, &s.freq, g.freq, "freq", 10, 1e-6, 1e-6);
  expect_gradient_subset(rng, objective, &s.w_out, g.w_out, "w_out", 10, 1e-6, 1e-6);
}

TEST(ImplicitFilter, FloatMatchesDouble) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int L = 4096;
  const FilterSet s(rng, 64, 4);
  expect_close(filter_kernel<float>(s, L), filter_kernel<double>(s, L), 1e-5, "K float");
}

}  // namespace
}  // namespace brt::kernels::test
