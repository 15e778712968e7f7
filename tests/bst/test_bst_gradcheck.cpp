// float64 finite-difference checks of the BST layer (model.md §7): the layer input and every
// parameter (SSM sublayer, context projection, attention, MLP), over a segment of three blocks
// in which stream 0 starts a document and stream 1 continues one (so the carried cache, the
// §7.3 SSM carry and MF's carried context all take part).
#include <gtest/gtest.h>

#include <cstdio>

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
  std::vector<double> dx(rows * D, 0.0);
  rig.layer->backward(ctx, probe.data(), dx.data(), rig.scratch);

  std::vector<double*> vars;
  std::vector<double> analytic;
  std::vector<std::string> names;
  for (int i = 0; i < rows * D; ++i) {
    vars.push_back(&x[i]);
    analytic.push_back(dx[i]);
    names.push_back("x[" + std::to_string(i) + "]");
  }
  for (auto& p : rig.store.params()) {
    // The implicit filter's 64×64 layers: a strided subset keeps the test fast.
    const int64_t step = p.numel() > 256 ? p.numel() / 128 + 1 : 1;
    for (int64_t i = 0; i < p.numel(); i += step) {
      vars.push_back(p.value + i);
      analytic.push_back(p.grad[i]);
      names.push_back(p.spec.name + "[" + std::to_string(i) + "]");
    }
  }
  // Every BST parameter must receive gradient (none silently detached).
  for (auto& p : rig.store.params()) {
    double norm = 0;
    for (int64_t i = 0; i < p.numel(); ++i) norm += p.grad[i] * p.grad[i];
    EXPECT_GT(norm, 0.0) << p.spec.name << " got no gradient";
  }
  const GradError err = check_gradient(f, vars, analytic, names);
  std::printf("%s BST layer: %zu elements, relative error %.3g, worst element %.3g (%s)\n",
              GetParam().c_str(), vars.size(), err.norm_rel, err.max_rel, err.where.c_str());
  EXPECT_LE(err.norm_rel, 1e-6) << err.where;
  EXPECT_LE(err.max_rel, 1e-4) << err.where;
}

INSTANTIATE_TEST_SUITE_P(AllVariants, BstGradCheck,
                         ::testing::Values("bst:sh:s4d", "bst:mh:s4d", "bst:mf:s4d",
                                           "bst:sh:unstructured", "bst:mh:unstructured",
                                           "bst:mf:unstructured"),
                         variant_name);

}  // namespace
}  // namespace brt::testing
