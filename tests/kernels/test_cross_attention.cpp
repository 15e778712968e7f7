// Cross-attention (model.md §3.4; causal variant of §7.2) against the float64 reference and
// finite differences, with strided batch entries.
#include <omp.h>

#include "window_attention_fixture.h"

namespace brt::kernels::test {
namespace {

struct CrossCase {
  const char* name;
  CrossAttnDims dims;
  int panel;  // CpuOptions::cross_panel_rows
};

// Strides leave gaps between batch entries (q_stride > nq*A) or share K/V (kv_stride 0).
const CrossCase kCases[] = {
    {"plain", {2, 5, 7, 2, 3, 5 * 6, 7 * 6, false}, 128},
    {"causal", {2, 6, 6, 2, 3, 6 * 6, 6 * 6, true}, 128},
    {"causal_panels", {2, 7, 5, 2, 4, 7 * 8, 5 * 8, true}, 3},
    {"gapped_strides", {3, 4, 6, 2, 3, 4 * 6 + 6, 6 * 6 + 12, false}, 2},
    {"shared_kv", {3, 4, 5, 2, 3, 4 * 6, 0, true}, 2},
};

struct CrossInputs {
  std::vector<double> q, k, v, scale;
  std::size_t q_size, kv_size;
};

CrossInputs make_cross_inputs(Rng& rng, const CrossAttnDims& d) {
  const int A = d.width();
  CrossInputs in;
  in.q_size = (d.batch - 1) * d.q_stride + static_cast<std::size_t>(d.queries) * A;
  in.kv_size = (d.batch - 1) * d.kv_stride + static_cast<std::size_t>(d.keys) * A;
  in.q = rng.normal(in.q_size, 0.7);
  in.k = rng.normal(in.kv_size, 0.7);
  in.v = rng.normal(in.kv_size, 1.0);
  in.scale = rng.uniform(d.heads, 0.5, 2.0);
  return in;
}

template <typename T>
CrossInputs round_cross(CrossInputs in) {
  for (auto* x : {&in.q, &in.k, &in.v, &in.scale}) {
    for (double& e : *x) e = static_cast<double>(static_cast<T>(e));
  }
  return in;
}

std::size_t cross_probs_size(const CrossAttnDims& d) {
  return static_cast<std::size_t>(d.batch) * d.heads * d.queries * d.keys;
}

template <typename T>
WindowForward<T> run_cross_forward(Backend<T>& be, const CrossAttnDims& d,
                                   const CrossInputs& in) {
  const auto q = cast_to<T>(in.q), k = cast_to<T>(in.k), v = cast_to<T>(in.v);
  const auto s = cast_to<T>(in.scale);
  WindowForward<T> f;
  f.out.assign(in.q_size, T(0));
  f.probs.assign(cross_probs_size(d), T(7));  // forward must overwrite every entry
  be.cross_attention_forward(d, q.data(), k.data(), v.data(), s.data(), f.out.data(),
                             f.probs.data());
  return f;
}

struct CrossGrads {
  std::vector<double> dq, dk, dv, dscale;
};

CrossGrads run_cross_backward(Backend<double>& be, const CrossAttnDims& d, const CrossInputs& in,
                              const std::vector<double>& dout, CrossGrads g) {
  const WindowForward<double> f = run_cross_forward(be, d, in);
  be.cross_attention_backward(d, in.q.data(), in.k.data(), in.v.data(), in.scale.data(),
                              f.probs.data(), dout.data(), g.dq.data(), g.dk.data(),
                              g.dv.data(), g.dscale.data());
  return g;
}

CrossGrads zero_cross_grads(const CrossAttnDims& d, const CrossInputs& in) {
  return {std::vector<double>(in.q_size), std::vector<double>(in.kv_size),
          std::vector<double>(in.kv_size), std::vector<double>(d.heads)};
}

template <typename T>
void check_cross_forward(double tol) {
  for (const CrossCase& c : kCases) {
    Rng rng;
    SCOPED_TRACE(rng.trace() + ", case " + c.name);
    const CrossInputs in = round_cross<T>(make_cross_inputs(rng, c.dims));
    const AttentionResult ref =
        reference_cross_attention(c.dims, in.q, in.k, in.v, in.scale, in.q_size);
    auto be = backend_with_panel<T>(c.panel);
    const WindowForward<T> got = run_cross_forward(*be, c.dims, in);
    expect_close(got.out, ref.out, tol, "out");
    expect_close(got.probs, ref.probs, tol, "probs");
    for (std::size_t i = 0; i < ref.probs.size(); ++i) {
      if (ref.probs[i] == 0.0) {
        ASSERT_EQ(got.probs[i], T(0)) << "masked probs[" << i << "]";
      }
    }
  }
}

TEST(CrossAttention, ForwardMatchesReferenceDouble) { check_cross_forward<double>(1e-12); }
TEST(CrossAttention, ForwardMatchesReferenceFloat) { check_cross_forward<float>(1e-5); }

TEST(CrossAttention, ForwardMatchesReferenceLarge) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (bool causal : {false, true}) {
    const CrossAttnDims d{2, 200, 160, 4, 16, 200 * 64, 160 * 64, causal};
    const CrossInputs in = round_cross<float>(make_cross_inputs(rng, d));
    const AttentionResult ref = reference_cross_attention(d, in.q, in.k, in.v, in.scale,
                                                          in.q_size);
    auto be = make_cpu_backend<float>();
    const WindowForward<float> got = run_cross_forward(*be, d, in);
    expect_close(got.out, ref.out, 1e-5, "out");
    expect_close(got.probs, ref.probs, 1e-5, "probs");
  }
}

TEST(CrossAttention, BackwardMatchesFiniteDifferences) {
  for (const CrossCase& c : kCases) {
    Rng rng;
    SCOPED_TRACE(rng.trace() + ", case " + c.name);
    CrossInputs in = make_cross_inputs(rng, c.dims);
    const std::vector<double> weights = rng.normal(in.q_size, 1.0);
    auto be = backend_with_panel<double>(c.panel);
    const CrossGrads g = run_cross_backward(*be, c.dims, in, weights, zero_cross_grads(c.dims, in));
    const auto objective = [&] { return dot(run_cross_forward(*be, c.dims, in).out, weights); };
    expect_gradient(objective, &in.q, g.dq, "q");
    expect_gradient(objective, &in.k, g.dk, "k");
    expect_gradient(objective, &in.v, g.dv, "v");
    expect_gradient(objective, &in.scale, g.dscale, "scale");
  }
}

TEST(CrossAttention, BackwardAccumulatesAndIsDeterministic) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const CrossAttnDims d{2, 96, 80, 4, 16, 96 * 64, 80 * 64, true};
  const CrossInputs in = make_cross_inputs(rng, d);
  const std::vector<double> dout = rng.normal(in.q_size, 1.0);
  auto be = backend_with_panel<double>(32);
  const CrossGrads once = run_cross_backward(*be, d, in, dout, zero_cross_grads(d, in));
  const CrossGrads again = run_cross_backward(*be, d, in, dout, zero_cross_grads(d, in));
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const CrossGrads serial = run_cross_backward(*be, d, in, dout, zero_cross_grads(d, in));
  omp_set_num_threads(threads);
  const CrossGrads twice = run_cross_backward(*be, d, in, dout, once);
  for (auto [a, b, t, name] : {std::tuple{&once.dq, &again.dq, &twice.dq, "dq"},
                               {&once.dk, &again.dk, &twice.dk, "dk"},
                               {&once.dv, &again.dv, &twice.dv, "dv"},
                               {&once.dscale, &again.dscale, &twice.dscale, "dscale"}}) {
    EXPECT_TRUE(*a == *b) << name << " differs between identical calls";
    std::vector<double> doubled(*a);
    for (double& e : doubled) e *= 2;
    expect_close(*t, doubled, 1e-13, name);
  }
  EXPECT_TRUE(serial.dq == once.dq && serial.dk == once.dk && serial.dv == once.dv &&
              serial.dscale == once.dscale)
      << "result depends on the thread count";
}

}  // namespace
}  // namespace brt::kernels::test
