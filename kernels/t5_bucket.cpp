#include <algorithm>
#include <cmath>

#include "kernels/backend.h"

namespace brt::kernels {

// model.md §3.3: bucket(n) = n for n < 16, else min(31, 16 + floor(ln(n/16)/ln(8)*16)), in fp32.
int t5_bucket(int distance) {
  if (distance < 16) return distance;
  const float scaled = std::log(static_cast<float>(distance) / 16.0f) / std::log(8.0f) * 16.0f;
  return std::min(31, 16 + static_cast<int>(scaled));
}

}  // namespace brt::kernels
