// What the optimizer does (model.md §10c): which update rule, the learning-rate schedule and
// gradient clipping. Filled from the [optim] section of a config by launch/; resolve() fills
// the kind-dependent defaults and checks ranges before anything is allocated.
#pragma once

#include <cstdint>
#include <string>

namespace brt::core {

enum class OptimKind { kAdafactor, kAdamW };
enum class ScheduleKind { kRsqrt, kCosine, kConstant, kLinear, kWsd };

struct OptimConfig {
  OptimKind kind = OptimKind::kAdafactor;

  // Learning-rate schedule (model.md §10c): linear warmup over `warmup` steps to `lr`, then
  // rsqrt, cosine or linear down to `min_lr` at `total_steps`, constant, or warmup-stable-decay
  // (wsd: `lr` until the last `decay_fraction` of total_steps, then linear to `min_lr`).
  double lr = 0.01;
  int64_t warmup = 1000;
  ScheduleKind schedule = ScheduleKind::kCosine;
  double min_lr = 0.001;
  // Step at which cosine reaches min_lr. 0 means "the run's train.steps" (RunConfig fills it).
  int64_t total_steps = 0;
  // wsd: the fraction of total_steps spent decaying (the final cooldown), in (0, 1].
  double decay_fraction = 0.2;

  // Global L2-norm gradient clipping; 0 turns it off. Negative means "the default for
  // `kind`": 1.0 for AdamW, off for Adafactor (model.md §10c). resolve() replaces it.
  double clip_norm = -1.0;

  // AdamW (model.md §10c). beta1 is also Adafactor's momentum on the update (0.9 for both).
  double beta1 = 0.9;
  double beta2 = 0.98;
  double eps = 1e-8;
  double weight_decay = 0.0;  // decoupled, matrices only (ParamSpec::is_matrix)

  // Adafactor constants (the reference code's; model.md §10c). Exposed for completeness, not
  // meant to be tuned.
  double decay_exponent = 0.8;       // rho = (t + 1)^-decay_exponent
  double adafactor_eps = 1e-30;      // G = g^2 + adafactor_eps
  double update_clip = 1.0;          // y <- y / max(1, RMS(y) / update_clip)
  double min_param_scale = 1e-3;     // u = lr * max(RMS(param), min_param_scale) * y
  int64_t min_dim_to_factor = 128;   // both of the two largest dims >= this -> factored

  double effective_clip_norm() const;
  // Fills clip_norm's default and checks every field. Throws std::invalid_argument naming the
  // key ("optim.warmup: ...").
  void resolve();
  bool operator==(const OptimConfig&) const = default;
};

const char* to_string(OptimKind kind);
const char* to_string(ScheduleKind kind);
// Parse "adafactor" | "adamw" and "rsqrt" | "cosine" | "constant" | "linear" | "wsd"; throw std::invalid_argument
// naming `key` for anything else.
OptimKind parse_optim_kind(const std::string& text, const std::string& key = "optim.kind");
ScheduleKind parse_schedule_kind(const std::string& text, const std::string& key = "optim.schedule");

}  // namespace brt::core
