// Causality of the BST layer (model.md §7.2): perturbing input position t′ leaves every output
// before t′ unchanged, at and around block edges, for SH, MH and MF (both kernels); and the
// perturbation does reach later outputs (the test is not vacuous).
#include <gtest/gtest.h>

#include <cmath>

#include "bst_test_util.h"

namespace brt::testing {
namespace {

class BstCausality : public ::testing::TestWithParam<std::string> {};

TEST_P(BstCausality, OutputsBeforeAPerturbedPositionAreUnchanged) {
  auto backend = kernels::make_cpu_backend<double>();
  LayerRig<double> rig(tiny_bst_config(GetParam(), 16), 1);
  const int N = rig.cfg.seq_len, D = rig.cfg.d_model, W = rig.cfg.window;
  std::mt19937_64 rng(7);
  const auto x = random_vector<double>(size_t(N) * D, rng);
  std::vector<double> base(size_t(N) * D), out(size_t(N) * D);
  const uint8_t start[1] = {1};
  const core::StepContext<double> ctx{*backend, 1, N, start};
  const auto carried = rig.snapshot();
  rig.layer->forward(ctx, x.data(), base.data());
  for (int tp : {1, W - 1, W, W + 1, 2 * W - 1, 2 * W, 3 * W - 1, 3 * W}) {
    auto xp = x;
    for (int d = 0; d < D; ++d) xp[size_t(tp) * D + d] += 0.5 + 0.1 * d;
    rig.restore(carried);
    rig.layer->forward(ctx, xp.data(), out.data());
    double before = 0, after = 0;
    for (int t = 0; t < N; ++t)
      for (int d = 0; d < D; ++d) {
        const double diff = std::fabs(out[size_t(t) * D + d] - base[size_t(t) * D + d]);
        (t < tp ? before : after) = std::max(t < tp ? before : after, diff);
      }
    // FFT convolution rounding is the only leak allowed.
    EXPECT_LE(before, 1e-12) << "position " << tp << " changed an earlier output";
    EXPECT_GT(after, 1e-3) << "position " << tp << " changed nothing";
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, BstCausality,
                         ::testing::Values("bst:sh:s4d", "bst:mh:s4d", "bst:mf:s4d",
                                           "bst:sh:unstructured", "bst:mf:unstructured"),
                         variant_name);

}  // namespace
}  // namespace brt::testing
