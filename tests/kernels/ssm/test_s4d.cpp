// S4D kernels (model.md §7.1) and the carried state (model.md §7.3): the generated kernel equals the
// closed form and, convolved with u, the unrolled ZOH recurrence; its gradients match finite
// differences; streaming a document in segments with the carry equals one long convolution.
#include <gtest/gtest.h>

#include <complex>
#include <numbers>

#include "kernels/ssm/fft_conv.h"
#include "kernels/ssm/s4d_kernel.h"
#include "tests/kernels/ssm/ssm_test_util.h"

namespace brt::kernels::test {
namespace {

using ssm::S4dCarryDims;
using ssm::S4dDims;
using cplx = std::complex<double>;

// Owned float64 parameters of R filters with M modes, S4D-Lin initialised (random log Δ, C).
struct S4dSet {
  int R, M;
  std::vector<double> log_dt, a_re, a_im, c_re, c_im;
  S4dSet(Rng& rng, int filters, int modes) : R(filters), M(modes) {
    const std::size_t n = static_cast<std::size_t>(R) * M;
    a_re.resize(n);
    a_im.resize(n);
    ssm::s4d_lin_init_modes(R, M, a_re.data(), a_im.data());
    for (double u : rng.uniform(R, 0.0, 1.0)) log_dt.push_back(ssm::s4d_log_dt_from_uniform(u));
    c_re = rng.normal(n, std::sqrt(0.5));
    c_im = rng.normal(n, std::sqrt(0.5));
  }
  ssm::S4dParams<double> params() const {
    return {log_dt.data(), a_re.data(), a_im.data(), c_re.data(), c_im.data()};
  }
  // The same values cast to float (the float vectors must outlive the returned params).
  struct Float {
    std::vector<float> log_dt, a_re, a_im, c_re, c_im;
    ssm::S4dParams<float> params() const {
      return {log_dt.data(), a_re.data(), a_im.data(), c_re.data(), c_im.data()};
    }
  };
  Float as_float() const {
    return {cast_to<float>(log_dt), cast_to<float>(a_re), cast_to<float>(a_im),
            cast_to<float>(c_re), cast_to<float>(c_im)};
  }
  // Mode n of filter r in closed form (independent of the kernel's own helper).
  cplx a(int r, int n) const { return {-std::exp(a_re[r * M + n]), a_im[r * M + n]}; }
  cplx c(int r, int n) const { return {c_re[r * M + n], c_im[r * M + n]}; }
  double dt(int r) const { return std::exp(log_dt[r]); }
};

std::vector<double> kernel_of(const S4dSet& s, int L) {
  std::vector<double> k(static_cast<std::size_t>(s.R) * L);
  ssm::s4d_kernel_forward<double>({s.R, s.M, L}, s.params(), k.data());
  return k;
}

TEST(S4dKernel, InitialisationIsS4dLin) {
  std::vector<double> a_re(2 * 3), a_im(2 * 3);
  ssm::s4d_lin_init_modes(2, 3, a_re.data(), a_im.data());
  for (int n = 0; n < 3; ++n) {
    EXPECT_DOUBLE_EQ(a_re[3 + n], std::log(0.5));
    EXPECT_DOUBLE_EQ(a_im[3 + n], std::numbers::pi * n);
  }
  EXPECT_DOUBLE_EQ(ssm::s4d_log_dt_from_uniform(0.0), std::log(1e-3));
  EXPECT_NEAR(ssm::s4d_log_dt_from_uniform(1.0), std::log(1e-1), 1e-15);
}

TEST(S4dKernel, MatchesClosedFormOverLongKernels) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int L = 5000;
  const S4dSet s(rng, 3, 8);
  const std::vector<double> k = kernel_of(s, L);
  std::vector<double> expected(k.size());
  for (int r = 0; r < s.R; ++r)
    for (int l = 0; l < L; ++l) {
      cplx sum = 0;
      for (int n = 0; n < s.M; ++n) {
        const cplx dta = s.dt(r) * s.a(r, n);
        sum += s.c(r, n) * (std::exp(dta) - 1.0) / s.a(r, n) * std::exp(double(l) * dta);
      }
      expected[r * L + l] = 2 * sum.real();
    }
  expect_close(k, expected, 1e-11, "K");
}

TEST(S4dKernel, ConvolutionEqualsUnrolledZohRecurrence) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int B = 2, C = 2, F = 3, L = 300, M = 6;
  const S4dSet s(rng, C * F, M);
  const std::vector<double> k = kernel_of(s, L);
  const std::vector<double> u = rng.normal(static_cast<std::size_t>(B) * L * F, 1.0);
  const std::vector<double> dskip = rng.normal(static_cast<std::size_t>(C) * F, 1.0);
  std::vector<double> y(static_cast<std::size_t>(B) * C * L * F);
  ssm::FftConv<double> conv(L, C);
  conv.forward({B, C, L, F}, k.data(), u.data(), dskip.data(), y.data());

  // x_t = Ā x_{t−1} + B̄ u_t, y_t = 2 Re(C x_t) + D u_t; Ā = exp(ΔA), B̄ = (exp(ΔA) − 1)/A · B.
  std::vector<double> expected(y.size());
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c)
      for (int f = 0; f < F; ++f) {
        const int r = c * F + f;
        std::vector<cplx> x(M, 0.0);
        for (int t = 0; t < L; ++t) {
          const double ut = u[(b * L + t) * F + f];
          cplx out = 0;
          for (int n = 0; n < M; ++n) {
            const cplx dta = s.dt(r) * s.a(r, n);
            x[n] = std::exp(dta) * x[n] + (std::exp(dta) - 1.0) / s.a(r, n) * 1.0 * ut;
            out += s.c(r, n) * x[n];
          }
          expected[((b * C + c) * L + t) * F + f] = 2 * out.real() + dskip[r] * ut;
        }
      }
  expect_close(y, expected, 1e-10, "y");
}

TEST(S4dKernel, GradientsMatchFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int L = 80;
  S4dSet s(rng, 3, 4);
  // Move a_re off its init so every filter's modes differ, and use larger steps so
  // the kernel varies over the window.
  for (double& a : s.a_re) a += rng.uniform(1, -0.5, 0.5)[0];
  for (double& ldt : s.log_dt) ldt = std::log(rng.uniform(1, 0.02, 0.2)[0]);
  const std::vector<double> dk = rng.normal(static_cast<std::size_t>(s.R) * L, 1.0);
  const auto objective = [&] { return dot(kernel_of(s, L), dk); };
  std::vector<double> g_dt(s.R), g_ar(s.a_re.size()), g_ai(s.a_re.size()), g_cr(s.a_re.size()),
      g_ci(s.a_re.size());
  ssm::s4d_kernel_backward<double>(
      {s.R, s.M, L}, s.params(), dk.data(),
      {g_dt.data(), g_ar.data(), g_ai.data(), g_cr.data(), g_ci.data()});
  expect_gradient(objective, &s.log_dt, g_dt, "log_dt", 1e-6, 1e-6);
  expect_gradient(objective, &s.a_re, g_ar, "a_re", 1e-6, 1e-6);
  expect_gradient(objective, &s.a_im, g_ai, "a_im", 1e-6, 1e-6);
  expect_gradient(objective, &s.c_re, g_cr, "c_re", 1e-6, 1e-6);
  expect_gradient(objective, &s.c_im, g_ci, "c_im", 1e-6, 1e-6);
}

TEST(S4dKernel, FloatMatchesDouble) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int L = 4096;
  const S4dSet s(rng, 4, 16);
  const auto sf = s.as_float();
  std::vector<float> k32(static_cast<std::size_t>(s.R) * L);
  ssm::s4d_kernel_forward<float>({s.R, s.M, L}, sf.params(), k32.data());
  // Reference from the float-rounded parameters, so only the kernel's arithmetic differs.
  S4dSet rounded = s;
  for (auto* v : {&rounded.log_dt, &rounded.a_re, &rounded.a_im, &rounded.c_re, &rounded.c_im})
    for (double& x : *v) x = static_cast<float>(x);
  expect_close(k32, kernel_of(rounded, L), 1e-6, "K float");
}

// Streams a document of `segments` segments of length L through FftConv + the §7.3 carry and
// compares with one convolution over the whole document.
template <typename T>
void check_streaming(int segments, double tol) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int B = 2, C = 2, F = 3, M = 8, L = 48, N = segments * L;
  const S4dSet s(rng, C * F, M);
  const std::vector<double> u_doc = rng.normal(static_cast<std::size_t>(B) * N * F, 1.0);
  const std::vector<double> dskip = rng.normal(static_cast<std::size_t>(C) * F, 1.0);
  S4dSet rounded = s;  // the reference sees the parameters T sees
  for (auto* v : {&rounded.log_dt, &rounded.a_re, &rounded.a_im, &rounded.c_re, &rounded.c_im})
    for (double& x : *v) x = static_cast<T>(x);
  std::vector<double> y_doc(static_cast<std::size_t>(B) * C * N * F);
  ssm::FftConv<double> whole(N, C);
  whole.forward({B, C, N, F}, kernel_of(rounded, N).data(), u_doc.data(), dskip.data(),
                y_doc.data());

  const std::vector<T> log_dt(s.log_dt.begin(), s.log_dt.end()), a_re(s.a_re.begin(), s.a_re.end()),
      a_im(s.a_im.begin(), s.a_im.end()), c_re(s.c_re.begin(), s.c_re.end()),
      c_im(s.c_im.begin(), s.c_im.end());
  const ssm::S4dParams<T> p{log_dt.data(), a_re.data(), a_im.data(), c_re.data(), c_im.data()};
  std::vector<T> k(static_cast<std::size_t>(s.R) * L);
  ssm::s4d_kernel_forward<T>({s.R, M, L}, p, k.data());
  const std::vector<T> dskip_t(dskip.begin(), dskip.end());
  ssm::FftConv<T> conv(L, C);
  const S4dCarryDims cd{B, C, F, M, L};
  std::vector<double> state(static_cast<std::size_t>(B) * C * F * M * 2, 0.0);
  std::vector<T> u_seg(static_cast<std::size_t>(B) * L * F),
      y_seg(static_cast<std::size_t>(B) * C * L * F);
  for (int seg = 0; seg < segments; ++seg) {
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < L; ++t)
        for (int f = 0; f < F; ++f)
          u_seg[(b * L + t) * F + f] = static_cast<T>(u_doc[(b * N + seg * L + t) * F + f]);
    conv.forward({B, C, L, F}, k.data(), u_seg.data(), dskip_t.data(), y_seg.data());
    ssm::s4d_carry_apply<T>(cd, p, state.data(), y_seg.data());
    ssm::s4d_carry_update<T>(cd, p, u_seg.data(), state.data());
    std::vector<double> expected(y_seg.size());
    for (int b = 0; b < B; ++b)
      for (int c = 0; c < C; ++c)
        for (int t = 0; t < L; ++t)
          for (int f = 0; f < F; ++f)
            expected[((b * C + c) * L + t) * F + f] =
                y_doc[((b * C + c) * N + seg * L + t) * F + f];
    expect_close(y_seg, expected, tol, "segment " + std::to_string(seg));
  }
}

TEST(S4dCarry, StreamingTwoSegmentsEqualsOneConvolutionDouble) {
  check_streaming<double>(2, 1e-10);
}
TEST(S4dCarry, StreamingThreeSegmentsEqualsOneConvolutionDouble) {
  check_streaming<double>(3, 1e-10);
}
TEST(S4dCarry, StreamingThreeSegmentsEqualsOneConvolutionFloat) { check_streaming<float>(3, 1e-5); }

}  // namespace
}  // namespace brt::kernels::test
