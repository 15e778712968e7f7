// A BST model as a whole (model.md §7, §9): its parameter count equals the §9 shapes
// (core/param_count.cpp) for every variant, the BST-specific names have §9's shapes, and a tiny
// model's training loss falls.
#include <gtest/gtest.h>

#include <cmath>

#include "bst_test_util.h"
#include "core/param_count.h"

namespace brt::testing {
namespace {

core::ModelConfig small_bst(const std::string& variant) {
  return micro_model(variant, {.layers = 3, .d_model = 32, .heads = 4, .head_dim = 8, .d_ff = 64, .vocab = 50,
                               .seq_len = 16, .window = 8, .bst_layers = {0, 2}, .ssm_state = 8, .ctx_states = 4});
}

class BstModel : public ::testing::TestWithParam<std::string> {};

TEST_P(BstModel, ParameterCountAndShapesFollowSection9) {
  auto backend = kernels::make_cpu_backend<float>();
  core::ModelConfig cfg = small_bst(GetParam());
  core::Model<float> model(cfg, 1, *backend);
  model.params().initialize(5);
  cfg.resolve();
  EXPECT_EQ(model.params().total_numel(), core::count_parameters(cfg));
  const int64_t D = 32, A = 32, H = 4, Ds = 8, M = 4;
  const int64_t C = cfg.bst_variant == core::BstVariant::kSH ? 1
                    : cfg.bst_variant == core::BstVariant::kMH ? H : cfg.ctx_states;
  auto shape = [&](const std::string& name) {
    const int i = model.params().find(name);
    EXPECT_GE(i, 0) << name;
    return i < 0 ? std::vector<int64_t>{} : model.params()[i].spec.shape;
  };
  for (int layer : {0, 2}) {
    const std::string p = "layers." + std::to_string(layer) + ".";
    EXPECT_EQ(shape(p + "attn.wo"), (std::vector<int64_t>{2 * A, D}));
    for (const char* w : {"attn.wq2", "attn.wkc", "attn.wvc"}) EXPECT_EQ(shape(p + w), (std::vector<int64_t>{D, A}));
    EXPECT_EQ(shape(p + "attn.scale2"), (std::vector<int64_t>{H}));
    EXPECT_EQ(shape(p + "attn.ctx_norm.scale"), (std::vector<int64_t>{D}));
    EXPECT_EQ(shape(p + "ssm.norm.scale"), (std::vector<int64_t>{D}));
    EXPECT_EQ(shape(p + "ssm.w_dn"), (std::vector<int64_t>{D, Ds}));
    EXPECT_EQ(shape(p + "ssm.w_up"), cfg.bst_variant == core::BstVariant::kMH
                                         ? (std::vector<int64_t>{H, Ds, D})
                                         : (std::vector<int64_t>{Ds, D}));
    EXPECT_EQ(shape(p + "ssm.dskip"), (std::vector<int64_t>{C, Ds}));
    if (cfg.ssm_kernel == core::SsmKernel::kS4D) {
      EXPECT_EQ(shape(p + "ssm.log_dt"), (std::vector<int64_t>{C, Ds}));
      for (const char* n : {"ssm.a_re", "ssm.a_im", "ssm.c_re", "ssm.c_im"})
        EXPECT_EQ(shape(p + n), (std::vector<int64_t>{C, Ds, M}));
    } else {
      EXPECT_EQ(shape(p + "ssm.filter.w_out"), (std::vector<int64_t>{64, C * Ds}));
    }
    if (cfg.bst_variant == core::BstVariant::kMF) {
      EXPECT_EQ(shape(p + "ssm.ctx_ids"), (std::vector<int64_t>{cfg.ctx_states, D}));
      EXPECT_EQ(shape(p + "ssm.ctx_init"), (std::vector<int64_t>{cfg.ctx_states, D}));
    }
  }
  EXPECT_LT(model.params().find("layers.1.ssm.w_dn"), 0) << "layer 1 is a standard layer";
  // S4D-Lin initial values (model.md §7.1).
  if (cfg.ssm_kernel == core::SsmKernel::kS4D) {
    const auto& a_im = model.params()[model.params().find("layers.0.ssm.a_im")];
    const auto& a_re = model.params()[model.params().find("layers.0.ssm.a_re")];
    const auto& log_dt = model.params()[model.params().find("layers.0.ssm.log_dt")];
    for (int n = 0; n < M; ++n) EXPECT_FLOAT_EQ(a_im.value[M + n], float(M_PI * n));
    EXPECT_FLOAT_EQ(a_re.value[3], float(std::log(0.5)));
    for (int64_t i = 0; i < log_dt.numel(); ++i) {
      EXPECT_GE(log_dt.value[i], std::log(1e-3f));
      EXPECT_LE(log_dt.value[i], std::log(1e-1f));
    }
  }
  // Every carried tensor is exposed, and the memory report counts it.
  const auto refs = model.carried_state();
  int64_t carried = 0;
  bool has_ssm_carry = false;
  for (const auto& r : refs) {
    int64_t n = 1;
    for (auto s : r.shape) n *= s;
    carried += n * int64_t(sizeof(float));
    has_ssm_carry = has_ssm_carry || r.name.find(".ssm.carry") != std::string::npos;
  }
  EXPECT_TRUE(has_ssm_carry);
  EXPECT_EQ(model.memory_report().carried_state, carried);
}

TEST_P(BstModel, TrainingLossFalls) {
  auto backend = kernels::make_cpu_backend<float>();
  core::ModelConfig cfg = small_bst(GetParam());
  core::Model<float> model(cfg, 2, *backend);
  model.params().initialize(5);
  std::mt19937_64 rng(17);
  const RandomBatch batch = random_batch(2, cfg.seq_len, cfg.vocab, rng, {1, 1});
  int count = 0;
  for (auto m : batch.mask) count += m;
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    const core::LossSums s = model.forward(batch.view(), 1.0f / float(count));
    const double loss = s.nats / double(s.count);
    ASSERT_TRUE(std::isfinite(loss));
    if (step == 0) first = loss;
    last = loss;
    model.params().zero_grads();
    model.backward();
    // Plain SGD on the memorisation of one batch.
    float* v = model.params().values();
    const float* g = model.params().grads();
    for (int64_t i = 0; i < model.params().total_numel(); ++i) v[i] -= 0.5f * g[i];
  }
  std::printf("%s: loss %.4f -> %.4f\n", GetParam().c_str(), first, last);
  EXPECT_LT(last, 0.8 * first);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, BstModel, ::testing::ValuesIn(all_bst_variants()), variant_name);

}  // namespace
}  // namespace brt::testing
