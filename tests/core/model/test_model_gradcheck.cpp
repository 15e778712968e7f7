// Whole-model gradient checks in float64 (model.md §1–§8) for every variant: every parameter
// element, with one stream starting a document and one continuing from a carried state, and
// several blocks per segment so gradients cross blocks through caches and recurrent state.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "core/model.h"
#include "kernels/backend.h"
#include "model_test_util.h"
#include "tests/common/test_seed.h"

namespace brt::testing {
namespace {

class ModelGradCheck : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelGradCheck, EveryParameterMatchesFiniteDifferences) {
  auto backend = kernels::make_cpu_backend<double>();
  core::ModelConfig cfg = tiny_config(GetParam());
  core::Model<double> model(cfg, /*streams=*/2, *backend);
  model.params().initialize(1234);
  const uint64_t seed = brt::test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // A first segment fills the carried state; the checked segment then continues stream 1's
  // document and starts a new one on stream 0.
  RandomBatch warm = random_batch(2, cfg.seq_len, cfg.vocab, rng, {1, 1});
  model.forward(warm.view(), 1.0);
  RandomBatch batch = random_batch(2, cfg.seq_len, cfg.vocab, rng, {1, 0});
  const auto carried = model.snapshot_carried_state();

  int64_t count = 0;
  for (auto m : batch.mask) count += m;
  const double scale = 1.0 / double(count);
  auto loss = [&]() {
    model.restore_carried_state(carried);
    return model.forward(batch.view(), scale).nats * scale;
  };
  model.params().zero_grads();
  model.restore_carried_state(carried);
  model.forward(batch.view(), scale);
  model.backward();

  std::vector<double*> x;
  std::vector<double> analytic;
  std::vector<std::string> names;
  for (auto& p : model.params().params())
    for (int64_t i = 0; i < p.numel(); ++i) {
      x.push_back(p.value + i);
      analytic.push_back(p.grad[i]);
      names.push_back(p.spec.name + "[" + std::to_string(i) + "]");
    }
  const GradError err = check_gradient(loss, x, analytic, names);
  std::printf("%s: %zu elements, relative error of the gradient %.3g, worst element %.3g (%s)\n",
              GetParam().c_str(), x.size(), err.norm_rel, err.max_rel, err.where.c_str());
  EXPECT_LE(err.norm_rel, 1e-6) << err.where;
  EXPECT_LE(err.max_rel, 1e-4) << err.where;
}

INSTANTIATE_TEST_SUITE_P(AllVariants, ModelGradCheck,
                         ::testing::Values("slide", "xl", "rec:fixed:skip", "rec:lstm:skip",
                                           "rec:fixed:dual", "rec:lstm:dual",
                                           "feedback:fixed:skip", "feedback:lstm:dual"),
                         variant_name);

}  // namespace
}  // namespace brt::testing
