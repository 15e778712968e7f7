// Guards against the classic recurrent-transformer bug: a recurrent layer
// whose state update is never trained because no gradient reaches it through the carried state
// (one public BRT port shipped so for a while). model.md §5.2: block t's tokens read Σ_t, which
// summarises blocks < t, and backward runs through every block of the segment; across segment
// boundaries the state is carried but detached (§8).
//
//  - The parameters that only compute the next state (state.wq, wq2, wo, scales, gates; dual's
//    MLP) get no gradient from a loss on the first block, a non-zero one from a loss on a later
//    block, equal to finite differences; with one block per segment (the same tokens, carried
//    state, the same losses) they get none: what a detached carry between blocks would do.
//  - A later block's loss depends on an earlier block's tokens (beyond the attention's reach
//    W·L) through the state only: it changes with them, but not with the block ablation (every
//    block reads Σ0) and not in the slide model.
//  - A micro model trained on a passkey-like task relies on the state: the block ablation
//    sends its teacher-forced answer loss (data/task_eval.h's scoring, as `eval --task`
//    scores) up and its exact-match accuracy down.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "core/model.h"
#include "core/optim/optimizer.h"
#include "data/task_eval.h"
#include "kernels/backend.h"
#include "model_test_util.h"
#include "tests/common/test_seed.h"

namespace brt::testing {
namespace {

// Parameters of the recurrent layer's state side that tokens read as well (Σ_t's keys and
// values, and Σ0): every other state.* parameter only computes Σ_{t+1}.
bool tokens_read_it(const std::string& name) {
  static const std::set<std::string> read = {"norm.scale", "ids", "init", "wk", "wv"};
  const auto at = name.find(".state.");
  return at == std::string::npos || read.count(name.substr(at + 7)) > 0;
}

std::vector<core::Param<double>*> state_update_params(core::ParamStore<double>& store) {
  std::vector<core::Param<double>*> out;
  for (auto& p : store.params())
    if (!tokens_read_it(p.spec.name)) out.push_back(&p);
  return out;
}

core::ModelConfig blocks_config(const std::string& variant, int blocks) {
  core::ModelConfig c = tiny_config(variant);
  c.seq_len = blocks * c.window;
  return c;
}

// The targets of block `block` only (W positions per stream).
std::vector<uint8_t> block_mask(int streams, int seq, int window, int block) {
  std::vector<uint8_t> mask(size_t(streams) * size_t(seq), 0);
  for (int s = 0; s < streams; ++s)
    for (int t = block * window; t < (block + 1) * window; ++t) mask[size_t(s) * seq + t] = 1;
  return mask;
}

double grad_norm(const std::vector<core::Param<double>*>& params) {
  double sum = 0;
  for (const auto* p : params)
    for (int64_t i = 0; i < p->numel(); ++i) sum += p->grad[i] * p->grad[i];
  return std::sqrt(sum);
}

class CarriedStateGradient : public ::testing::TestWithParam<std::string> {};

TEST_P(CarriedStateGradient, ALaterBlockLossTrainsTheStateUpdateThroughTheCarry) {
  const uint64_t seed = brt::test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto backend = kernels::make_cpu_backend<double>();
  const int blocks = 4, streams = 2;
  const core::ModelConfig cfg = blocks_config(GetParam(), blocks);
  core::Model<double> model(cfg, streams, *backend);
  model.params().initialize(seed);
  std::mt19937_64 rng(seed);
  RandomBatch batch = random_batch(streams, cfg.seq_len, cfg.vocab, rng, {1, 1});
  const auto update = state_update_params(model.params());
  ASSERT_GE(update.size(), 6u);  // wq, wq2, wo, scale, scale2 and a gate

  const auto gradient_with_loss_on = [&](int block) {
    batch.mask = block_mask(streams, cfg.seq_len, cfg.window, block);
    model.params().zero_grads();
    model.forward(batch.view(), 1.0);
    model.backward();
  };
  gradient_with_loss_on(0);  // block 0 reads Σ0, which no update made
  for (const auto* p : update)
    for (int64_t i = 0; i < p->numel(); ++i) ASSERT_EQ(p->grad[i], 0.0) << p->spec.name << "[" << i << "]";

  gradient_with_loss_on(blocks - 1);
  for (auto* p : update) EXPECT_GT(grad_norm({p}), 1e-10) << p->spec.name << " gets no gradient from a later block";
  // ... and it is the loss's gradient (the whole-model gradcheck covers every parameter; this
  // one isolates the path through Σ_1 .. Σ_3).
  std::vector<double*> x;
  std::vector<double> analytic;
  std::vector<std::string> names;
  for (auto* p : update)
    for (int64_t i = 0; i < p->numel(); ++i) {
      x.push_back(p->value + i);
      analytic.push_back(p->grad[i]);
      names.push_back(p->spec.name + "[" + std::to_string(i) + "]");
    }
  const GradError err = check_gradient([&] { return model.forward(batch.view(), 1.0).nats; }, x, analytic, names);
  std::printf("%s: gradient through the carried state (%zu elements, norm %.3g): relative error %.3g, worst %.3g (%s)\n",
              GetParam().c_str(), x.size(), grad_norm(update), err.norm_rel, err.max_rel, err.where.c_str());
  EXPECT_LE(err.norm_rel, 1e-6) << err.where;
}

TEST_P(CarriedStateGradient, OneBlockPerSegmentCarriesTheStateButNoGradient) {
  const uint64_t seed = brt::test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto backend = kernels::make_cpu_backend<double>();
  const int blocks = 4, streams = 2;
  const core::ModelConfig whole_cfg = blocks_config(GetParam(), blocks), block_cfg = blocks_config(GetParam(), 1);
  core::Model<double> whole(whole_cfg, streams, *backend), split(block_cfg, streams, *backend);
  whole.params().initialize(seed);
  split.params().initialize(seed);
  std::mt19937_64 rng(seed);
  RandomBatch batch = random_batch(streams, whole_cfg.seq_len, whole_cfg.vocab, rng, {1, 1});
  batch.mask = block_mask(streams, whole_cfg.seq_len, whole_cfg.window, blocks - 1);
  whole.params().zero_grads();
  const double whole_nats = whole.forward(batch.view(), 1.0).nats;
  whole.backward();

  // The same tokens as four segments of one block, the state carried from each to the next.
  const int W = whole_cfg.window;
  split.params().zero_grads();
  double last_nats = 0;
  for (int b = 0; b < blocks; ++b) {
    RandomBatch part;
    for (int s = 0; s < streams; ++s) {
      const auto from = size_t(s) * whole_cfg.seq_len + size_t(b) * W;
      part.inputs.insert(part.inputs.end(), batch.inputs.begin() + from, batch.inputs.begin() + from + W);
      part.targets.insert(part.targets.end(), batch.targets.begin() + from, batch.targets.begin() + from + W);
      part.mask.insert(part.mask.end(), batch.mask.begin() + from, batch.mask.begin() + from + W);
    }
    part.doc_start.assign(streams, b == 0 ? 1 : 0);
    last_nats = split.forward(part.view(), 1.0).nats;
    split.backward();
  }
  EXPECT_NEAR(last_nats, whole_nats, 1e-9 * std::fabs(whole_nats));  // the same model and tokens
  EXPECT_GT(grad_norm(state_update_params(whole.params())), 1e-10);
  for (const auto* p : state_update_params(split.params()))
    for (int64_t i = 0; i < p->numel(); ++i) ASSERT_EQ(p->grad[i], 0.0) << p->spec.name << ": the carry is detached (model.md §8)";
}

INSTANTIATE_TEST_SUITE_P(RecurrentVariants, CarriedStateGradient,
                         ::testing::Values("rec:fixed:skip", "rec:lstm:dual", "feedback:fixed:skip"), variant_name);

TEST(CarriedState, AnEarlyBlockReachesALaterBlockOnlyThroughTheState) {
  const uint64_t seed = brt::test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int blocks = 8, streams = 2;
  for (const std::string variant : {"rec:fixed:skip", "slide"}) {
    auto backend = kernels::make_cpu_backend<double>();
    const core::ModelConfig cfg = blocks_config(variant, blocks);
    ASSERT_GT((blocks - 1) * cfg.window, cfg.window * (cfg.layers + 1));  // the last block is out of attention's reach
    core::Model<double> model(cfg, streams, *backend);
    model.params().initialize(seed);
    std::mt19937_64 rng(seed);
    RandomBatch batch = random_batch(streams, cfg.seq_len, cfg.vocab, rng, {1, 1});
    batch.mask = block_mask(streams, cfg.seq_len, cfg.window, blocks - 1);
    RandomBatch changed = batch;
    for (int s = 0; s < streams; ++s)
      for (int t = 0; t < cfg.window; ++t) {
        int32_t& token = changed.inputs[size_t(s) * cfg.seq_len + t];
        token = (token + 1 + t) % cfg.vocab;
      }
    const auto last_block_loss = [&](const RandomBatch& b, core::CarryAblation ablation) {
      model.set_carry_ablation(ablation);
      const double nats = model.forward(b.view(), 0.0).nats;
      model.set_carry_ablation(core::CarryAblation::kNone);
      return nats;
    };
    const double plain = last_block_loss(batch, core::CarryAblation::kNone);
    const double moved = last_block_loss(changed, core::CarryAblation::kNone);
    std::printf("%s: last block's loss %.12f, with block 0's tokens changed %.12f\n", variant.c_str(), plain, moved);
    if (variant == "slide") {
      EXPECT_EQ(moved, plain);
    } else {
      EXPECT_GT(std::fabs(moved - plain), 1e-8);
      EXPECT_EQ(last_block_loss(changed, core::CarryAblation::kBlock), last_block_loss(batch, core::CarryAblation::kBlock));
    }
  }
}

// Passkey with synthetic tokens: [KEY_MARK, key, filler ..., QUERY_MARK] and the key as the
// target after QUERY_MARK, far beyond the attention's reach W·L.
constexpr int kKeyMark = 1, kQueryMark = 2, kFirstKey = 3, kKeys = 6, kFirstFiller = 9;
constexpr int kVocab = 16, kSeq = 32, kWindow = 4, kStreams = 8;

PasskeyBatch passkey_batch(std::mt19937_64& rng) {
  return make_passkey_batch(kStreams, kSeq, kKeyMark, kQueryMark, [&](int32_t* in) {
    const int key = kFirstKey + int(rng() % kKeys), query = 20 + int(rng() % (kSeq - 20));
    for (int i = 0; i < kSeq; ++i) in[i] = kFirstFiller + int(rng() % (kVocab - kFirstFiller));
    return std::pair{key, query};
  });
}

// Held-out answers scored teacher-forced from the logits, as `eval --task` scores them.
data::AnswerScore held_out_answers(core::Model<float>& model, core::CarryAblation ablation, uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x5EED5EEDull);  // other batches than training's
  data::AnswerScore all;  // one answer token per document: its score is the document's
  model.set_carry_ablation(ablation);
  for (int rep = 0; rep < 8; ++rep) {
    const PasskeyBatch b = passkey_batch(rng);
    const float* logits = model.forward_logits({b.inputs.data(), nullptr, nullptr, b.doc_start.data()});
    const auto host = kernels::copy_to_host(model.memory(), logits, size_t(kStreams) * kSeq * kVocab);
    for (const size_t row : b.answer_row) {
      all.add(data::score_answer_token<float>(std::span(host).subspan(row * kVocab, kVocab), b.targets[row]));
    }
  }
  model.set_carry_ablation(core::CarryAblation::kNone);
  return all;
}

TEST(CarriedState, TheBlockAblationChangesTheTaskLossOfAStateReliantModel) {
  const uint64_t seed = brt::test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto backend = kernels::make_cpu_backend<float>();
  const core::ModelConfig cfg = micro_model("rec:fixed:skip", {.layers = 2, .d_model = 32, .heads = 2, .head_dim = 16, .d_ff = 64,
                                                .vocab = kVocab, .seq_len = kSeq, .window = kWindow, .state_size = 8,
                                                .recurrent_layers = {1}});
  core::Model<float> model(cfg, kStreams, *backend);
  model.params().initialize(seed);
  auto optimizer = core::make_optimizer(constant_adamw(3e-3, 30), model.params());
  std::mt19937_64 rng(seed);
  // Trained until it reads the key (some seeds take longer), checked every 200 steps.
  const double chance_nats = std::log(double(kKeys));
  int steps = 0;
  data::AnswerScore plain;
  while (steps < 2000 && (steps == 0 || plain.mean_nats() > 0.25 * chance_nats)) {
    for (const int stop = steps + 200; steps < stop; ++steps) {
      const PasskeyBatch b = passkey_batch(rng);
      model.params().zero_grads();
      model.forward({b.inputs.data(), b.targets.data(), b.mask.data(), b.doc_start.data()}, 1.0f / kStreams);
      model.backward();
      optimizer->step();
    }
    plain = held_out_answers(model, core::CarryAblation::kNone, seed);
  }
  const data::AnswerScore ablated = held_out_answers(model, core::CarryAblation::kBlock, seed);
  std::printf("passkey micro model after %d steps: exact match %.3f, answer loss %.4f nats; block ablation: "
              "exact match %.3f, answer loss %.4f (chance %.3f, ln %d = %.3f)\n",
              steps, double(plain.argmax_hits) / plain.tokens, plain.mean_nats(),
              double(ablated.argmax_hits) / ablated.tokens, ablated.mean_nats(), 1.0 / kKeys, kKeys, chance_nats);
  ASSERT_LT(plain.mean_nats(), 0.25 * chance_nats) << "it did not learn to read the key from the state";
  EXPECT_GT(ablated.mean_nats(), plain.mean_nats() + 1.0);
  EXPECT_GT(plain.argmax_hits, ablated.argmax_hits + plain.tokens / 4);
}

}  // namespace
}  // namespace brt::testing
