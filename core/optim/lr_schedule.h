// The learning rate at a step (model.md §10c). t counts completed steps: the first update uses
// learning_rate(config, 0).
#pragma once

#include <cstdint>

#include "core/optim/optim_config.h"

namespace brt::core {

// Linear warmup lr*min(1, (t+1)/warmup) (warmup 0 means none), then
//   rsqrt:    lr*sqrt(warmup / max(t+1, warmup))
//   cosine:   min_lr + (lr - min_lr)*(1 + cos(pi*p))/2, p = clamp((t+1-warmup)/(total-warmup), 0, 1)
//             (so the peak lr at t+1 == warmup and min_lr at t+1 == total_steps and after)
//   linear:   min_lr + (lr - min_lr)*(1 - p), p as for cosine
//   wsd:      lr until t+1 = total - d, d = round(decay_fraction*total) (never into the warmup),
//             then min_lr + (lr - min_lr)*(1 - q), q = clamp((t+1 - (total - d))/d, 0, 1)
//   constant: lr
double learning_rate(const OptimConfig& config, int64_t t);

}  // namespace brt::core
