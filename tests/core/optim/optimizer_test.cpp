// Adafactor and AdamW (core/) against the float64 references of optim_reference.h over several
// steps on random parameters and gradients (model.md §10c).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <string>

#include "core/optim/adafactor.h"
#include "core/optim/adamw.h"
#include "core/optim/optimizer.h"
#include "optim_reference.h"

namespace brt::core {
namespace {

using test::RefTensor;

// Shapes cover: a factored matrix larger than one chunk (rows split across chunks), a factored
// matrix with more rows than columns, a factored rank-3 tensor, a vector, a small matrix, and a
// matrix with one dim below 128 (so not factored).
const std::vector<std::vector<int64_t>> kShapes = {
    {200, 260}, {200, 130}, {2, 130, 150}, {50}, {20, 30}, {300, 7}};

// "p<i>" (built with snprintf: g++ 12 -O3 warns falsely on "p" + std::to_string, -Wrestrict)
std::string param_name(int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "p%d", i);
  return buf;
}

template <typename T>
void declare_all(ParamStore<T>& store) {
  for (size_t i = 0; i < kShapes.size(); ++i) {
    ParamSpec spec;
    spec.name = param_name(static_cast<int>(i));
    spec.shape = kShapes[i];
    spec.init = {InitKind::kNormal, 0.5, 1.0, 0};
    store.declare(spec);
  }
  store.finalize();
  store.initialize(7);
}

template <typename T>
std::vector<RefTensor> reference_copy(const ParamStore<T>& store) {
  std::vector<RefTensor> out;
  for (const auto& p : store.params()) {
    RefTensor t;
    t.shape = p.spec.shape;
    t.value.assign(p.value, p.value + p.numel());
    t.grad.assign(p.numel(), 0.0);
    out.push_back(std::move(t));
  }
  return out;
}

// Fresh gradients for step `step`: N(0, scale_p) with a per-tensor scale so the tensors differ.
template <typename T>
void fill_grads(ParamStore<T>& store, std::vector<RefTensor>& ref, int step, double scale) {
  std::mt19937_64 rng(1000 + step);
  std::normal_distribution<double> normal;
  for (int p = 0; p < store.size(); ++p) {
    const double s = scale * (0.2 + 0.3 * p);
    for (int64_t i = 0; i < store[p].numel(); ++i) {
      const T g = static_cast<T>(s * normal(rng));
      store[p].grad[i] = g;
      ref[p].grad[i] = static_cast<double>(g);  // the same numbers in both
    }
  }
}

template <typename T>
double max_rel_error(const ParamStore<T>& store, const std::vector<RefTensor>& ref) {
  double worst = 0;
  for (int p = 0; p < store.size(); ++p) {
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < store[p].numel(); ++i) {
      diff = std::max(diff, std::fabs(store[p].value[i] - ref[p].value[i]));
      norm = std::max(norm, std::fabs(ref[p].value[i]));
    }
    worst = std::max(worst, diff / norm);
  }
  return worst;
}

OptimConfig schedule_config(OptimKind kind) {
  OptimConfig c;
  c.kind = kind;
  c.lr = kind == OptimKind::kAdafactor ? 0.05 : 0.01;
  c.warmup = 2;
  c.schedule = ScheduleKind::kCosine;
  c.min_lr = 0.001;
  c.total_steps = 8;
  return c;
}

template <typename T>
void run_against_reference(OptimConfig config, double grad_scale, double tolerance, bool expect_clip) {
  ParamStore<T> store;
  declare_all(store);
  auto ref = reference_copy(store);
  auto opt = make_optimizer(config, store);
  test::RefAdafactor ref_adafactor(ref);
  test::RefAdamW ref_adamw(ref, config.weight_decay);
  const double clip = config.kind == OptimKind::kAdamW && config.clip_norm < 0 ? 1.0 : config.clip_norm;
  bool clipped_once = false;
  for (int t = 0; t < 6; ++t) {
    fill_grads(store, ref, t, grad_scale);
    const double norm = test::ref_global_norm(ref);
    test::ref_clip(ref, clip);
    const double lr = test::ref_lr(config.lr, double(config.warmup), "cosine", config.min_lr,
                                   double(config.total_steps), t);
    if (config.kind == OptimKind::kAdafactor) ref_adafactor.step(ref, t, lr);
    else ref_adamw.step(ref, t, lr);
    const StepStats stats = opt->step();
    EXPECT_EQ(stats.step, t);
    EXPECT_NEAR(stats.lr, lr, 1e-15);
    EXPECT_NEAR(stats.grad_norm, norm, 1e-6 * norm);
    clipped_once |= stats.clip_scale < 1.0;
    EXPECT_LT(max_rel_error(store, ref), tolerance) << "after step " << t;
  }
  EXPECT_EQ(opt->step_count(), 6);
  EXPECT_EQ(clipped_once, expect_clip);
}

TEST(Adafactor, MatchesReferenceDouble) {
  run_against_reference<double>(schedule_config(OptimKind::kAdafactor), 1.0, 1e-11, false);
}

TEST(Adafactor, MatchesReferenceFloat) {
  run_against_reference<float>(schedule_config(OptimKind::kAdafactor), 1.0, 2e-5, false);
}

TEST(Adafactor, MatchesReferenceWithClippingAndTinyGradients) {
  OptimConfig c = schedule_config(OptimKind::kAdafactor);
  c.clip_norm = 0.5;
  run_against_reference<double>(c, 1e-3, 1e-11, false);  // tiny grads: rho-weighted G, eps floor paths
  run_against_reference<double>(c, 10.0, 1e-11, true);
}

TEST(AdamW, MatchesReferenceDouble) {
  OptimConfig c = schedule_config(OptimKind::kAdamW);
  c.weight_decay = 0.1;
  run_against_reference<double>(c, 1.0, 1e-12, true);  // default clip 1.0 is active at this scale
}

TEST(AdamW, MatchesReferenceFloat) {
  OptimConfig c = schedule_config(OptimKind::kAdamW);
  c.weight_decay = 0.1;
  run_against_reference<float>(c, 1.0, 2e-5, true);
}

TEST(Adafactor, FactorsTheTwoLargestAxes) {
  EXPECT_FALSE(adafactor_factor_axes({4096}, 128));
  EXPECT_FALSE(adafactor_factor_axes({1024, 127}, 128));
  auto a = adafactor_factor_axes({130, 200}, 128);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->normalized, 0);
  EXPECT_EQ(a->largest, 1);
  a = adafactor_factor_axes({200, 130}, 128);
  EXPECT_EQ(a->normalized, 1);
  EXPECT_EQ(a->largest, 0);
  a = adafactor_factor_axes({512, 512}, 128);  // ties: the later axis counts as larger
  EXPECT_EQ(a->normalized, 0);
  EXPECT_EQ(a->largest, 1);
  a = adafactor_factor_axes({8, 256, 1024}, 128);  // MH w_up [H, Ds, D]
  EXPECT_EQ(a->normalized, 1);
  EXPECT_EQ(a->largest, 2);
  EXPECT_FALSE(adafactor_factor_axes({32, 256, 32}, 128));  // s4d a_re [C, Ds, N_s/2]
}

TEST(Adafactor, ExposesNamedStateThatMatchesTheReference) {
  ParamStore<double> store;
  declare_all(store);
  auto ref = reference_copy(store);
  Adafactor<double> opt(schedule_config(OptimKind::kAdafactor), store);
  test::RefAdafactor ref_opt(ref);
  for (int t = 0; t < 3; ++t) {
    fill_grads(store, ref, t, 1.0);
    ref_opt.step(ref, t, test::ref_lr(0.05, 2, "cosine", 0.001, 8, t));
    opt.step();
  }
  const auto state = opt.state();
  auto find = [&](const std::string& name) -> const NamedState<double>& {
    for (const auto& s : state)
      if (s.name == name) return s;
    throw std::runtime_error("no state " + name);
  };
  // [200, 260]: R over rows (normalised), C over columns, as docs/model.md §10c writes it.
  const auto& r0 = find("p0.adafactor.r");
  EXPECT_EQ(r0.shape, (std::vector<int64_t>{200}));
  EXPECT_EQ(find("p0.adafactor.c").shape, (std::vector<int64_t>{260}));
  for (int i = 0; i < 200; ++i) EXPECT_NEAR(r0.data[i], ref_opt.R(0)[i], 1e-12 * ref_opt.R(0)[i]);
  for (int j = 0; j < 260; ++j) EXPECT_NEAR(find("p0.adafactor.c").data[j], ref_opt.C(0)[j], 1e-12 * ref_opt.C(0)[j]);
  // [200, 130]: the reference normalises the 130-long accumulator ("r"); the 200-long one is "c".
  EXPECT_EQ(find("p1.adafactor.r").shape, (std::vector<int64_t>{130}));
  EXPECT_EQ(find("p1.adafactor.c").shape, (std::vector<int64_t>{200}));
  for (int j = 0; j < 130; ++j) EXPECT_NEAR(find("p1.adafactor.r").data[j], ref_opt.C(1)[j], 1e-12 * ref_opt.C(1)[j]);
  // [2, 130, 150]: one pair per leading index.
  EXPECT_EQ(find("p2.adafactor.r").shape, (std::vector<int64_t>{2, 130}));
  EXPECT_EQ(find("p2.adafactor.c").shape, (std::vector<int64_t>{2, 150}));
  for (int k = 0; k < 2 * 150; ++k) EXPECT_NEAR(find("p2.adafactor.c").data[k], ref_opt.C(2)[k], 1e-12 * ref_opt.C(2)[k]);
  // Full second moments and momentum.
  EXPECT_EQ(find("p3.adafactor.v").shape, (std::vector<int64_t>{50}));
  for (int i = 0; i < 50; ++i) EXPECT_NEAR(find("p3.adafactor.v").data[i], ref_opt.v(3)[i], 1e-12 * ref_opt.v(3)[i]);
  for (int i = 0; i < 600; ++i) EXPECT_NEAR(find("p4.adafactor.m").data[i], ref_opt.m(4)[i], 1e-9 * std::fabs(ref_opt.m(4)[i]) + 1e-15);
  EXPECT_EQ(state.size(), 3u * 3 + 3u * 2);  // m, r, c for factored; m, v otherwise
}

// Saving the state and step counter and restoring them into a fresh optimizer continues the
// run bit for bit (what a checkpoint needs).
TEST(Optimizer, StateRoundTripContinuesIdentically) {
  for (OptimKind kind : {OptimKind::kAdafactor, OptimKind::kAdamW}) {
    ParamStore<float> a, b;
    declare_all(a);
    declare_all(b);
    auto ref = reference_copy(a);
    auto opt_a = make_optimizer(schedule_config(kind), a);
    auto opt_b = make_optimizer(schedule_config(kind), b);
    for (int t = 0; t < 3; ++t) {
      fill_grads(a, ref, t, 1.0);
      opt_a->step();
    }
    std::copy(a.values(), a.values() + a.total_numel(), b.values());
    auto sa = opt_a->state();
    auto sb = opt_b->state();
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t k = 0; k < sa.size(); ++k) {
      ASSERT_EQ(sa[k].name, sb[k].name);
      std::copy(sa[k].data, sa[k].data + sa[k].numel(), sb[k].data);
    }
    opt_b->set_step_count(opt_a->step_count());
    for (int t = 3; t < 5; ++t) {
      fill_grads(a, ref, t, 1.0);
      fill_grads(b, ref, t, 1.0);
      opt_a->step();
      opt_b->step();
    }
    for (int64_t i = 0; i < a.total_numel(); ++i) ASSERT_EQ(a.values()[i], b.values()[i]) << to_string(kind);
  }
}

// The result does not depend on the number of OpenMP threads (fixed chunk order).
TEST(Optimizer, BitIdenticalAcrossThreadCounts) {
  for (OptimKind kind : {OptimKind::kAdafactor, OptimKind::kAdamW}) {
    std::vector<float> results[2];
    double norms[2];
    for (int run = 0; run < 2; ++run) {
      const int saved = omp_get_max_threads();
      omp_set_num_threads(run == 0 ? 1 : 3);
      ParamStore<float> store;
      declare_all(store);
      auto ref = reference_copy(store);
      auto opt = make_optimizer(schedule_config(kind), store);
      for (int t = 0; t < 3; ++t) {
        fill_grads(store, ref, t, 1.0);
        norms[run] = opt->step().grad_norm;
      }
      results[run].assign(store.values(), store.values() + store.total_numel());
      omp_set_num_threads(saved);
    }
    EXPECT_EQ(norms[0], norms[1]);
    EXPECT_EQ(results[0], results[1]) << to_string(kind);
  }
}

// The reduction seam is called with the documented kinds and block layout; an identity
// reducer changes nothing.
class CountingReducer : public StatReducer {
 public:
  void reduce(StatKind kind, std::span<double> sums, std::span<const StatBlock> blocks) override {
    ++calls[static_cast<int>(kind)];
    int64_t covered = 0;
    for (const auto& b : blocks) covered += b.count;
    EXPECT_EQ(covered, static_cast<int64_t>(sums.size()));
  }
  int calls[6] = {};
};

TEST(Optimizer, ReducerSeamIsCalledOncePerKindPerStep) {
  ParamStore<double> a, b;
  declare_all(a);
  declare_all(b);
  auto ref = reference_copy(a);
  Adafactor<double> opt_a(schedule_config(OptimKind::kAdafactor), a);
  Adafactor<double> opt_b(schedule_config(OptimKind::kAdafactor), b);
  CountingReducer reducer;
  opt_b.set_reducer(&reducer);
  for (int t = 0; t < 2; ++t) {
    fill_grads(a, ref, t, 1.0);
    fill_grads(b, ref, t, 1.0);
    opt_a.step();
    opt_b.step();
  }
  for (int k = 0; k < 6; ++k) EXPECT_EQ(reducer.calls[k], 2) << "kind " << k;
  for (int64_t i = 0; i < a.total_numel(); ++i) ASSERT_EQ(a.values()[i], b.values()[i]);
}

}  // namespace
}  // namespace brt::core

namespace brt::core {
namespace {

// ZeRO-1: two "ranks" each own half of the parameters. Every owned parameter ends bit-identical
// to the unsharded optimizer's (the clip still sees the whole gradient), the others stay
// untouched, and state() names every tensor with data only for the owned ones.
TEST(Optimizer, OwnedMaskUpdatesOnlyOwnedParametersBitIdentically) {
  for (OptimKind kind : {OptimKind::kAdafactor, OptimKind::kAdamW}) {
    OptimConfig config = schedule_config(kind);
    config.clip_norm = 0.5;  // active: the scale depends on every parameter's gradient
    ParamStore<float> full, rank0, rank1;
    declare_all(full);
    declare_all(rank0);
    declare_all(rank1);
    const std::vector<bool> mask0 = {true, false, true, false, true, false};
    std::vector<bool> mask1(mask0.size());
    for (size_t p = 0; p < mask0.size(); ++p) mask1[p] = !mask0[p];
    const std::vector<float> initial(rank1.values(), rank1.values() + rank1.total_numel());
    auto opt_full = make_optimizer(config, full);
    auto opt0 = make_optimizer(config, rank0, mask0);
    auto opt1 = make_optimizer(config, rank1, mask1);
    auto ref = reference_copy(full);
    for (int t = 0; t < 4; ++t) {
      for (ParamStore<float>* s : {&full, &rank0, &rank1}) fill_grads(*s, ref, t, 1.0);
      const StepStats a = opt_full->step();
      EXPECT_LT(a.clip_scale, 1.0);
      EXPECT_EQ(opt0->step().clip_scale, a.clip_scale);
      EXPECT_EQ(opt1->step().clip_scale, a.clip_scale);
    }
    for (int p = 0; p < full.size(); ++p) {
      const ParamStore<float>& owner = mask0[p] ? rank0 : rank1;
      const ParamStore<float>& other = mask0[p] ? rank1 : rank0;
      for (int64_t i = 0; i < full[p].numel(); ++i) {
        ASSERT_EQ(owner[p].value[i], full[p].value[i]) << to_string(kind) << " param " << p;
        ASSERT_EQ(other[p].value[i], initial[other[p].offset + i]) << "not owned, must not move";
      }
    }
    const auto s_full = opt_full->state(), s0 = opt0->state();
    ASSERT_EQ(s0.size(), s_full.size());
    for (size_t k = 0; k < s0.size(); ++k) {
      EXPECT_EQ(s0[k].name, s_full[k].name);
      EXPECT_EQ(s0[k].shape, s_full[k].shape);
      EXPECT_EQ(s0[k].data != nullptr, bool(mask0[s0[k].param])) << s0[k].name;
    }
    EXPECT_EQ(opt0->state_elems_allocated() + opt1->state_elems_allocated(), opt_full->state_elems_allocated());
  }
}

}  // namespace
}  // namespace brt::core
