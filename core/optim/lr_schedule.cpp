#include "core/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace brt::core {

double learning_rate(const OptimConfig& c, int64_t t) {
  const double done = static_cast<double>(t + 1);  // steps completed after this one
  const double warm = static_cast<double>(c.warmup);
  const double warmup_factor = c.warmup > 0 ? std::min(1.0, done / warm) : 1.0;
  switch (c.schedule) {
    case ScheduleKind::kConstant:
      return c.lr * warmup_factor;
    case ScheduleKind::kRsqrt:
      return c.lr * warmup_factor * std::sqrt(warm / std::max(done, warm));
    case ScheduleKind::kCosine:
    case ScheduleKind::kLinear: {
      if (done <= warm) return c.lr * warmup_factor;
      const double span = static_cast<double>(c.total_steps - c.warmup);
      const double p = span > 0 ? std::clamp((done - warm) / span, 0.0, 1.0) : 1.0;
      const double shape = c.schedule == ScheduleKind::kCosine ? 0.5 * (1.0 + std::cos(M_PI * p)) : 1.0 - p;
      return c.min_lr + (c.lr - c.min_lr) * shape;
    }
    case ScheduleKind::kWsd: {
      if (done <= warm) return c.lr * warmup_factor;
      const double total = static_cast<double>(c.total_steps);
      // The cooldown's length: the last decay_fraction of the run, never reaching into the warmup.
      const double decay = std::min(std::round(c.decay_fraction * total), std::max(0.0, total - warm));
      const double decay_start = total - decay;
      if (done <= decay_start) return c.lr;
      const double q = decay > 0 ? std::clamp((done - decay_start) / decay, 0.0, 1.0) : 1.0;
      return c.min_lr + (c.lr - c.min_lr) * (1.0 - q);
    }
  }
  return c.lr;
}

}  // namespace brt::core
