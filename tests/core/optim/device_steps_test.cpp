// The optimizer's step enqueued without waiting for its gradient norm (core/optim/optimizer.h:
// stage_step / enqueue_step / finish_step; the scalars in the store's memory,
// kernels::OptimStepScalars): the same values and state as step() bit for bit, a non-finite
// gradient norm or loss sum writes nothing and is not counted, and the norm made by grad_norm_finish equals
// GradNorm::compute's host sum bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/optim/grad_clip.h"
#include "core/optim/optimizer.h"
#include "tests/core/optim/optim_test_config.h"
#include "kernels/optimizer_kernels.h"

namespace brt::core {
namespace {

void declare(ParamStore<float>& store) {
  // Factored matrices (one with r > c), a rank-3 tensor, vectors; over several chunks each.
  const std::vector<std::vector<int64_t>> shapes = {{200, 260}, {300, 150}, {2, 130, 150}, {50}, {40000}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    ParamSpec spec;
    spec.name = "w" + std::to_string(i);
    spec.shape = shapes[i];
    spec.init = {InitKind::kNormal, 0.5, 1.0, 0};
    store.declare(spec);
  }
  store.finalize();
  store.initialize(3);
}

void set_grads(ParamStore<float>& store, int step) {
  std::mt19937_64 rng(101 + step);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < store.total_numel(); ++i) store.grads()[i] = normal(rng);
}

OptimConfig config(OptimKind kind) { return test::clipped_config(kind); }

bool same_bits(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, size_t(n) * sizeof(float)) == 0; }

void expect_same(ParamStore<float>& a, ParamStore<float>& b, Optimizer<float>& oa, Optimizer<float>& ob) {
  EXPECT_TRUE(same_bits(a.values(), b.values(), a.total_numel()));
  const auto sa = oa.state(), sb = ob.state();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t k = 0; k < sa.size(); ++k) EXPECT_TRUE(same_bits(sa[k].data, sb[k].data, sa[k].numel())) << sa[k].name;
  EXPECT_EQ(oa.step_count(), ob.step_count());
}

class DeviceStepRules : public ::testing::TestWithParam<OptimKind> {};

// Steps 0..4 through both paths; step 2's gradients hold a NaN. The host path (the trainer's
// guard) skips it without calling the optimizer; the enqueued step runs and must write nothing.
TEST_P(DeviceStepRules, EqualTheHostStepsAndANonFiniteNormWritesNothing) {
  ParamStore<float> host, device;
  declare(host);
  declare(device);
  auto a = make_optimizer(config(GetParam()), host);
  auto b = make_optimizer(config(GetParam()), device);
  ASSERT_TRUE(b->device_steps());
  for (int t = 0; t < 5; ++t) {
    set_grads(host, t);
    set_grads(device, t);
    if (t == 2) host.grads()[1234] = device.grads()[1234] = std::numeric_limits<float>::quiet_NaN();
    b->stage_step();  // before the gradients are known: it needs only t
    const double norm = a->grad_norm();
    b->enqueue_step();
    const StepStats sb = b->finish_step();
    EXPECT_EQ(sb.grad_norm == norm || (std::isnan(sb.grad_norm) && std::isnan(norm)), true) << "step " << t;
    if (t == 2) {
      EXPECT_FALSE(sb.applied);
      EXPECT_EQ(sb.step, 2);
    } else {
      const StepStats sa = a->apply(norm);
      EXPECT_TRUE(sb.applied);
      EXPECT_EQ(sa.step, sb.step);
      EXPECT_EQ(sa.lr, sb.lr);
      EXPECT_EQ(sa.clip_scale, sb.clip_scale);
      EXPECT_LT(sa.clip_scale, 1.0);  // clipping is exercised
    }
    expect_same(host, device, *a, *b);
  }
  EXPECT_EQ(b->step_count(), 4);
}

INSTANTIATE_TEST_SUITE_P(Rules, DeviceStepRules, ::testing::Values(OptimKind::kAdafactor, OptimKind::kAdamW),
                         [](const auto& info) { return info.param == OptimKind::kAdamW ? "AdamW" : "Adafactor"; });

// GradNorm::enqueue (grad_norm_finish) against compute() (the partials summed on the host), with
// the clip scale and skip it writes, for a finite norm, an infinite one and a NaN.
TEST(DeviceSteps, TheNormMadeWhereTheGradientsLiveEqualsTheHostSum) {
  ParamStore<float> store;
  declare(store);
  GradNorm<float> norm(store);
  kernels::OptimStepScalars<float> step;
  for (float poison : {0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    set_grads(store, 7);
    if (poison != 0.0f) store.grads()[store.total_numel() - 5] = poison;
    const double host = norm.compute(store);
    norm.enqueue(store, 100.0, &step);
    if (std::isfinite(host)) {
      EXPECT_EQ(step.grad_norm, host);
      EXPECT_EQ(step.grad_scale, static_cast<float>(clip_scale(host, 100.0)));
      EXPECT_EQ(step.skip, 0);
    } else {
      EXPECT_FALSE(std::isfinite(step.grad_norm));
      EXPECT_EQ(step.grad_scale, 1.0f);
      EXPECT_EQ(step.skip, 1);
    }
  }
}

// An update enqueued before the host has seen the loss (inside the step's CUDA graph) reads the
// loss sum where it lives: a non-finite one skips the update although the norm is finite, a
// finite one applies it as step() does.
TEST(DeviceSteps, ANonFiniteLossSumSkipsTheUpdateItGuards) {
  ParamStore<float> host, device;
  declare(host);
  declare(device);
  auto a = make_optimizer(config(OptimKind::kAdafactor), host);
  auto b = make_optimizer(config(OptimKind::kAdafactor), device);
  for (double loss : {std::numeric_limits<double>::quiet_NaN(), 12.5, std::numeric_limits<double>::infinity(), 3.0}) {
    set_grads(host, 0);
    set_grads(device, 0);
    b->stage_step();
    b->enqueue_step(&loss);
    const StepStats sb = b->finish_step();
    EXPECT_TRUE(std::isfinite(sb.grad_norm));
    EXPECT_EQ(sb.applied, std::isfinite(loss)) << "loss " << loss;
    if (std::isfinite(loss)) a->step();
    expect_same(host, device, *a, *b);
  }
  EXPECT_EQ(b->step_count(), 2);
}

// A reducer sums the norm on the host, so the enqueued step is refused with the way out named.
TEST(DeviceSteps, AReducerKeepsTheHostPath) {
  struct Identity final : StatReducer {
    void reduce(StatKind, std::span<double>, std::span<const StatBlock>) override {}
  } reducer;
  ParamStore<float> store;
  declare(store);
  auto opt = make_optimizer(config(OptimKind::kAdafactor), store);
  opt->set_reducer(&reducer);
  EXPECT_FALSE(opt->device_steps());
  try {
    opt->enqueue_step();
    FAIL() << "enqueue_step ran under a reducer";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("use step()"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace brt::core
