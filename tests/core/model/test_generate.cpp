// `brt-dist generate`: generation one block at a time with carried caches and
// recurrent state continues exactly what one long segment computes (so a prompt longer than
// the window works, at constant memory), and sampling is deterministic for a seed.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/model.h"
#include "kernels/backend.h"
#include "launch/eval/generator.h"
#include "model_test_util.h"
#include "tests/common/guarded_backend.h"

namespace brt::testing {
namespace {

class Generation : public ::testing::TestWithParam<std::string> {};

TEST_P(Generation, BlockAtATimeGreedyMatchesOneLongSegment) {
  auto backend = kernels::make_cpu_backend<float>();
  core::ModelConfig cfg = tiny_config(GetParam());
  cfg.window = 4;
  cfg.seq_len = 4;  // one block per segment
  core::Model<float> stepper(cfg, 1, *backend);
  stepper.params().initialize(21);
  launch::Generator gen(stepper);
  const std::vector<int32_t> prompt = {1, 5, 3, 8, 2, 9, 4};  // longer than the window
  launch::SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 9;
  const std::vector<int32_t> out = gen.generate(prompt, greedy, cfg.vocab, {});
  ASSERT_EQ(out.size(), 9u);

  // The same parameters (counter-based initialisation) over the whole sequence at once.
  core::ModelConfig long_cfg = cfg;
  long_cfg.seq_len = 16;
  core::Model<float> whole(long_cfg, 1, *backend);
  whole.params().initialize(21);
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), out.begin(), out.end());
  const uint8_t start = 1;
  const float* logits = whole.forward_logits({seq.data(), nullptr, nullptr, &start});
  for (size_t p = prompt.size() - 1; p + 1 < seq.size(); ++p) {
    const float* row = logits + p * cfg.vocab;
    const int32_t argmax = int32_t(std::max_element(row, row + cfg.vocab) - row);
    EXPECT_EQ(argmax, seq[p + 1]) << "position " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, Generation,
                         ::testing::Values("slide", "rec:fixed:skip", "rec:fixed:dual", "rec:lstm:skip",
                                           "rec:lstm:dual", "feedback:fixed:skip", "feedback:lstm:dual",
                                           "bst:sh:s4d", "bst:mh:s4d", "bst:mf:s4d"),
                         variant_name);

TEST(Generation, SamplingIsDeterministicForASeed) {
  auto backend = kernels::make_cpu_backend<float>();
  core::ModelConfig cfg = tiny_config("rec:fixed:skip");
  cfg.seq_len = cfg.window;
  launch::SamplingOptions opt;
  opt.temperature = 1.0;
  opt.top_p = 0.9;
  opt.max_tokens = 20;
  auto run = [&](uint64_t seed) {
    core::Model<float> model(cfg, 1, *backend);
    model.params().initialize(4);
    launch::Generator gen(model);
    opt.seed = seed;
    return gen.generate({1, 2, 3}, opt, cfg.vocab, {});
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

// `generate --device cuda` (docs/gpu.md): the model's buffers in memory the host cannot read
// (GuardedBackend: a stray host dereference is a SIGSEGV) sample exactly the CPU's tokens.
TEST(Generation, BackendMemoryTheHostCannotReadSamplesTheSameTokens) {
  for (const char* variant : {"rec:lstm:dual", "bst:sh:s4d"}) {
    core::ModelConfig cfg = tiny_config(variant);
    cfg.seq_len = cfg.window;
    if (cfg.variant.rfind("bst:", 0) == 0) cfg.ssm_state = 8;  // a small SSM state
    launch::SamplingOptions opt;
    opt.temperature = 1.0;
    opt.max_tokens = 12;
    opt.seed = 3;
    auto run = [&](kernels::Backend<float>& backend) {
      core::Model<float> model(cfg, 1, backend);
      model.params().initialize(4);
      launch::Generator gen(model);
      return gen.generate({1, 2, 3, 4, 5, 6, 7, 8, 9}, opt, cfg.vocab, {});
    };
    auto cpu = kernels::make_cpu_backend<float>();
    GuardedBackend<float> guarded;
    EXPECT_EQ(run(*cpu), run(guarded)) << variant;
  }
}

TEST(Generation, TopKOneAndTinyTopPAreGreedy) {
  const float logits[5] = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f};
  launch::SamplingOptions opt;
  opt.top_k = 1;
  for (double draw : {0.0, 0.5, 0.999}) EXPECT_EQ(launch::sample_token(logits, 5, opt, draw), 1);
  opt.top_k = 0;
  opt.top_p = 1e-6;
  for (double draw : {0.0, 0.5, 0.999}) EXPECT_EQ(launch::sample_token(logits, 5, opt, draw), 1);
  opt.top_p = 1.0;
  opt.top_k = 2;  // only ids 1 and 3 remain
  for (double draw : {0.0, 0.3, 0.7, 0.999}) {
    const int32_t t = launch::sample_token(logits, 5, opt, draw);
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
  EXPECT_EQ(launch::sample_token(logits, 3, opt, 0.999), 0);  // id 3 is outside vocab_used = 3
}

}  // namespace
}  // namespace brt::testing
