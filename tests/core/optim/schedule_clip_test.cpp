// Learning-rate schedules at their key steps, global-norm clipping, and OptimConfig checks
// (model.md §10c).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/optim/grad_clip.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optim_config.h"

namespace brt::core {
namespace {

OptimConfig make(ScheduleKind kind, int64_t warmup, int64_t total = 0) {
  OptimConfig c;
  c.lr = 0.02;
  c.min_lr = 0.002;
  c.schedule = kind;
  c.warmup = warmup;
  c.total_steps = total;
  return c;
}

TEST(LrSchedule, LinearWarmup) {
  for (ScheduleKind kind : {ScheduleKind::kRsqrt, ScheduleKind::kCosine, ScheduleKind::kConstant,
                            ScheduleKind::kLinear, ScheduleKind::kWsd}) {
    const OptimConfig c = make(kind, 100, 1000);
    EXPECT_DOUBLE_EQ(learning_rate(c, 0), 0.02 * 1 / 100);  // (t+1)/warmup
    EXPECT_DOUBLE_EQ(learning_rate(c, 49), 0.02 * 50 / 100);
    EXPECT_DOUBLE_EQ(learning_rate(c, 99), 0.02);  // the peak
  }
}

TEST(LrSchedule, Rsqrt) {
  const OptimConfig c = make(ScheduleKind::kRsqrt, 100);
  EXPECT_DOUBLE_EQ(learning_rate(c, 399), 0.02 / 2);  // sqrt(100/400)
  EXPECT_DOUBLE_EQ(learning_rate(c, 9999), 0.02 / 10);
  EXPECT_DOUBLE_EQ(learning_rate(c, 199), 0.02 * std::sqrt(0.5));
}

TEST(LrSchedule, CosineReachesMinLrAtTotalSteps) {
  const OptimConfig c = make(ScheduleKind::kCosine, 100, 1100);
  EXPECT_DOUBLE_EQ(learning_rate(c, 599), 0.002 + 0.018 * 0.5);  // half way: (1+cos(pi/2))/2
  EXPECT_NEAR(learning_rate(c, 349), 0.002 + 0.018 * (1 + std::cos(M_PI / 4)) / 2, 1e-15);
  EXPECT_DOUBLE_EQ(learning_rate(c, 1099), 0.002);  // t+1 == total_steps
  EXPECT_DOUBLE_EQ(learning_rate(c, 5000), 0.002);  // and after
}

TEST(LrSchedule, LinearReachesMinLrAtTotalSteps) {
  const OptimConfig c = make(ScheduleKind::kLinear, 100, 1100);
  EXPECT_DOUBLE_EQ(learning_rate(c, 599), 0.002 + 0.018 * 0.5);   // half way
  EXPECT_DOUBLE_EQ(learning_rate(c, 349), 0.002 + 0.018 * 0.75);  // a quarter
  EXPECT_DOUBLE_EQ(learning_rate(c, 1099), 0.002);
  EXPECT_DOUBLE_EQ(learning_rate(c, 5000), 0.002);
}

// Warmup-stable-decay: the peak held until the last decay_fraction of the run, then linear.
TEST(LrSchedule, WsdHoldsThenDecaysOverTheLastFraction) {
  OptimConfig c = make(ScheduleKind::kWsd, 100, 1100);
  c.decay_fraction = 0.2;  // the last 220 steps: decay from t+1 = 880
  EXPECT_DOUBLE_EQ(learning_rate(c, 99), 0.02);
  EXPECT_DOUBLE_EQ(learning_rate(c, 500), 0.02);
  EXPECT_DOUBLE_EQ(learning_rate(c, 879), 0.02);                 // t+1 = 880: the cooldown starts
  EXPECT_DOUBLE_EQ(learning_rate(c, 989), 0.002 + 0.018 * 0.5);  // half way through it
  EXPECT_DOUBLE_EQ(learning_rate(c, 1099), 0.002);
  EXPECT_DOUBLE_EQ(learning_rate(c, 4000), 0.002);
  c.decay_fraction = 1.0;  // never into the warmup: then it is the linear schedule
  EXPECT_DOUBLE_EQ(learning_rate(c, 599), learning_rate(make(ScheduleKind::kLinear, 100, 1100), 599));
}

TEST(LrSchedule, DecayingSchedulesNeedTheirEnd) {
  for (ScheduleKind kind : {ScheduleKind::kLinear, ScheduleKind::kWsd}) {
    OptimConfig c = make(kind, 10, 0);
    EXPECT_THROW(c.resolve(), std::invalid_argument) << to_string(kind);
  }
  OptimConfig c = make(ScheduleKind::kWsd, 10, 100);
  c.decay_fraction = 0;
  try {
    c.resolve();
    FAIL() << "decay_fraction 0 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("optim.decay_fraction"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_schedule_kind("wsd"), ScheduleKind::kWsd);
  EXPECT_EQ(parse_schedule_kind("linear"), ScheduleKind::kLinear);
}

TEST(LrSchedule, ConstantAndNoWarmup) {
  EXPECT_DOUBLE_EQ(learning_rate(make(ScheduleKind::kConstant, 0), 0), 0.02);
  EXPECT_DOUBLE_EQ(learning_rate(make(ScheduleKind::kConstant, 10), 12345), 0.02);
  const OptimConfig c = make(ScheduleKind::kCosine, 0, 10);
  EXPECT_DOUBLE_EQ(learning_rate(c, 9), 0.002);
  EXPECT_NEAR(learning_rate(c, 4), 0.011, 1e-15);  // p = 5/10
}

ParamStore<double>* make_store(ParamStore<double>& store) {
  std::mt19937 rng(3);
  std::normal_distribution<double> normal;
  for (auto shape : {std::vector<int64_t>{300, 200}, std::vector<int64_t>{17}, std::vector<int64_t>{40000}}) {
    ParamSpec spec;
    char name[16];  // (snprintf: g++ 12 -O3 warns falsely on "p" + std::to_string, -Wrestrict)
    std::snprintf(name, sizeof name, "p%d", store.size());
    spec.name = name;
    spec.shape = shape;
    store.declare(spec);
  }
  store.finalize();
  for (int64_t i = 0; i < store.total_numel(); ++i) store.grads()[i] = normal(rng);
  return &store;
}

TEST(GradClip, NormMatchesNaiveSumAndClipScalesToTheLimit) {
  ParamStore<double> store;
  make_store(store);
  long double naive = 0;
  for (int64_t i = 0; i < store.total_numel(); ++i) naive += (long double)store.grads()[i] * store.grads()[i];
  const double expected = std::sqrt((double)naive);
  GradNorm<double> norm(store);
  EXPECT_NEAR(norm.compute(store), expected, 1e-12 * expected);
  std::vector<double> before(store.grads(), store.grads() + store.total_numel());
  const double returned = clip_gradients(store, norm, 10.0);
  EXPECT_NEAR(returned, expected, 1e-12 * expected);
  EXPECT_NEAR(norm.compute(store), 10.0, 1e-10);
  for (int64_t i = 0; i < store.total_numel(); ++i) EXPECT_NEAR(store.grads()[i], before[i] * 10.0 / expected, 1e-14);
  // Below the limit, and with clipping off, nothing changes.
  EXPECT_NEAR(clip_gradients(store, norm, 100.0), 10.0, 1e-10);
  EXPECT_NEAR(clip_gradients(store, norm, 0.0), 10.0, 1e-10);
  EXPECT_NEAR(norm.compute(store), 10.0, 1e-10);
}

TEST(GradClip, ScaleRules) {
  EXPECT_DOUBLE_EQ(clip_scale(4.0, 1.0), 0.25);
  EXPECT_DOUBLE_EQ(clip_scale(0.5, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(clip_scale(4.0, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(clip_scale(NAN, 1.0), 1.0);
}

TEST(OptimConfig, ResolveFillsClipDefaultsAndNamesBadKeys) {
  OptimConfig a;
  a.kind = OptimKind::kAdamW;
  a.total_steps = 5000;
  a.resolve();
  EXPECT_EQ(a.clip_norm, 1.0);
  OptimConfig f;
  f.total_steps = 5000;
  f.resolve();
  EXPECT_EQ(f.clip_norm, 0.0);
  auto message = [](OptimConfig c) {
    try {
      c.resolve();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  OptimConfig c;
  c.total_steps = 5000;
  c.lr = -1;
  EXPECT_NE(message(c).find("optim.lr"), std::string::npos);
  c = OptimConfig{};
  EXPECT_NE(message(c).find("optim.total_steps"), std::string::npos);  // cosine needs it
  c.total_steps = 5000;
  c.beta2 = 1.0;
  EXPECT_NE(message(c).find("optim.beta2"), std::string::npos);
  c = OptimConfig{};
  c.schedule = ScheduleKind::kRsqrt;
  c.warmup = 0;
  EXPECT_NE(message(c).find("optim.warmup"), std::string::npos);
  c = OptimConfig{};
  c.total_steps = 5000;
  c.weight_decay = 0.1;
  EXPECT_NE(message(c).find("optim.weight_decay"), std::string::npos);  // not for Adafactor
  EXPECT_THROW(parse_optim_kind("sgd"), std::invalid_argument);
  EXPECT_EQ(parse_schedule_kind("rsqrt"), ScheduleKind::kRsqrt);
}

}  // namespace
}  // namespace brt::core
