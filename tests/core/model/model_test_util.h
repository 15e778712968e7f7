// Helpers shared by the model tests: small configurations, random and passkey batches, and a
// central finite-difference gradient check in float64 (model.md §1–§8).
#pragma once

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/model.h"
#include "core/optim/optim_config.h"
#include "tests/common/micro_model.h"
#include "tests/common/variant_name.h"

namespace brt::testing {

inline core::ModelConfig tiny_config(const std::string& variant) {
  core::ModelConfig c = micro_model(variant, {.layers = 2, .d_model = 8, .heads = 2, .head_dim = 4, .d_ff = 12,
                                              .vocab = 11, .seq_len = 8, .window = 4, .state_size = 3,
                                              .recurrent_layers = {1}});
  if (variant == "xl") c.window = c.seq_len;
  // Feedback (model.md §5.4): a layer below and one above the recurrent layer read its state.
  if (variant.rfind("feedback:", 0) == 0) c.layers = 3;
  return c;
}

struct RandomBatch {
  std::vector<int32_t> inputs, targets;
  std::vector<uint8_t> mask, doc_start;
  core::ModelInput view() const {
    return {inputs.data(), targets.data(), mask.data(), doc_start.data()};
  }
};

inline RandomBatch random_batch(int streams, int seq, int vocab, std::mt19937_64& rng,
                                std::vector<uint8_t> doc_start) {
  RandomBatch b;
  const int n = streams * seq;
  std::uniform_int_distribution<int> tok(0, vocab - 1);
  for (int i = 0; i < n; ++i) {
    b.inputs.push_back(tok(rng));
    b.targets.push_back(tok(rng));
    b.mask.push_back(i % 7 == 5 ? 0 : 1);  // a few padded targets
  }
  b.doc_start = std::move(doc_start);
  return b;
}

// A passkey batch: one document per stream, one segment each, [key_mark, key, filler ...,
// query_mark, filler ...]. Every target is the next input except query_mark's, which is the key
// and the only target scored.
struct PasskeyBatch {
  std::vector<int32_t> inputs, targets;
  std::vector<uint8_t> mask, doc_start;
  std::vector<size_t> answer_row;  // stream s's scored row, s·seq + query position
  std::vector<int32_t> answer;     // stream s's key
};

// `draw(in)` draws one stream's key and query position, fills its `seq` inputs `in` with filler
// and returns {key, query position}: the caller's random draws, in the caller's order.
template <typename Draw>
PasskeyBatch make_passkey_batch(int streams, int seq, int key_mark, int query_mark, Draw&& draw) {
  PasskeyBatch b;
  b.inputs.assign(size_t(streams) * seq, 0);
  b.targets.assign(size_t(streams) * seq, 0);
  b.mask.assign(size_t(streams) * seq, 0);
  b.doc_start.assign(streams, 1);
  for (int s = 0; s < streams; ++s) {
    int32_t* in = b.inputs.data() + size_t(s) * seq;
    const auto [key, query] = draw(in);
    in[0] = key_mark;
    in[1] = key;
    in[query] = query_mark;
    for (int i = 0; i + 1 < seq; ++i) b.targets[size_t(s) * seq + i] = in[i + 1];
    const size_t row = size_t(s) * seq + size_t(query);
    b.targets[row] = key;
    b.mask[row] = 1;  // only the answer is scored
    b.answer_row.push_back(row);
    b.answer.push_back(key);
  }
  return b;
}

// AdamW at `lr` after a linear warmup of `warmup` steps, then constant.
inline core::OptimConfig constant_adamw(double lr, int64_t warmup) {
  core::OptimConfig oc;
  oc.kind = core::OptimKind::kAdamW;
  oc.lr = lr;
  oc.warmup = warmup;
  oc.schedule = core::ScheduleKind::kConstant;
  return oc;
}

struct GradError {
  double max_rel = 0.0;  // worst |g - fd| / max(|g|, |fd|, floor)
  std::string where;
  double norm_rel = 0.0;  // ||g - fd|| / ||fd|| over the whole check
};

// Compares analytic gradients `analytic[i]` of f with respect to the doubles `x[i]` against
// central differences. Per element, the error is relative to max(|g|, |fd|, floor·max|g|):
// finite differences carry an absolute rounding error of about 1e-15·|f|/eps, which would
// dominate the relative error of gradients many orders below the largest one.
inline GradError check_gradient(const std::function<double()>& f, std::vector<double*> x,
                                const std::vector<double>& analytic,
                                const std::vector<std::string>& names, double eps = 1e-5,
                                double floor_fraction = 1e-3) {
  GradError e;
  double gmax = 0;
  for (double g : analytic) gmax = std::max(gmax, std::fabs(g));
  const double floor = std::max(floor_fraction * gmax, 1e-12);
  double diff2 = 0, ref2 = 0;
  auto central = [&](double* v, double h) {
    const double saved = *v;
    *v = saved + h;
    const double fp = f();
    *v = saved - h;
    const double fm = f();
    *v = saved;
    return (fp - fm) / (2 * h);
  };
  for (size_t i = 0; i < x.size(); ++i) {
    double fd = central(x[i], eps);
    auto rel_of = [&](double d) {
      return std::fabs(d - analytic[i]) / std::max({std::fabs(d), std::fabs(analytic[i]), floor});
    };
    // A ReLU input within eps of zero (a kink) spoils the central difference of every
    // parameter feeding it. Such an element is re-measured with smaller steps, which move
    // the kink out of reach; a wrong analytic gradient fails at every step size.
    for (double shrink : {10.0, 100.0})
      if (rel_of(fd) > 1e-6) {
        const double retry = central(x[i], eps / shrink);
        if (rel_of(retry) < rel_of(fd)) fd = retry;
      }
    const double d = std::fabs(fd - analytic[i]);
    diff2 += d * d;
    ref2 += fd * fd;
    const double rel = rel_of(fd);
    if (rel > e.max_rel) {
      e.max_rel = rel;
      e.where = names[i] + " analytic=" + std::to_string(analytic[i]) + " fd=" + std::to_string(fd);
    }
  }
  e.norm_rel = std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-300);
  return e;
}

// The variables of a finite-difference check: where each lives, its analytic gradient and its
// name in the report, in check order.
struct GradCheckVars {
  std::vector<double*> vars;
  std::vector<double> analytic;
  std::vector<std::string> names;

  // Every element of a layer input x ("x[i]"), with its analytic gradient dx.
  void add_input(std::vector<double>& x, const std::vector<double>& dx) {
    for (size_t i = 0; i < x.size(); ++i) {
      vars.push_back(&x[i]);
      analytic.push_back(dx[i]);
      names.push_back("x[" + std::to_string(i) + "]");
    }
  }
  // Elements 0, step, 2·step, ... of parameter `p` ("<name>[i]").
  void add_param(const core::Param<double>& p, int64_t step = 1) {
    for (int64_t i = 0; i < p.numel(); i += step) {
      vars.push_back(p.value + i);
      analytic.push_back(p.grad[i]);
      names.push_back(p.spec.name + "[" + std::to_string(i) + "]");
    }
  }
};

// check_gradient of f over `v`, reported on one line as "<what>: <n> elements, relative error
// <norm_rel>, worst element <max_rel> (<where>)".
inline GradError report_gradient_check(const std::function<double()>& f, const GradCheckVars& v,
                                       const std::string& what) {
  const GradError err = check_gradient(f, v.vars, v.analytic, v.names);
  std::printf("%s: %zu elements, relative error %.3g, worst element %.3g (%s)\n", what.c_str(), v.vars.size(),
              err.norm_rel, err.max_rel, err.where.c_str());
  return err;
}

}  // namespace brt::testing
