#include "core/optim/optim_config.h"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace brt::core {
namespace {

[[noreturn]] void fail(const std::string& key, const std::string& what) {
  throw std::invalid_argument(key + ": " + what);
}

std::string num(double v) {
  char buf[64];  // the shortest text that reads back as v
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void require_finite_positive(double v, const char* key) {
  if (!(std::isfinite(v) && v > 0)) fail(key, num(v) + " must be a finite number > 0");
}

}  // namespace

const char* to_string(OptimKind kind) {
  return kind == OptimKind::kAdafactor ? "adafactor" : "adamw";
}

const char* to_string(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kRsqrt: return "rsqrt";
    case ScheduleKind::kCosine: return "cosine";
    case ScheduleKind::kConstant: return "constant";
    case ScheduleKind::kLinear: return "linear";
    case ScheduleKind::kWsd: return "wsd";
  }
  return "?";
}

OptimKind parse_optim_kind(const std::string& text, const std::string& key) {
  if (text == "adafactor") return OptimKind::kAdafactor;
  if (text == "adamw") return OptimKind::kAdamW;
  fail(key, "\"" + text + "\" is not an optimizer (adafactor | adamw)");
}

ScheduleKind parse_schedule_kind(const std::string& text, const std::string& key) {
  if (text == "rsqrt") return ScheduleKind::kRsqrt;
  if (text == "cosine") return ScheduleKind::kCosine;
  if (text == "constant") return ScheduleKind::kConstant;
  if (text == "linear") return ScheduleKind::kLinear;
  if (text == "wsd") return ScheduleKind::kWsd;
  fail(key, "\"" + text + "\" is not a schedule (rsqrt | cosine | constant | linear | wsd)");
}

double OptimConfig::effective_clip_norm() const {
  if (clip_norm >= 0) return clip_norm;
  return kind == OptimKind::kAdamW ? 1.0 : 0.0;  // model.md §10c defaults
}

void OptimConfig::resolve() {
  clip_norm = effective_clip_norm();
  require_finite_positive(lr, "optim.lr");
  if (!(std::isfinite(min_lr) && min_lr >= 0)) fail("optim.min_lr", num(min_lr) + " must be >= 0");
  const bool decays = schedule == ScheduleKind::kCosine || schedule == ScheduleKind::kLinear ||
                     schedule == ScheduleKind::kWsd;  // to min_lr at total_steps
  if (decays && min_lr > lr) fail("optim.min_lr", num(min_lr) + " exceeds optim.lr " + num(lr));
  if (!(decay_fraction > 0 && decay_fraction <= 1))
    fail("optim.decay_fraction", num(decay_fraction) + " must be in (0, 1]");
  if (warmup < 0) fail("optim.warmup", std::to_string(warmup) + " must be >= 0");
  if (schedule == ScheduleKind::kRsqrt && warmup < 1)
    fail("optim.warmup", "the rsqrt schedule lr*sqrt(warmup/max(t+1, warmup)) needs warmup >= 1");
  if (total_steps < 0) fail("optim.total_steps", std::to_string(total_steps) + " must be >= 0");
  // (total_steps <= warmup is allowed: a short run then ends at min_lr right after warmup.)
  if (decays && total_steps == 0)
    fail("optim.total_steps", std::string("the ") + to_string(schedule) +
                                  " schedule needs the step at which it reaches optim.min_lr (> 0)");
  if (!std::isfinite(clip_norm)) fail("optim.clip_norm", "must be finite");
  if (!(beta1 >= 0 && beta1 < 1)) fail("optim.beta1", num(beta1) + " must be in [0, 1)");
  if (!(beta2 >= 0 && beta2 < 1)) fail("optim.beta2", num(beta2) + " must be in [0, 1)");
  require_finite_positive(eps, "optim.eps");
  if (!(std::isfinite(weight_decay) && weight_decay >= 0))
    fail("optim.weight_decay", num(weight_decay) + " must be >= 0");
  if (kind == OptimKind::kAdafactor && weight_decay != 0)
    fail("optim.weight_decay", "Adafactor has no weight decay (model.md §10c); use 0");
  require_finite_positive(decay_exponent, "optim.decay_exponent");
  require_finite_positive(adafactor_eps, "optim.adafactor_eps");
  require_finite_positive(update_clip, "optim.update_clip");
  require_finite_positive(min_param_scale, "optim.min_param_scale");
  if (min_dim_to_factor < 1)
    fail("optim.min_dim_to_factor", std::to_string(min_dim_to_factor) + " must be >= 1");
}

}  // namespace brt::core
