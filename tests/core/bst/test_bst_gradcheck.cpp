// float64 finite-difference checks of the BST layer (model.md §7): the layer input and every
// parameter (SSM sublayer, context projection, attention, MLP), over a segment of three blocks
// in which stream 0 starts a document and stream 1 continues one (so the carried cache, the
// §7.3 SSM carry and MF's carried context all take part).
#include <gtest/gtest.h>

#include "bst_test_util.h"

namespace brt::testing {
namespace {

class BstGradCheck : public ::testing::TestWithParam<std::string> {};

TEST_P(BstGradCheck, InputAndParameterGradientsMatchFiniteDifferences) {
  auto backend = kernels::make_cpu_backend<double>();
  LayerRig<double> rig(tiny_bst_config(GetParam()), 2);
  const int B = 2, rows = B * rig.cfg.seq_len, D = rig.cfg.d_model;
  std::mt19937_64 rng(1234);
  auto x = random_vector<double>(rows * D, rng);
  const auto probe = random_vector<double>(rows * D, rng);
  std::vector<double> out(rows * D);
  const uint8_t warm_start[2] = {1, 1}, doc_start[2] = {1, 0};
  rig.layer->forward({*backend, B, rig.cfg.seq_len, warm_start}, x.data(), out.data());
  x = random_vector<double>(rows * D, rng);
  const auto carried = rig.snapshot();
  const core::StepContext<double> ctx{*backend, B, rig.cfg.seq_len, doc_start};
  auto f = [&]() {
    rig.restore(carried);
    rig.layer->forward(ctx, x.data(), out.data());
    double s = 0;
    for (int i = 0; i < rows * D; ++i) s += probe[i] * out[i];
    return s;
  };
  f();
  rig.store.zero_grads();
  std::vector<double> dx(rows * D, 7.0);  // written by backward (core/layer.h), whatever it held
  rig.layer->backward(ctx, probe.data(), dx.data(), rig.scratch);

  GradCheckVars vars;
  vars.add_input(x, dx);
  for (auto& p : rig.store.params()) {
    // The implicit filter's 64×64 layers: a strided subset keeps the test fast.
    vars.add_param(p, p.numel() > 256 ? p.numel() / 128 + 1 : 1);
  }
  // Every BST parameter must receive gradient (none silently detached).
  for (auto& p : rig.store.params()) {
    double norm = 0;
    for (int64_t i = 0; i < p.numel(); ++i) norm += p.grad[i] * p.grad[i];
    EXPECT_GT(norm, 0.0) << p.spec.name << " got no gradient";
  }
  const GradError err = report_gradient_check(f, vars, GetParam() + " BST layer");
  EXPECT_LE(err.norm_rel, 1e-6) << err.where;
  EXPECT_LE(err.max_rel, 1e-4) << err.where;
}

INSTANTIATE_TEST_SUITE_P(AllVariants, BstGradCheck, ::testing::ValuesIn(all_bst_variants()), variant_name);

}  // namespace
}  // namespace brt::testing
