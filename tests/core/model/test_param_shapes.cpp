// The model declares exactly model.md §9's parameters: the count equals the spec's shapes
// (counted independently in core/param_count.cpp) for every variant, and the 150m example of
// model.md §12 (160.46M non-embedding, 193.36M in all) is what the real model allocates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/model.h"
#include "core/param_count.h"
#include "kernels/backend.h"
#include "launch/config/config.h"
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

// model.state_init_std, model.state_id_std and model.gate_bias_mean (the study options of
// docs/fidelity.md) set Σ0 ~ N(0, s), P ~ N(0, s') and b ~ N(m, 0.1) in every layer that has a
// state; their defaults are model.md §5's, so the default draw is unchanged.
TEST(DeclaredParameters, StateInitialisationScalesFollowTheConfig) {
  auto moments = [](const core::Param<float>& p) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < p.numel(); ++i) sum += p.value[i], sq += double(p.value[i]) * p.value[i];
    const double mean = sum / double(p.numel());
    return std::pair<double, double>{mean, std::sqrt(sq / double(p.numel()) - mean * mean)};
  };
  for (const char* variant : {"rec:fixed:dual", "feedback:fixed:skip"}) {
    SCOPED_TRACE(variant);
    core::ModelConfig cfg = tiny_config(variant);
    cfg.d_model = 64;
    cfg.state_size = 32;
    auto backend = kernels::make_cpu_backend<float>();
    core::Model<float> plain(cfg, 1, *backend);
    plain.params().initialize(7);
    cfg.state_init_std = 1.0;
    cfg.state_id_std = 0.25;
    cfg.gate_bias_mean = 2.0;
    core::Model<float> scaled(cfg, 1, *backend);
    scaled.params().initialize(7);
    int checked = 0;
    for (int i = 0; i < int(scaled.params().size()); ++i) {
      const auto& p = scaled.params()[i];
      const auto& q = plain.params()[i];
      const std::string& name = p.spec.name;
      const auto [mean, sd] = moments(p);
      const auto [mean0, sd0] = moments(q);
      if (name.find("state.init") != std::string::npos) {
        EXPECT_NEAR(sd, 1.0, 0.05) << name;
        EXPECT_NEAR(sd0, 0.1, 0.005) << name;
        ++checked;
      } else if (name.find("state.ids") != std::string::npos) {
        EXPECT_NEAR(sd, 0.25, 0.0125) << name;
        EXPECT_NEAR(sd0, 1.0, 0.05) << name;
        ++checked;
      } else if (name.find("gate") != std::string::npos && name.find("bias") != std::string::npos) {
        EXPECT_NEAR(mean, 2.0, 0.05) << name;
        EXPECT_NEAR(sd, 0.1, 0.03) << name;
        EXPECT_NEAR(mean0, 0.0, 0.05) << name;
        ++checked;
      } else {  // everything else draws exactly what the defaults draw
        EXPECT_TRUE(std::equal(p.value, p.value + p.numel(), q.value)) << name;
      }
    }
    // Σ0, P, and one fixed gate bias per state gate (dual: two; feedback skip: one).
    EXPECT_EQ(checked, std::string(variant) == "rec:fixed:dual" ? 4 : 3);
  }
}

}  // namespace
}  // namespace brt::testing
