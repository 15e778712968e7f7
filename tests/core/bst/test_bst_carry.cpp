// The SSM carry of model.md §7.3 and the BST layer's carried state (§8): streaming a document in
// segments equals one long segment — for the SSM sublayer's context Ctx and for the whole
// layer (whose window cache and MF context carry are exact continuations too, because block
// edges coincide with segment edges); `ssm_carry = false` restarts every segment from zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "bst_test_util.h"
#include "kernels/implicit_filter.h"

namespace brt::testing {
namespace {

constexpr int kSegments = 3;

template <typename T>
struct StreamResult {
  std::vector<T> ctx_long, ctx_streamed, out_long, out_streamed;
};

// Runs a document of kSegments·N tokens through a layer of segment length N (streamed) and
// one of segment length kSegments·N (long), with the same parameters.
template <typename T>
StreamResult<T> stream_vs_long(const std::string& variant) {
  auto backend = kernels::make_cpu_backend<T>();
  const core::ModelConfig short_cfg = tiny_bst_config(variant, 8);
  const core::ModelConfig long_cfg = tiny_bst_config(variant, 8 * kSegments);
  LayerRig<T> streamed(short_cfg, 1), whole(long_cfg, 1);
  copy_params(whole.store, streamed.store);
  const int N = short_cfg.seq_len, D = short_cfg.d_model, L = long_cfg.seq_len;
  std::mt19937_64 rng(11);
  const auto x = random_vector<T>(size_t(L) * D, rng);
  StreamResult<T> r;
  r.out_long.resize(size_t(L) * D);
  r.out_streamed.resize(size_t(L) * D);
  const uint8_t start[1] = {1}, cont[1] = {0};
  whole.layer->forward({*backend, 1, L, start}, x.data(), r.out_long.data());
  const T* ctx = whole.layer->ssm().context();
  r.ctx_long.assign(ctx, ctx + whole.layer->ssm().context_rows() * D);
  for (int s = 0; s < kSegments; ++s) {
    streamed.layer->forward({*backend, 1, N, s == 0 ? start : cont}, x.data() + size_t(s) * N * D,
                            r.out_streamed.data() + size_t(s) * N * D);
    const T* c = streamed.layer->ssm().context();
    r.ctx_streamed.insert(r.ctx_streamed.end(), c, c + streamed.layer->ssm().context_rows() * D);
  }
  return r;
}

template <typename T>
double max_rel_diff(const std::vector<T>& a, const std::vector<T>& b) {
  double scale = 0, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(double(a[i])));
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
  }
  return diff / std::max(scale, 1e-300);
}

class BstCarryS4d : public ::testing::TestWithParam<std::string> {};

// SH and MF contexts are [B, N, D] / [B, T, C, D], so segment-major concatenation is the long
// layout; MH's [H, B, N, D] is too for B = 1 only per head, so it is compared head by head.
TEST_P(BstCarryS4d, StreamingEqualsOneLongSegmentInDouble) {
  const auto r = stream_vs_long<double>(GetParam());
  const bool mh = GetParam().find(":mh:") != std::string::npos;
  if (!mh) {
    ASSERT_EQ(r.ctx_long.size(), r.ctx_streamed.size());
    EXPECT_LE(max_rel_diff(r.ctx_long, r.ctx_streamed), 1e-10);
  }
  const double out = max_rel_diff(r.out_long, r.out_streamed);
  std::printf("%s float64: whole-layer streamed vs long max rel diff %.3g\n", GetParam().c_str(), out);
  EXPECT_LE(out, 1e-10);
}

TEST_P(BstCarryS4d, StreamingEqualsOneLongSegmentInFloatToRounding) {
  const auto r = stream_vs_long<float>(GetParam());
  const double out = max_rel_diff(r.out_long, r.out_streamed);
  std::printf("%s float32: whole-layer streamed vs long max rel diff %.3g\n", GetParam().c_str(), out);
  EXPECT_LE(out, 2e-5);
}

INSTANTIATE_TEST_SUITE_P(S4d, BstCarryS4d,
                         ::testing::Values("bst:sh:s4d", "bst:mh:s4d", "bst:mf:s4d"), variant_name);

// unstructured: the kernel has N taps whatever the document length, so streaming equals the
// N-tap causal convolution over the whole document, computed here directly in float64.
TEST(BstCarryUnstructured, StreamingEqualsTheTruncatedDocumentConvolution) {
  auto backend = kernels::make_cpu_backend<double>();
  const core::ModelConfig cfg = tiny_bst_config("bst:sh:unstructured", 8);
  LayerRig<double> rig(cfg, 1);
  const int N = cfg.seq_len, D = cfg.d_model, Ds = D / 4, L = kSegments * N;
  std::mt19937_64 rng(5);
  const auto x = random_vector<double>(size_t(L) * D, rng);
  std::vector<double> out(size_t(N) * D), streamed;
  const uint8_t start[1] = {1}, cont[1] = {0};
  for (int s = 0; s < kSegments; ++s) {
    rig.layer->forward({*backend, 1, N, s == 0 ? start : cont}, x.data() + size_t(s) * N * D, out.data());
    const double* c = rig.layer->ssm().context();
    streamed.insert(streamed.end(), c, c + size_t(N) * D);
  }
  // Reference: U = RMSNorm(x)·W_dn; y[t] = Σ_{τ<N} K[τ]·U[t−τ] + Dskip·U[t]; Ctx = y·W_up.
  auto& st = rig.store;
  auto val = [&](const std::string& n) { return st[st.find("layers.0.ssm." + n)].value; };
  kernels::ssm::ImplicitFilter<double> net(*backend, N, Ds);
  std::vector<double> k(size_t(Ds) * N);
  net.forward({val("filter.w0"), val("filter.b0"), val("filter.w1"), val("filter.b1"),
               val("filter.w2"), val("filter.b2"), val("filter.freq"), val("filter.w_out")},
              k.data());
  std::vector<double> u(size_t(L) * Ds, 0.0), ref(size_t(L) * D, 0.0);
  for (int t = 0; t < L; ++t) {
    double ms = 0;
    for (int d = 0; d < D; ++d) ms += x[size_t(t) * D + d] * x[size_t(t) * D + d];
    const double rs = 1.0 / std::sqrt(ms / D + 1e-6);
    for (int f = 0; f < Ds; ++f)
      for (int d = 0; d < D; ++d)
        u[size_t(t) * Ds + f] += x[size_t(t) * D + d] * rs * val("norm.scale")[d] * val("w_dn")[d * Ds + f];
  }
  for (int t = 0; t < L; ++t)
    for (int f = 0; f < Ds; ++f) {
      double y = val("dskip")[f] * u[size_t(t) * Ds + f];
      for (int tau = 0; tau < N && tau <= t; ++tau) y += k[size_t(f) * N + tau] * u[size_t(t - tau) * Ds + f];
      for (int d = 0; d < D; ++d) ref[size_t(t) * D + d] += y * val("w_up")[f * D + d];
    }
  EXPECT_LE(max_rel_diff(ref, streamed), 1e-10);
}

// ssm_carry = false: every segment's context equals that of a fresh document start.
class BstNoCarry : public ::testing::TestWithParam<std::string> {};

TEST_P(BstNoCarry, EverySegmentStartsTheSsmFromZero) {
  auto backend = kernels::make_cpu_backend<double>();
  core::ModelConfig cfg = tiny_bst_config(GetParam(), 8);
  cfg.ssm_carry = false;
  LayerRig<double> a(cfg, 1), b(cfg, 1);
  const int N = cfg.seq_len, D = cfg.d_model;
  std::mt19937_64 rng(3);
  const auto x1 = random_vector<double>(size_t(N) * D, rng);
  const auto x2 = random_vector<double>(size_t(N) * D, rng);
  std::vector<double> out(size_t(N) * D);
  const uint8_t start[1] = {1}, cont[1] = {0};
  a.layer->forward({*backend, 1, N, start}, x1.data(), out.data());
  a.layer->forward({*backend, 1, N, cont}, x2.data(), out.data());
  b.layer->forward({*backend, 1, N, start}, x2.data(), out.data());
  const int64_t n = a.layer->ssm().context_rows() * D;
  const std::vector<double> ca(a.layer->ssm().context(), a.layer->ssm().context() + n);
  const std::vector<double> cb(b.layer->ssm().context(), b.layer->ssm().context() + n);
  EXPECT_EQ(ca, cb);
  // And with the carry on the continuing segment's context does differ.
  cfg.ssm_carry = true;
  LayerRig<double> c(cfg, 1);
  c.layer->forward({*backend, 1, N, start}, x1.data(), out.data());
  c.layer->forward({*backend, 1, N, cont}, x2.data(), out.data());
  const std::vector<double> cc(c.layer->ssm().context(), c.layer->ssm().context() + n);
  EXPECT_GT(max_rel_diff(cb, cc), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Variants, BstNoCarry,
                         ::testing::Values("bst:sh:s4d", "bst:mf:s4d", "bst:sh:unstructured"),
                         variant_name);

}  // namespace
}  // namespace brt::testing
