#include "parallel/alpha_beta.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace brt::parallel {

AlphaBeta fit_alpha_beta(std::span<const CommSample> samples, FitWeighting weighting) {
  // Weighted normal equations for t = a + b x with weights w:
  //   b = (S·Sxy − Sx·Sy) / (S·Sxx − Sx²),  a = (Sy − b·Sx) / S.
  // x is scaled to MB first so the sums stay well conditioned over 4 B .. 64 MB.
  constexpr double kScale = 1.0 / (1 << 20);
  double s = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  double min_x = INFINITY, max_x = -INFINITY;
  for (const auto& p : samples) {
    if (!(p.seconds > 0) || !(p.bytes >= 0)) {
      throw std::invalid_argument("fit_alpha_beta: samples need bytes >= 0 and seconds > 0");
    }
    const double x = p.bytes * kScale, y = p.seconds;
    const double w = weighting == FitWeighting::kRelative ? 1.0 / (y * y) : 1.0;
    s += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
    min_x = std::min(min_x, x);
    max_x = std::max(max_x, x);
  }
  if (samples.size() < 2 || !(max_x > min_x)) {
    throw std::invalid_argument("fit_alpha_beta: need samples at two or more distinct sizes");
  }
  const double b = (s * sxy - sx * sy) / (s * sxx - sx * sx);
  const double a = (sy - b * sx) / s;
  return AlphaBeta{a, b * kScale};
}

double max_relative_error(const AlphaBeta& model, std::span<const CommSample> samples) {
  double worst = 0;
  for (const auto& p : samples) {
    worst = std::max(worst, std::fabs(p.seconds / model.predict(p.bytes) - 1.0));
  }
  return worst;
}

}  // namespace brt::parallel
