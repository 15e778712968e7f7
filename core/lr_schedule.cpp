#include "core/lr_schedule.h"

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
    case ScheduleKind::kCosine: {
      if (done <= warm) return c.lr * warmup_factor;
      const double span = static_cast<double>(c.total_steps - c.warmup);
      const double p = span > 0 ? std::clamp((done - warm) / span, 0.0, 1.0) : 1.0;
      return c.min_lr + (c.lr - c.min_lr) * 0.5 * (1.0 + std::cos(M_PI * p));
    }
  }
  return c.lr;
}

}  // namespace brt::core
