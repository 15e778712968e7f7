// Recurrent gates (model.md §5.3) and the softmax cross-entropy (model.md §1).
#include <omp.h>

#include <cmath>

#include "kernel_test_util.h"
#include "kernels/backend.h"

namespace brt::kernels::test {
namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(FixedGate, ForwardAndBackward) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (auto [n, D] : {std::pair{4, 5}, std::pair{3, 70}, std::pair{300, 130}}) {
    std::vector<double> carry = rng.normal(static_cast<std::size_t>(n) * D, 1.0);
    std::vector<double> u = rng.normal(carry.size(), 1.0);
    std::vector<double> bias = rng.normal(D, 1.0);
    std::vector<double> expected(carry.size());
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < D; ++j) {
        const double g = sigmoid(bias[j]);
        expected[i * D + j] = carry[i * D + j] * g + u[i * D + j] * (1 - g);
      }
    }
    auto bf = make_cpu_backend<float>();
    const auto cf = cast_to<float>(carry), uf = cast_to<float>(u), bfl = cast_to<float>(bias);
    std::vector<float> outf(carry.size());
    bf->fixed_gate_forward(cf.data(), uf.data(), bfl.data(), n, D, outf.data());
    expect_close(outf, expected, 1e-5, "out float");
    auto be = make_cpu_backend<double>();
    std::vector<double> out(carry.size());
    be->fixed_gate_forward(carry.data(), u.data(), bias.data(), n, D, out.data());
    expect_close(out, expected, 1e-14, "out double");
    if (n * D > 1000) continue;  // finite differences on the small shapes only
    const auto weights = rng.normal(out.size(), 1.0);
    std::vector<double> dcarry(out.size(), 0.0), du(out.size(), 0.0), dbias(D, 0.0);
    be->fixed_gate_backward(carry.data(), u.data(), bias.data(), weights.data(), n, D,
                            dcarry.data(), du.data(), dbias.data());
    const auto objective = [&] {
      be->fixed_gate_forward(carry.data(), u.data(), bias.data(), n, D, out.data());
      return dot(out, weights);
    };
    expect_gradient(objective, &carry, dcarry, "carry");
    expect_gradient(objective, &u, du, "u");
    expect_gradient(objective, &bias, dbias, "bias");
  }
}

TEST(LstmGate, ForwardAndBackward) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int n = 4, D = 6;
  const std::size_t size = static_cast<std::size_t>(n) * D;
  std::vector<double> carry = rng.normal(size, 1.0), u = rng.normal(size, 1.0);
  std::vector<double> zf = rng.normal(size, 1.5), zi = rng.normal(size, 1.5);
  std::vector<double> expected(size), ef(size), ei(size);
  for (std::size_t e = 0; e < size; ++e) {
    ef[e] = sigmoid(zf[e] + 1);
    ei[e] = sigmoid(zi[e] - 1);
    expected[e] = carry[e] * ef[e] + u[e] * ei[e];
  }
  auto bf = make_cpu_backend<float>();
  const auto cf = cast_to<float>(carry), uf = cast_to<float>(u);
  const auto zff = cast_to<float>(zf), zif = cast_to<float>(zi);
  std::vector<float> of(size), ff(size), iff(size);
  bf->lstm_gate_forward(cf.data(), uf.data(), zff.data(), zif.data(), n, D, of.data(), ff.data(),
                        iff.data());
  expect_close(of, expected, 1e-5, "out float");
  expect_close(ff, ef, 1e-5, "f float");
  expect_close(iff, ei, 1e-5, "i float");

  auto be = make_cpu_backend<double>();
  std::vector<double> out(size), f(size), i(size);
  be->lstm_gate_forward(carry.data(), u.data(), zf.data(), zi.data(), n, D, out.data(), f.data(),
                        i.data());
  expect_close(out, expected, 1e-14, "out");
  expect_close(f, ef, 1e-14, "f");
  expect_close(i, ei, 1e-14, "i");
  const auto weights = rng.normal(size, 1.0);
  std::vector<double> dcarry(size, 0.0), du(size, 0.0), dzf(size, 0.0), dzi(size, 0.0);
  be->lstm_gate_backward(carry.data(), u.data(), f.data(), i.data(), weights.data(), n, D,
                         dcarry.data(), du.data(), dzf.data(), dzi.data());
  const auto objective = [&] {
    be->lstm_gate_forward(carry.data(), u.data(), zf.data(), zi.data(), n, D, out.data(),
                          f.data(), i.data());
    return dot(out, weights);
  };
  expect_gradient(objective, &carry, dcarry, "carry");
  expect_gradient(objective, &u, du, "u");
  expect_gradient(objective, &zf, dzf, "zf");
  expect_gradient(objective, &zi, dzi, "zi");
}

struct XentCase {
  int n, V;
};

TEST(SoftmaxXent, ForwardMatchesReferenceWithMaskedRows) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (XentCase c : {XentCase{5, 7}, XentCase{64, 1000}}) {
    std::vector<double> logits = cast_to<double>(cast_to<float>(
        rng.normal(static_cast<std::size_t>(c.n) * c.V, 3.0)));
    std::vector<int32_t> targets(c.n);
    std::vector<uint8_t> mask(c.n);
    for (int r = 0; r < c.n; ++r) {
      mask[r] = r % 3 != 1;
      targets[r] = mask[r] ? rng.uniform_int(0, c.V - 1) : -1;  // masked rows: any target
    }
    logits[0] += 100;  // a large logit: the max-subtraction must keep this finite
    const double grad_scale = 0.37;
    std::vector<double> want_loss(c.n, 0.0), want_grad(logits.size(), 0.0);
    double want_total = 0;
    for (int r = 0; r < c.n; ++r) {
      if (!mask[r]) continue;
      const double* x = &logits[static_cast<std::size_t>(r) * c.V];
      double m = x[0];
      for (int j = 0; j < c.V; ++j) m = std::max(m, x[j]);
      double s = 0;
      for (int j = 0; j < c.V; ++j) s += std::exp(x[j] - m);
      want_loss[r] = std::log(s) + m - x[targets[r]];
      want_total += want_loss[r];
      for (int j = 0; j < c.V; ++j) {
        want_grad[static_cast<std::size_t>(r) * c.V + j] =
            grad_scale * (std::exp(x[j] - m) / s - (j == targets[r] ? 1.0 : 0.0));
      }
    }
    auto be = make_cpu_backend<double>();
    std::vector<double> dl(logits.size(), 9.0), loss(c.n, 9.0);
    const double total = be->softmax_xent_forward_backward(
        logits.data(), targets.data(), mask.data(), c.n, c.V, grad_scale, dl.data(), loss.data());
    EXPECT_NEAR(total, want_total, 1e-12 * std::abs(want_total));
    expect_close(loss, want_loss, 1e-13, "row_loss double");
    expect_close(dl, want_grad, 1e-13, "dlogits double");

    auto bf = make_cpu_backend<float>();
    std::vector<float> lf = cast_to<float>(logits), lossf(c.n);
    const double totalf = bf->softmax_xent_forward_backward(
        lf.data(), targets.data(), mask.data(), c.n, c.V, static_cast<float>(grad_scale),
        lf.data(), lossf.data());  // dlogits aliases logits
    EXPECT_NEAR(totalf, want_total, 1e-5 * std::abs(want_total));
    expect_close(lossf, want_loss, 1e-5, "row_loss float");
    expect_close(lf, want_grad, 1e-5, "dlogits float (aliased)");
  }
}

TEST(SoftmaxXent, GradientMatchesFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int n = 4, V = 6;
  std::vector<double> logits = rng.normal(n * V, 2.0);
  const std::vector<int32_t> targets = {1, 5, 0, 3};
  const std::vector<uint8_t> mask = {1, 1, 0, 1};
  auto be = make_cpu_backend<double>();
  std::vector<double> dl(logits.size()), loss(n);
  be->softmax_xent_forward_backward(logits.data(), targets.data(), mask.data(), n, V, 1.0,
                                    dl.data(), loss.data());
  const auto objective = [&] {
    std::vector<double> scratch(logits.size()), l(n);
    return be->softmax_xent_forward_backward(logits.data(), targets.data(), mask.data(), n, V,
                                             1.0, scratch.data(), l.data());
  };
  expect_gradient(objective, &logits, dl, "logits");
  EXPECT_EQ(loss[2], 0.0);
  for (int j = 0; j < V; ++j) EXPECT_EQ(dl[2 * V + j], 0.0);  // masked row: zero gradient
}

TEST(SoftmaxXent, DeterministicAndValidatesTargets) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int n = 200, V = 500;
  const auto logits = cast_to<float>(rng.normal(static_cast<std::size_t>(n) * V, 2.0));
  std::vector<int32_t> targets(n);
  for (int32_t& t : targets) t = rng.uniform_int(0, V - 1);
  const std::vector<uint8_t> mask(n, 1);
  auto be = make_cpu_backend<float>();
  std::vector<float> d1(logits.size()), d2(logits.size()), l1(n), l2(n);
  const double t1 = be->softmax_xent_forward_backward(logits.data(), targets.data(), mask.data(),
                                                      n, V, 1.0f, d1.data(), l1.data());
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const double t2 = be->softmax_xent_forward_backward(logits.data(), targets.data(), mask.data(),
                                                      n, V, 1.0f, d2.data(), l2.data());
  omp_set_num_threads(threads);
  EXPECT_EQ(t1, t2);
  EXPECT_EQ(d1, d2);
  EXPECT_EQ(l1, l2);
  targets[7] = V;
  EXPECT_THROW(be->softmax_xent_forward_backward(logits.data(), targets.data(), mask.data(), n, V,
                                                 1.0f, d1.data(), l1.data()),
               std::runtime_error);
}

TEST(FastExp, FloatExpIsAccurate) {
  // The float backend's vectorised exp (kernels/cpu/fast_math.h) through the softmax: for
  // the row [0, x] with target 0, dlogits[1] = e^x / (1 + e^x), relative error ~1e-7.
  auto be = make_cpu_backend<float>();
  for (double x = -87.0; x <= 20.0; x += 0.37) {
    const std::vector<float> logits = {0.0f, static_cast<float>(x)};
    const int32_t target = 0;
    const uint8_t mask = 1;
    std::vector<float> d(2), loss(1);
    be->softmax_xent_forward_backward(logits.data(), &target, &mask, 1, 2, 1.0f, d.data(),
                                      loss.data());
    const double e = std::exp(static_cast<double>(logits[1]));
    EXPECT_NEAR(d[1], e / (1 + e), 1e-6 * e / (1 + e)) << "x = " << x;
  }
}

}  // namespace
}  // namespace brt::kernels::test
