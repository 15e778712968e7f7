// The feedback variant (model.md §5.4) against rec:*: with the state half of every
// non-recurrent layer's Wo (rows [A, 2A)) zero it computes exactly what the recurrent model
// computes — losses, carried state and every shared parameter's gradient, over segments that
// carry state and start documents — although it runs block-major; with that half non-zero the
// other layers do read the state. (Finite differences: test_model_gradcheck.)
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/model.h"
#include "kernels/backend.h"
#include "model_test_util.h"
#include "tests/common/test_seed.h"

namespace brt::testing {
namespace {

core::ModelConfig config(const std::string& variant) {
  core::ModelConfig c = tiny_config(variant);
  c.layers = 4;
  c.recurrent_layers = {1};  // two layers above it, one below
  c.seq_len = 16;            // four blocks of W = 4
  return c;
}

core::Param<double>* find(core::ParamStore<double>& store, const std::string& name) {
  for (auto& p : store.params())
    if (p.spec.name == name) return &p;
  return nullptr;
}

// Copies every parameter of `from` into `to` by name; a feedback layer's wider Wo gets the
// recurrent model's Wo in rows [0, A) and zeros in the state half. Returns the number of
// feedback-only parameters left as initialised (wq2, scale2 of the non-recurrent layers).
int copy_into_feedback(core::ParamStore<double>& from, core::ParamStore<double>& to) {
  int only_feedback = 0;
  for (auto& p : to.params()) {
    core::Param<double>* q = find(from, p.spec.name);
    if (q == nullptr) {
      ++only_feedback;
      continue;
    }
    std::fill(p.value, p.value + p.numel(), 0.0);
    std::copy(q->value, q->value + q->numel(), p.value);  // rows [0, A) of a wider Wo
  }
  return only_feedback;
}

TEST(Feedback, WithTheStateHalvesOfWoZeroItIsTheRecurrentModel) {
  for (const char* pair : {"fixed:skip", "lstm:dual"}) {
    SCOPED_TRACE(pair);
    auto backend = kernels::make_cpu_backend<double>();
    const core::ModelConfig rc = config(std::string("rec:") + pair);
    const core::ModelConfig fc = config(std::string("feedback:") + pair);
    core::Model<double> rec(rc, 2, *backend), fb(fc, 2, *backend);
    rec.params().initialize(77);
    fb.params().initialize(78);
    EXPECT_EQ(copy_into_feedback(rec.params(), fb.params()), 2 * 3);  // wq2, scale2 × 3 layers
    const uint64_t seed = brt::test::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    // Segment 1 starts both documents; 2 continues both; 3 starts one and continues one.
    for (const auto& starts : {std::vector<uint8_t>{1, 1}, {0, 0}, {1, 0}}) {
      RandomBatch batch = random_batch(2, rc.seq_len, rc.vocab, rng, starts);
      rec.params().zero_grads();
      fb.params().zero_grads();
      const double a = rec.forward(batch.view(), 1.0).nats, b = fb.forward(batch.view(), 1.0).nats;
      EXPECT_NEAR(b, a, 1e-12 * std::abs(a));
      const auto ra = rec.row_losses(), rb = fb.row_losses();
      for (size_t i = 0; i < ra.size(); ++i) ASSERT_NEAR(rb[i], ra[i], 1e-12 * (1 + std::abs(ra[i]))) << i;
      rec.backward();
      fb.backward();
      for (auto& p : rec.params().params()) {
        core::Param<double>* q = find(fb.params(), p.spec.name);
        ASSERT_NE(q, nullptr) << p.spec.name;
        double norm = 0;
        for (int64_t i = 0; i < p.numel(); ++i) norm = std::max(norm, std::abs(p.grad[i]));
        for (int64_t i = 0; i < p.numel(); ++i)
          ASSERT_NEAR(q->grad[i], p.grad[i], 1e-10 * (norm + 1e-30)) << p.spec.name << "[" << i << "]";
      }
      const auto sa = rec.snapshot_carried_state(), sb = fb.snapshot_carried_state();
      ASSERT_EQ(sa.size(), sb.size());
      const auto names_a = rec.carried_state(), names_b = fb.carried_state();
      for (size_t k = 0; k < sa.size(); ++k) {
        EXPECT_EQ(names_a[k].name, names_b[k].name);
        ASSERT_EQ(sa[k].size(), sb[k].size()) << names_a[k].name;
        for (size_t i = 0; i < sa[k].size(); ++i)
          ASSERT_NEAR(sb[k][i], sa[k][i], 1e-12 * (1 + std::abs(sa[k][i]))) << names_a[k].name;
      }
    }
  }
}

TEST(Feedback, TheOtherLayersReadTheState) {
  auto backend = kernels::make_cpu_backend<double>();
  const core::ModelConfig rc = config("rec:fixed:skip"), fc = config("feedback:fixed:skip");
  core::Model<double> rec(rc, 2, *backend), fb(fc, 2, *backend);
  rec.params().initialize(5);
  fb.params().initialize(5);
  copy_into_feedback(rec.params(), fb.params());
  // The state half of layer 3's Wo non-zero: the loss changes, and so does the gradient
  // reaching the state's parameters (its ids, its initial value) from above.
  core::Param<double>* wo = find(fb.params(), "layers.3.attn.wo");
  const int64_t half = wo->numel() / 2;
  for (int64_t i = half; i < wo->numel(); ++i) wo->value[i] = 0.3 * std::sin(double(i));
  std::mt19937_64 rng(3);
  RandomBatch batch = random_batch(2, rc.seq_len, rc.vocab, rng, {1, 1});
  const double a = rec.forward(batch.view(), 1.0).nats, b = fb.forward(batch.view(), 1.0).nats;
  EXPECT_GT(std::abs(b - a), 1e-6 * std::abs(a));
  fb.params().zero_grads();
  fb.backward();
  double wq2 = 0;
  const core::Param<double>* q2 = find(fb.params(), "layers.3.attn.wq2");
  for (int64_t i = 0; i < q2->numel(); ++i) wq2 += std::abs(q2->grad[i]);
  EXPECT_GT(wq2, 0.0);
}

TEST(Feedback, RefusesMoreThanOneRecurrentLayer) {
  auto backend = kernels::make_cpu_backend<double>();
  core::ModelConfig c = config("feedback:fixed:skip");
  c.recurrent_layers = {1, 2};
  EXPECT_THROW(core::Model<double>(c, 1, *backend), std::invalid_argument);
}

}  // namespace
}  // namespace brt::testing
