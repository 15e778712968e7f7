// Window attention (model.md §3.2/§3.3) against the float64 reference and finite differences.
#include <omp.h>

#include "window_attention_fixture.h"

namespace brt::kernels::test {
namespace {

struct WindowCase {
  const char* name;
  WindowAttnDims dims;
  int panel;  // CpuOptions::attention_panel_rows (the kernel picks a divisor of W)
  bool zero_cache;
};

// Small shapes that cover one panel per block, several panels, single-row panels, a panel
// size that is not a divisor, Transformer-XL (W == N) and a document start (zero cache).
const WindowCase kSmallCases[] = {
    {"one_panel", {2, 24, 8, 2, 4}, 64, false},
    {"two_panels", {2, 24, 8, 2, 4}, 4, false},
    {"single_row_panels", {1, 16, 8, 2, 3}, 1, false},
    {"non_divisor_panel", {1, 48, 16, 2, 4}, 5, false},
    {"xl", {2, 8, 8, 2, 5}, 64, false},
    {"xl_two_panels", {1, 8, 8, 3, 4}, 4, false},
    {"document_start", {2, 16, 8, 2, 4}, 4, true},
};

template <typename T>
void check_forward(const WindowCase& c, double tol) {
  Rng rng;
  SCOPED_TRACE(rng.trace() + ", case " + c.name);
  const WindowInputs in = round_through<T>(make_window_inputs(rng, c.dims, c.zero_cache));
  const AttentionResult ref = reference_window_attention(c.dims, in.q, in.k, in.v, in.k_cache,
                                                         in.v_cache, in.rel_bias, in.scale);
  auto be = backend_with_panel<T>(c.panel);
  const WindowForward<T> got = run_window_forward(*be, c.dims, in);
  expect_close(got.out, ref.out, tol, "out");
  expect_close(got.probs, ref.probs, tol, "probs");
  // The mask is exact: masked probabilities are exactly 0, visible ones positive.
  for (std::size_t i = 0; i < ref.probs.size(); ++i) {
    if (ref.probs[i] == 0.0) {
      ASSERT_EQ(got.probs[i], T(0)) << "masked probs[" << i << "]";
    } else {
      ASSERT_GT(got.probs[i], T(0)) << "visible probs[" << i << "]";
    }
  }
}

TEST(WindowAttention, ForwardMatchesReferenceDouble) {
  for (const WindowCase& c : kSmallCases) check_forward<double>(c, 1e-12);
}

TEST(WindowAttention, ForwardMatchesReferenceFloat) {
  for (const WindowCase& c : kSmallCases) check_forward<float>(c, 1e-5);
}

// Default options on a window large enough to reach every T5 bucket (distances up to 256)
// and to use several default-sized panels.
TEST(WindowAttention, ForwardMatchesReferenceDefaultOptions) {
  const WindowCase c{"default", {1, 512, 256, 2, 16}, cpu::CpuOptions{}.attention_panel_rows,
                     false};
  check_forward<float>(c, 1e-5);
  check_forward<double>(c, 1e-12);
}

TEST(WindowAttention, MaskEdges) {
  // First and last query of each block see exactly keys [q, q+W-1]: distances W and 1.
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const WindowAttnDims d{1, 16, 8, 1, 4};
  auto be = backend_with_panel<double>(4);
  const WindowForward<double> f = run_window_forward(*be, d, make_window_inputs(rng, d, true));
  const int W = d.window;
  for (int t = 0; t < d.blocks(); ++t) {
    for (int q : {0, W - 1}) {
      const double* row = &f.probs[(static_cast<std::size_t>(t) * W + q) * 2 * W];
      double sum = 0;
      for (int j = 0; j < 2 * W; ++j) {
        const bool visible = q <= j && j <= q + W - 1;
        EXPECT_EQ(row[j] > 0, visible) << "block " << t << " query " << q << " key " << j;
        sum += row[j];
      }
      EXPECT_NEAR(sum, 1.0, 1e-14);
    }
  }
}

TEST(WindowAttention, BackwardMatchesFiniteDifferences) {
  for (const WindowCase& c : kSmallCases) {
    Rng rng;
    SCOPED_TRACE(rng.trace() + ", case " + c.name);
    const WindowAttnDims& d = c.dims;
    WindowInputs in = make_window_inputs(rng, d, c.zero_cache);
    const std::vector<double> weights = rng.normal(in.q.size(), 1.0);
    auto be = backend_with_panel<double>(c.panel);
    WindowGrads<double> g = zero_window_grads<double>(d);
    run_window_backward(*be, d, in, weights, &g);
    const auto objective = [&] { return dot(run_window_forward(*be, d, in).out, weights); };
    expect_gradient(objective, &in.q, g.dq, "q");
    expect_gradient(objective, &in.k, g.dk, "k");
    expect_gradient(objective, &in.v, g.dv, "v");
    expect_gradient(objective, &in.rel_bias, g.drel_bias, "rel_bias");
    expect_gradient(objective, &in.scale, g.dscale, "scale");
  }
}

TEST(WindowAttention, FloatBackwardMatchesDouble) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const WindowAttnDims d{2, 512, 256, 2, 16};  // two default-sized panels per block
  const WindowInputs in = round_through<float>(make_window_inputs(rng, d, false));
  const std::vector<double> dout = rng.normal(in.q.size(), 1.0);
  auto bf = make_cpu_backend<float>();
  auto bd = make_cpu_backend<double>();
  WindowGrads<float> gf = zero_window_grads<float>(d);
  WindowGrads<double> gd = zero_window_grads<double>(d);
  run_window_backward(*bf, d, in, dout, &gf);
  run_window_backward(*bd, d, in, dout, &gd);
  expect_close(gf.dq, std::vector<double>(gd.dq.begin(), gd.dq.end()), 1e-4, "dq");
  expect_close(gf.dk, std::vector<double>(gd.dk.begin(), gd.dk.end()), 1e-4, "dk");
  expect_close(gf.dv, std::vector<double>(gd.dv.begin(), gd.dv.end()), 1e-4, "dv");
  expect_close(gf.drel_bias, std::vector<double>(gd.drel_bias.begin(), gd.drel_bias.end()), 1e-4,
               "drel_bias");
  expect_close(gf.dscale, std::vector<double>(gd.dscale.begin(), gd.dscale.end()), 1e-4,
               "dscale");
}

// A small case for the accumulation tests: inputs and an output gradient drawn from `rng`.
struct SmallBackwardCase {
  WindowAttnDims d{2, 16, 8, 2, 4};
  WindowInputs in;
  std::vector<double> dout;
  explicit SmallBackwardCase(Rng& rng) : in(make_window_inputs(rng, d, false)), dout(rng.normal(in.q.size(), 1.0)) {}
};

TEST(WindowAttention, BackwardAccumulates) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const SmallBackwardCase c(rng);
  const WindowAttnDims& d = c.d;
  const WindowInputs& in = c.in;
  const std::vector<double>& dout = c.dout;
  auto be = backend_with_panel<double>(4);
  WindowGrads<double> once = zero_window_grads<double>(d);
  run_window_backward(*be, d, in, dout, &once);
  WindowGrads<double> twice = zero_window_grads<double>(d);
  run_window_backward(*be, d, in, dout, &twice);
  run_window_backward(*be, d, in, dout, &twice);
  auto doubled = [](const std::vector<double>& x) {
    std::vector<double> y(x);
    for (double& e : y) e *= 2;
    return y;
  };
  expect_close(twice.dq, doubled(once.dq), 1e-13, "dq");
  expect_close(twice.dk, doubled(once.dk), 1e-13, "dk");
  expect_close(twice.dv, doubled(once.dv), 1e-13, "dv");
  expect_close(twice.drel_bias, doubled(once.drel_bias), 1e-13, "drel_bias");
  expect_close(twice.dscale, doubled(once.dscale), 1e-13, "dscale");
}

// window_attention_backward_write overwrites dq, dk, dv (NaN on entry here) with the values of an
// accumulation into zeros, bit for bit; the bias and scale gradients still accumulate.
TEST(WindowAttention, BackwardWriteEqualsAccumulatingIntoZeros) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const SmallBackwardCase c(rng);
  const WindowInputs& in = c.in;
  auto be = backend_with_panel<double>(4);
  WindowGrads<double> accumulated = zero_window_grads<double>(c.d), written = zero_window_grads<double>(c.d);
  run_window_backward(*be, c.d, in, c.dout, &accumulated);
  for (auto* g : {&written.dq, &written.dk, &written.dv}) std::fill(g->begin(), g->end(), std::nan(""));
  const auto f = run_window_forward(*be, c.d, in);
  be->window_attention_backward_write(c.d, in.q.data(), in.k.data(), in.v.data(), in.k_cache.data(), in.v_cache.data(),
                                      in.rel_bias.data(), in.scale.data(), f.probs.data(), c.dout.data(),
                                      written.dq.data(), written.dk.data(), written.dv.data(),
                                      written.drel_bias.data(), written.dscale.data());
  EXPECT_EQ(written.dq, accumulated.dq);
  EXPECT_EQ(written.dk, accumulated.dk);
  EXPECT_EQ(written.dv, accumulated.dv);
  EXPECT_EQ(written.drel_bias, accumulated.drel_bias);
  EXPECT_EQ(written.dscale, accumulated.dscale);
}

// Same inputs give bit-identical results on repeated calls and under any thread count.
TEST(WindowAttention, DeterministicAcrossCallsAndThreadCounts) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const WindowAttnDims d{2, 256, 64, 4, 16};
  const WindowInputs in = make_window_inputs(rng, d, false);
  const std::vector<double> dout = rng.normal(in.q.size(), 1.0);
  auto be = backend_with_panel<float>(16);
  const int threads = omp_get_max_threads();
  std::vector<WindowForward<float>> fwd;
  std::vector<WindowGrads<float>> bwd;
  for (int n : {threads, threads, 1, 3}) {
    omp_set_num_threads(n);
    fwd.push_back(run_window_forward(*be, d, in));
    bwd.push_back(zero_window_grads<float>(d));
    run_window_backward(*be, d, in, dout, &bwd.back());
  }
  omp_set_num_threads(threads);
  for (std::size_t i = 1; i < fwd.size(); ++i) {
    EXPECT_TRUE(fwd[i].out == fwd[0].out && fwd[i].probs == fwd[0].probs) << "run " << i;
    EXPECT_TRUE(bwd[i] == bwd[0]) << "run " << i;
  }
}

TEST(WindowAttention, RejectsSeqNotMultipleOfWindow) {
  auto be = make_cpu_backend<float>();
  const WindowAttnDims d{1, 12, 8, 1, 4};
  std::vector<float> buf(4096);
  EXPECT_THROW(be->window_attention_forward(d, buf.data(), buf.data(), buf.data(), buf.data(),
                                            buf.data(), buf.data(), buf.data(), buf.data(),
                                            buf.data()),
               std::runtime_error);
}

}  // namespace
}  // namespace brt::kernels::test
