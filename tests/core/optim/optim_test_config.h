// The optimizer configuration the kernel-level optimizer tests share: a short warmup, and a
// clip norm their random gradients exceed, so clipping is exercised.
#pragma once

#include "core/optim/optim_config.h"

namespace brt::core::test {

inline OptimConfig clipped_config(OptimKind kind) {
  OptimConfig c;
  c.kind = kind;
  c.lr = 0.02;
  c.warmup = 2;
  c.total_steps = 10;
  c.clip_norm = 50.0;  // active for these gradients
  if (kind == OptimKind::kAdamW) c.weight_decay = 0.1;
  return c;
}

}  // namespace brt::core::test
