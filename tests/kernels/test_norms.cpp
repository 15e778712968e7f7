// RMSNorm (model.md §2) and per-head L2 normalisation (model.md §3.1).
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernel_test_util.h"
#include "kernels/backend.h"

namespace brt::kernels::test {
namespace {

struct RmsRef {
  std::vector<double> y, rstd;
};

RmsRef reference_rmsnorm(const std::vector<double>& x, const std::vector<double>& gamma, int n,
                         int D) {
  RmsRef r{std::vector<double>(x.size()), std::vector<double>(n)};
  for (int i = 0; i < n; ++i) {
    double ms = 0;
    for (int j = 0; j < D; ++j) ms += x[i * D + j] * x[i * D + j] / D;
    r.rstd[i] = 1.0 / std::sqrt(ms + 1e-6);
    for (int j = 0; j < D; ++j) r.y[i * D + j] = x[i * D + j] * r.rstd[i] * gamma[j];
  }
  return r;
}

template <typename T>
void check_rmsnorm_forward(int n, int D, double tol) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const auto x = cast_to<double>(cast_to<T>(rng.normal(static_cast<std::size_t>(n) * D, 1.0)));
  const auto gamma = cast_to<double>(cast_to<T>(rng.uniform(D, 0.5, 1.5)));
  const RmsRef ref = reference_rmsnorm(x, gamma, n, D);
  auto be = make_cpu_backend<T>();
  const auto xt = cast_to<T>(x), gt = cast_to<T>(gamma);
  std::vector<T> y(x.size()), rstd(n);
  be->rmsnorm_forward(xt.data(), gt.data(), n, D, y.data(), rstd.data());
  expect_close(y, ref.y, tol, "y");
  expect_close(rstd, ref.rstd, tol, "rstd");
}

TEST(RmsNorm, ForwardMatchesReference) {
  check_rmsnorm_forward<double>(6, 10, 1e-13);
  check_rmsnorm_forward<float>(6, 10, 1e-5);
  check_rmsnorm_forward<float>(300, 160, 1e-5);  // parallel path
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  auto be = make_cpu_backend<double>();
  for (auto [n, D] : {std::pair{4, 6}, std::pair{3, 70}}) {  // one and two column chunks
    std::vector<double> x = rng.normal(static_cast<std::size_t>(n) * D, 1.0);
    std::vector<double> gamma = rng.uniform(D, 0.5, 1.5);
    const auto weights = rng.normal(x.size(), 1.0);
    std::vector<double> y(x.size()), rstd(n);
    be->rmsnorm_forward(x.data(), gamma.data(), n, D, y.data(), rstd.data());
    std::vector<double> dx(x.size(), 0.0), dgamma(D, 0.0);
    be->rmsnorm_backward(x.data(), gamma.data(), rstd.data(), weights.data(), n, D, dx.data(),
                         dgamma.data());
    const auto objective = [&] {
      be->rmsnorm_forward(x.data(), gamma.data(), n, D, y.data(), rstd.data());
      return dot(y, weights);
    };
    expect_gradient(objective, &x, dx, "x");
    expect_gradient(objective, &gamma, dgamma, "gamma");
    // Accumulation: a second call adds the same gradient again.
    std::vector<double> dx2(dx), dgamma2(dgamma);
    be->rmsnorm_forward(x.data(), gamma.data(), n, D, y.data(), rstd.data());
    be->rmsnorm_backward(x.data(), gamma.data(), rstd.data(), weights.data(), n, D, dx2.data(),
                         dgamma2.data());
    for (double& e : dx) e *= 2;
    for (double& e : dgamma) e *= 2;
    expect_close(dx2, dx, 1e-14, "dx twice");
    expect_close(dgamma2, dgamma, 1e-14, "dgamma twice");
  }
}

// rmsnorm_backward_residual in one pass equals its definition (kernels/backend.h: fill / copy /
// add_inplace, then rmsnorm_backward) bit for bit, in its four forms: written or accumulated,
// with or without a residual. Contract: bit-exact (the same additions in the same order).
template <typename T>
void check_rmsnorm_backward_residual(int n, int D) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  auto be = make_cpu_backend<T>();
  const std::size_t size = static_cast<std::size_t>(n) * D;
  const auto x = cast_to<T>(rng.normal(size, 1.0)), gamma = cast_to<T>(rng.uniform(D, 0.5, 1.5));
  const auto dy = cast_to<T>(rng.normal(size, 1.0)), residual = cast_to<T>(rng.normal(size, 1.0));
  const auto dx0 = cast_to<T>(rng.normal(size, 1.0)), dgamma0 = cast_to<T>(rng.normal(D, 1.0));
  std::vector<T> y(size), rstd(n);
  be->rmsnorm_forward(x.data(), gamma.data(), n, D, y.data(), rstd.data());
  for (const bool accumulate : {false, true})
    for (const T* res : {static_cast<const T*>(nullptr), residual.data()}) {
      SCOPED_TRACE(std::string(accumulate ? "accumulate" : "write") + (res ? ", residual" : ", no residual"));
      std::vector<T> dx(dx0), dgamma(dgamma0), dx_ref(dx0), dgamma_ref(dgamma0);
      be->rmsnorm_backward_residual(x.data(), gamma.data(), rstd.data(), dy.data(), res, accumulate, n, D,
                                    dx.data(), dgamma.data());
      be->Backend<T>::rmsnorm_backward_residual(x.data(), gamma.data(), rstd.data(), dy.data(), res, accumulate,
                                                n, D, dx_ref.data(), dgamma_ref.data());
      EXPECT_EQ(std::memcmp(dx.data(), dx_ref.data(), size * sizeof(T)), 0) << "dx";
      EXPECT_EQ(std::memcmp(dgamma.data(), dgamma_ref.data(), D * sizeof(T)), 0) << "dgamma";
      // What the forms mean: dx - base is the same gradient in all four.
      std::vector<double> term(size);
      for (std::size_t i = 0; i < size; ++i)
        term[i] = double(dx[i]) - (accumulate ? double(dx0[i]) : 0.0) - (res ? double(res[i]) : 0.0);
      std::vector<T> plain(size, T(0)), dg(D, T(0));
      be->rmsnorm_backward(x.data(), gamma.data(), rstd.data(), dy.data(), n, D, plain.data(), dg.data());
      expect_close(plain, term, std::is_same_v<T, float> ? 1e-5 : 1e-13, "dx - base");
    }
}

TEST(RmsNorm, BackwardIntoTheResidualEqualsItsDefinitionBitForBit) {
  check_rmsnorm_backward_residual<double>(4, 70);
  check_rmsnorm_backward_residual<float>(4, 70);
  check_rmsnorm_backward_residual<float>(300, 160);  // parallel path
}

TEST(HeadL2Norm, ForwardMatchesReferenceAndMayAlias) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int n = 5, H = 3, dh = 4;
  const auto x = cast_to<double>(cast_to<float>(rng.normal(n * H * dh, 1.0)));
  std::vector<double> y(x.size()), rnorm(n * H);
  for (int r = 0; r < n * H; ++r) {
    double ss = 0;
    for (int j = 0; j < dh; ++j) ss += x[r * dh + j] * x[r * dh + j];
    rnorm[r] = 1.0 / std::sqrt(ss + 1e-6);
    for (int j = 0; j < dh; ++j) y[r * dh + j] = x[r * dh + j] * rnorm[r];
  }
  auto bd = make_cpu_backend<double>();
  std::vector<double> yd(x), rd(n * H);
  bd->head_l2norm_forward(yd.data(), n, H, dh, yd.data(), rd.data());  // in place
  expect_close(yd, y, 1e-14, "y double");
  expect_close(rd, rnorm, 1e-14, "rnorm double");
  auto bf = make_cpu_backend<float>();
  const auto xf = cast_to<float>(x);
  std::vector<float> yf(x.size()), rf(n * H);
  bf->head_l2norm_forward(xf.data(), n, H, dh, yf.data(), rf.data());
  expect_close(yf, y, 1e-6, "y float");
  expect_close(rf, rnorm, 1e-6, "rnorm float");
  // A zero vector (document-start cache keys) normalises to zero.
  std::vector<double> zeros(dh, 0.0), out(dh, 1.0), rz(1);
  bd->head_l2norm_forward(zeros.data(), 1, 1, dh, out.data(), rz.data());
  for (double e : out) EXPECT_EQ(e, 0.0);
}

TEST(HeadL2Norm, BackwardMatchesFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  auto be = make_cpu_backend<double>();
  const int n = 4, H = 3, dh = 5;
  std::vector<double> x = rng.normal(n * H * dh, 1.0);
  const auto weights = rng.normal(x.size(), 1.0);
  std::vector<double> y(x.size()), rnorm(n * H);
  be->head_l2norm_forward(x.data(), n, H, dh, y.data(), rnorm.data());
  std::vector<double> dx(x.size(), 7.0);  // written, whatever it held
  be->head_l2norm_backward(y.data(), rnorm.data(), weights.data(), n, H, dh, dx.data());
  const auto objective = [&] {
    be->head_l2norm_forward(x.data(), n, H, dh, y.data(), rnorm.data());
    return dot(y, weights);
  };
  expect_gradient(objective, &x, dx, "x");
}

}  // namespace
}  // namespace brt::kernels::test
