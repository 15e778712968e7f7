// The model declares exactly MODEL.md §9's parameters: the count equals the spec's shapes
// (counted independently in core/param_count.cpp) for every variant, and the 150m example of
// MODEL §12 (160.46M non-embedding, 193.36M in all) is what the real model allocates.
#include <gtest/gtest.h>

#include "core/model.h"
#include "core/param_count.h"
#include "kernels/backend.h"
#include "launch/config.h"
#include "model_test_util.h"

namespace brt::testing {
namespace {

class DeclaredParameters : public ::testing::TestWithParam<std::string> {};

TEST_P(DeclaredParameters, CountEqualsTheSpecShapes) {
  auto backend = kernels::make_cpu_backend<float>();
  core::ModelConfig cfg = tiny_config(GetParam());
  core::Model<float> model(cfg, 1, *backend);
  EXPECT_EQ(model.params().total_numel(), core::count_parameters(model.config()));
}

INSTANTIATE_TEST_SUITE_P(AllVariants, DeclaredParameters,
                         ::testing::Values("slide", "xl", "rec:fixed:skip", "rec:lstm:skip",
                                           "rec:fixed:dual", "rec:lstm:dual", "feedback:fixed:skip",
                                           "feedback:lstm:dual"), variant_name);

TEST(DeclaredParameters, The150mExampleOfModelSection12) {
  // The segment length does not change any parameter shape; a short one keeps the test small.
  launch::RunConfig run = launch::load_run_config(
      "configs/150m.toml", {"model.seq_len=512", "model.window=512", "data.source=synthetic"});
  auto backend = kernels::make_cpu_backend<float>();
  core::Model<float> model(run.model, 1, *backend);
  const int64_t embed = int64_t(run.model.vocab) * run.model.d_model;
  EXPECT_EQ(model.params().total_numel(), 193362040);
  EXPECT_EQ(model.params().total_numel() - embed, 160462968);
  // A few §9 shapes by name.
  auto shape = [&](const std::string& name) {
    const int i = model.params().find(name);
    EXPECT_GE(i, 0) << name;
    return i >= 0 ? model.params()[i].spec.shape : std::vector<int64_t>{};
  };
  EXPECT_EQ(shape("embed"), (std::vector<int64_t>{32128, 1024}));
  EXPECT_EQ(shape("layers.9.attn.wo"), (std::vector<int64_t>{2048, 1024}));
  EXPECT_EQ(shape("layers.9.state.ids"), (std::vector<int64_t>{512, 1024}));
  EXPECT_EQ(shape("layers.9.state.gate.bias"), (std::vector<int64_t>{1024}));
  EXPECT_EQ(shape("layers.0.attn.rel_bias"), (std::vector<int64_t>{8, 32}));
}

}  // namespace
}  // namespace brt::testing
