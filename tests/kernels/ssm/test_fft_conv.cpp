// FftConv (model.md §7.1): FFT causal convolution equals the direct sum in float64, its backward
// equals the direct correlations and central finite differences, and the float path agrees
// with the double path to fp32 rounding.
#include <gtest/gtest.h>

#include "kernels/ssm/fft_conv.h"
#include "tests/kernels/ssm/ssm_test_util.h"

namespace brt::kernels::test {
namespace {

using ssm::FftConv;
using ssm::FftConvDims;

struct ConvCase {
  int B, C, L, F;
};

struct ConvInputs {
  std::vector<double> k, u, dskip, dy;
};

ConvInputs make_inputs(Rng& rng, const ConvCase& s) {
  ConvInputs in;
  in.k = rng.normal(static_cast<std::size_t>(s.C) * s.F * s.L, 1.0 / std::sqrt(s.L));
  in.u = rng.normal(static_cast<std::size_t>(s.B) * s.L * s.F, 1.0);
  in.dskip = rng.normal(static_cast<std::size_t>(s.C) * s.F, 1.0);
  in.dy = rng.normal(static_cast<std::size_t>(s.B) * s.C * s.L * s.F, 1.0);
  return in;
}

class FftConvSizes : public ::testing::TestWithParam<ConvCase> {};

TEST_P(FftConvSizes, ForwardAndBackwardMatchDirectReference) {
  const ConvCase s = GetParam();
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const ConvInputs in = make_inputs(rng, s);
  FftConv<double> conv(s.L, s.C);
  EXPECT_GE(conv.n_fft(), 2 * s.L);
  const FftConvDims d{s.B, s.C, s.L, s.F};

  std::vector<double> y(in.dy.size(), 7.0);  // forward must overwrite
  conv.forward(d, in.k.data(), in.u.data(), in.dskip.data(), y.data());
  expect_close(y, direct_causal_conv(s.B, s.C, s.L, s.F, in.k, in.u, in.dskip), 1e-12, "y");

  // Backward accumulates: start from a known offset and subtract it.
  const double offset = 0.5;
  std::vector<double> du(in.u.size(), offset), dk(in.k.size(), offset), dd(in.dskip.size(), offset);
  conv.backward(d, in.k.data(), in.u.data(), in.dskip.data(), in.dy.data(), du.data(), dk.data(),
                dd.data());
  for (auto* v : {&du, &dk, &dd})
    for (double& x : *v) x -= offset;
  const ConvGrads ref =
      direct_causal_conv_backward(s.B, s.C, s.L, s.F, in.k, in.u, in.dskip, in.dy);
  expect_close(du, ref.du, 1e-12, "du");
  expect_close(dk, ref.dk, 1e-12, "dk");
  expect_close(dd, ref.ddskip, 1e-12, "ddskip");
}

INSTANTIATE_TEST_SUITE_P(Lengths, FftConvSizes,
                         ::testing::Values(ConvCase{2, 1, 1, 3}, ConvCase{2, 3, 7, 4},
                                           ConvCase{1, 2, 1000, 3}, ConvCase{1, 1, 4096, 2}),
                         [](const auto& info) { return "L" + std::to_string(info.param.L); });

TEST(FftConv, BackwardMatchesFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const ConvCase s : {ConvCase{2, 2, 7, 3}, ConvCase{2, 2, 1000, 2}}) {
    ConvInputs in = make_inputs(rng, s);
    FftConv<double> conv(s.L, s.C);
    const FftConvDims d{s.B, s.C, s.L, s.F};
    std::vector<double> y(in.dy.size());
    // objective = <dy, y>, whose gradient is exactly what backward computes for dy.
    const auto objective = [&] {
      conv.forward(d, in.k.data(), in.u.data(), in.dskip.data(), y.data());
      return dot(y, in.dy);
    };
    std::vector<double> du(in.u.size()), dk(in.k.size()), dd(in.dskip.size());
    conv.backward(d, in.k.data(), in.u.data(), in.dskip.data(), in.dy.data(), du.data(), dk.data(),
                  dd.data());
    // The objective is linear in each argument, so central differences are exact up to
    // rounding of a sum of ~B·C·L·F terms.
    expect_gradient_subset(rng, objective, &in.u, du, "u", 40, 1e-3, 1e-7);
    expect_gradient_subset(rng, objective, &in.k, dk, "k", 40, 1e-3, 1e-7);
    expect_gradient_subset(rng, objective, &in.dskip, dd, "dskip", 40, 1e-3, 1e-7);
  }
}

TEST(FftConv, NullOutputsAreSkippedAndNoSkipTermWorks) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const ConvCase s{2, 2, 33, 3};
  const ConvInputs in = make_inputs(rng, s);
  FftConv<double> conv(s.L, s.C);
  const FftConvDims d{s.B, s.C, s.L, s.F};
  std::vector<double> y(in.dy.size());
  conv.forward(d, in.k.data(), in.u.data(), nullptr, y.data());
  expect_close(y, direct_causal_conv(s.B, s.C, s.L, s.F, in.k, in.u, {}), 1e-12, "y (no skip)");
  std::vector<double> dk(in.k.size());
  conv.backward(d, in.k.data(), in.u.data(), nullptr, in.dy.data(), nullptr, dk.data(), nullptr);
  const ConvGrads ref = direct_causal_conv_backward(s.B, s.C, s.L, s.F, in.k, in.u, {}, in.dy);
  expect_close(dk, ref.dk, 1e-12, "dk only");
}

TEST(FftConv, FloatMatchesDoubleToFp32Rounding) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const ConvCase s{2, 2, 4096, 3};
  const ConvInputs in = make_inputs(rng, s);
  const FftConvDims d{s.B, s.C, s.L, s.F};
  FftConv<double> conv64(s.L, s.C);
  FftConv<float> conv32(s.L, s.C);
  std::vector<double> y64(in.dy.size()), du64(in.u.size()), dk64(in.k.size()),
      dd64(in.dskip.size());
  conv64.forward(d, in.k.data(), in.u.data(), in.dskip.data(), y64.data());
  conv64.backward(d, in.k.data(), in.u.data(), in.dskip.data(), in.dy.data(), du64.data(),
                  dk64.data(), dd64.data());
  const auto k = cast_to<float>(in.k), u = cast_to<float>(in.u), ds = cast_to<float>(in.dskip),
             dy = cast_to<float>(in.dy);
  std::vector<float> y(in.dy.size()), du(in.u.size()), dk(in.k.size()), dd(in.dskip.size());
  conv32.forward(d, k.data(), u.data(), ds.data(), y.data());
  conv32.backward(d, k.data(), u.data(), ds.data(), dy.data(), du.data(), dk.data(), dd.data());
  expect_close(y, y64, 1e-5, "y float");
  expect_close(du, du64, 1e-5, "du float");
  expect_close(dk, dk64, 1e-5, "dk float");
  expect_close(dd, dd64, 1e-5, "ddskip float");
}

TEST(FftConv, ResultDoesNotDependOnThreadCount) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const ConvCase s{2, 2, 300, 5};
  const ConvInputs in = make_inputs(rng, s);
  const auto k = cast_to<float>(in.k), u = cast_to<float>(in.u), ds = cast_to<float>(in.dskip);
  const FftConvDims d{s.B, s.C, s.L, s.F};
  FftConv<float> serial(s.L, s.C, 1), parallel(s.L, s.C, 3);
  std::vector<float> y1(in.dy.size()), y3(in.dy.size());
  serial.forward(d, k.data(), u.data(), ds.data(), y1.data());
  parallel.forward(d, k.data(), u.data(), ds.data(), y3.data());
  EXPECT_EQ(y1, y3);
}

TEST(FftConv, FriendlySizes) {
  EXPECT_EQ(ssm::fft_friendly_size(2), 2);
  EXPECT_EQ(ssm::fft_friendly_size(2000), 2000);
  EXPECT_EQ(ssm::fft_friendly_size(8192), 8192);
  EXPECT_EQ(ssm::fft_friendly_size(14), 15);
  EXPECT_THROW(FftConv<float>(0, 1), std::runtime_error);
}

}  // namespace
}  // namespace brt::kernels::test
