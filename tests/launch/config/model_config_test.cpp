// ModelConfig::resolve (variants, defaults, checks) and the model.md §9 parameter counts against
// the figures of model.md §12, plus the lstm/dual additions worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/model_config.h"
#include "core/param_count.h"
#include "launch/config/config.h"

namespace brt::core {
namespace {

const std::filesystem::path kConfigs = std::filesystem::path(BRT_SOURCE_DIR) / "configs";

ModelConfig resolved(ModelConfig c) {
  c.resolve();
  return c;
}

ModelConfig with_variant(const std::string& v, int layers = 12) {
  ModelConfig c;
  c.variant = v;
  c.layers = layers;
  return c;
}

std::string error_of(ModelConfig c) {
  try {
    c.resolve();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(ModelConfig, ParsesEveryVariant) {
  EXPECT_EQ(resolved(with_variant("slide")).family, ModelFamily::kSlide);
  ModelConfig xl = with_variant("xl");
  xl.window = xl.seq_len;
  EXPECT_EQ(resolved(xl).family, ModelFamily::kXL);
  const ModelConfig r = resolved(with_variant("rec:lstm:dual"));
  EXPECT_EQ(r.family, ModelFamily::kRecurrent);
  EXPECT_EQ(r.gate, GateKind::kLSTM);
  EXPECT_EQ(r.rec_config, RecurrentConfig::kDual);
  const ModelConfig b = resolved(with_variant("bst:mf:unstructured"));
  EXPECT_EQ(b.family, ModelFamily::kBST);
  EXPECT_EQ(b.bst_variant, BstVariant::kMF);
  EXPECT_EQ(b.ssm_kernel, SsmKernel::kUnstructured);
  EXPECT_EQ(resolved(with_variant("bst:mh:s4d")).bst_variant, BstVariant::kMH);
  for (const char* bad : {"", "rec", "rec:fixed", "rec:tanh:skip", "rec:fixed:triple", "bst:xx:s4d", "slide:13L", "gpt"})
    EXPECT_NE(error_of(with_variant(bad)).find("model.variant"), std::string::npos) << bad;
  const ModelConfig f = resolved(with_variant("feedback:lstm:dual"));
  EXPECT_TRUE(f.feedback);
  EXPECT_EQ(f.family, ModelFamily::kRecurrent);
  EXPECT_EQ(f.gate, GateKind::kLSTM);
  EXPECT_FALSE(resolved(with_variant("rec:lstm:dual")).feedback);
  for (const char* bad : {"feedback", "feedback:fixed", "feedback:gru:skip"})
    EXPECT_NE(error_of(with_variant(bad)).find("model.variant"), std::string::npos) << bad;
  // model.md §5.4 is defined for one recurrent layer (24 layers default to two).
  EXPECT_NE(error_of(with_variant("feedback:fixed:skip", 24)).find("model.recurrent_layers: the feedback "
                                                                      "variant is defined for one recurrent layer"),
            std::string::npos);
}

TEST(ModelConfig, DefaultLayerLists) {
  EXPECT_EQ(resolved(with_variant("rec:fixed:skip")).recurrent_layers, std::vector<int>{9});
  EXPECT_EQ(resolved(with_variant("rec:fixed:skip", 13)).recurrent_layers, std::vector<int>{10});
  EXPECT_EQ(resolved(with_variant("rec:fixed:skip", 24)).recurrent_layers, (std::vector<int>{9, 19}));
  EXPECT_EQ(resolved(with_variant("bst:sh:s4d")).bst_layers, (std::vector<int>{0, 9}));
  EXPECT_EQ(resolved(with_variant("bst:sh:s4d", 4)).bst_layers, std::vector<int>{0});
  const ModelConfig r = resolved(with_variant("rec:fixed:skip"));
  EXPECT_TRUE(r.is_recurrent_layer(9));
  EXPECT_FALSE(r.is_recurrent_layer(8));
  EXPECT_FALSE(r.is_bst_layer(0));
  // A list inherited from a recurrent base does not make a slide model recurrent.
  ModelConfig s = with_variant("slide");
  s.recurrent_layers = {9};
  EXPECT_TRUE(resolved(s).recurrent_layers.empty());
  ModelConfig dup = with_variant("rec:fixed:skip");
  dup.recurrent_layers = {9, 9};
  EXPECT_NE(error_of(dup).find("model.recurrent_layers"), std::string::npos);
}

TEST(ModelConfig, ChecksSizesWithKeyNames) {
  ModelConfig c = with_variant("slide");
  c.window = 500;
  EXPECT_EQ(error_of(c), "model.window: 500 does not divide model.seq_len 4096");
  c = with_variant("xl");  // xl: one XL segment per block, W dividing N like every variant
  EXPECT_EQ(error_of(c), "no error");
  c.window = 500;
  EXPECT_EQ(error_of(c), "model.window: 500 does not divide model.seq_len 4096");
  c = with_variant("slide");
  c.heads = 0;
  EXPECT_NE(error_of(c).find("model.heads"), std::string::npos);
  c = with_variant("bst:sh:s4d");
  c.ssm_state = 63;
  EXPECT_NE(error_of(c).find("model.ssm_state"), std::string::npos);
}

// model.md §12, "non-embedding params, 12L standard layers only", to the printed two decimals (M).
TEST(ParamCount, LadderStandardLayersMatchModelTable) {
  struct Row {
    const char* name;
    double millions;
  };
  for (const Row& row : {Row{"40m", 37.76}, Row{"75m", 75.51}, Row{"150m", 151.02}, Row{"300m", 302.02},
                         Row{"600m", 604.04}, Row{"1.3b", 1208.0}}) {
    const auto run = launch::load_run_config((kConfigs / (std::string(row.name) + ".toml")).string());
    const double m = 12.0 * standard_layer_parameters(run.model) / 1e6;
    EXPECT_NEAR(m, row.millions, row.millions >= 1000 ? 0.05 : 0.005) << row.name;
    EXPECT_EQ(run.model.layers, 12);
    EXPECT_EQ(run.model.seq_len, 4096);
    EXPECT_EQ(run.model.window, 512);
    EXPECT_EQ(run.model.state_size, 512);
    EXPECT_EQ(run.model.vocab, 32128);
    EXPECT_EQ(run.model.variant, "rec:fixed:skip");
  }
}

// model.md §12: 150m rec:fixed:skip has 160.46M non-embedding parameters and 193.36M in all.
TEST(ParamCount, Example150mRecFixedSkip) {
  const auto run = launch::load_run_config((kConfigs / "150m.toml").string());
  const int64_t non_embedding = count_non_embedding_parameters(run.model);
  const int64_t total = count_parameters(run.model);
  EXPECT_EQ(std::llround(non_embedding / 1e4), 16046);
  EXPECT_EQ(std::llround(total / 1e4), 19336);
  // Exactly, from §12's formula: 12 standard layers + dP + final norm (+ VD).
  const int64_t D = 1024, A = 1024, H = 8, S = 512, V = 32128;
  const int64_t delta = D * A + A * D + H + 4 * D * A + D + 2 * H + 2 * S * D + 2 * A * D + D;
  EXPECT_EQ(non_embedding, 151022688 + delta + D);
  EXPECT_EQ(non_embedding, 160462968);
  EXPECT_EQ(total, 160462968 + V * D);
  EXPECT_EQ(total, 193362040);
}

TEST(ParamCount, GateAndConfigurationAdditions) {
  ModelConfig c = launch::load_run_config((kConfigs / "150m.toml").string()).model;
  const int64_t fixed_skip = count_parameters(c);
  auto count_for = [&](const std::string& variant) {
    ModelConfig v = c;
    v.variant = variant;
    v.resolve();
    return count_parameters(v);
  };
  // lstm replaces gate.bias [D] by wf, wi [2A, D] and bf, bi [D]: + 4AD + D.
  EXPECT_EQ(count_for("rec:lstm:skip") - fixed_skip, 4 * 1024 * 1024 + 1024);
  // dual adds norm2 [D], w1 [D, F], w2 [F, D] and a second fixed gate bias [D].
  EXPECT_EQ(count_for("rec:fixed:dual") - fixed_skip, 1024 + 2 * 1024 * 4096 + 1024);
  // lstm dual: the second gate reads m (width F): wf, wi [F, D], bf, bi [D].
  EXPECT_EQ(count_for("rec:lstm:dual") - count_for("rec:lstm:skip"), 1024 + 2 * 1024 * 4096 + 2 * 4096 * 1024 + 2 * 1024);
  // slide: no recurrent layer; 13-layer slide one standard layer more.
  EXPECT_EQ(count_for("slide"), 151022688 + 1024 + 32128 * 1024);
  const auto slide13 = launch::load_run_config((kConfigs / "150m-slide-13L.toml").string()).model;
  EXPECT_EQ(count_parameters(slide13), 13 * 12585224 + 1024 + 32128 * 1024);
  // 24 layers: two recurrent layers.
  const auto tall = launch::load_run_config((kConfigs / "150m-24L.toml").string()).model;
  EXPECT_EQ(count_non_embedding_parameters(tall), 24 * 12585224 + 2 * (160462968 - 151022688 - 1024) + 1024);
}

TEST(ParamCount, TinyAndBenchConfigs) {
  const auto tiny = launch::load_run_config((kConfigs / "tiny.toml").string()).model;
  // D 128, A 128, H 4, F 512, S 64, V 4096, 4 layers with layer 1 recurrent.
  const int64_t D = 128, A = 128, H = 4, F = 512, S = 64, V = 4096;
  const int64_t standard = 4 * D * A + 2 * D * F + 2 * D + 33 * H;
  const int64_t delta = 2 * D * A + H + 4 * D * A + D + 2 * H + 2 * S * D + 2 * A * D + D;
  EXPECT_EQ(count_parameters(tiny), 4 * standard + delta + D + V * D);
  const auto bench = launch::load_run_config((kConfigs / "bench-small.toml").string());
  EXPECT_EQ(bench.model.layers, 2);
  EXPECT_EQ(bench.model.seq_len, 512);
  EXPECT_EQ(bench.train.batch, 4);
  EXPECT_EQ(count_parameters(bench.model), 2 * standard + delta + D + V * D);
}

}  // namespace
}  // namespace brt::core
