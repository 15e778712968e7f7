// Vectorisable exponential for the float path. glibc's expf is not vectorised without
// -ffast-math, and the softmaxes (attention rows, the 32k-wide output rows) would otherwise
// spend more time in exp than in the gemms around them. The double path (reference and
// gradient checks) keeps std::exp.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace brt::kernels::cpu {

// Cephes-style expf: exp(x) = 2^n * exp(r), |r| <= ln2/2, degree-6 polynomial; relative
// error about 2e-7. Returns exactly 0 below -87.3 (where expf becomes subnormal) and
// saturates at exp(88) on the high side.
inline float exp_fast(float x) {
  const bool underflow = x < -87.3f;
  x = x > 88.0f ? 88.0f : x;
  x = x < -87.3f ? -87.3f : x;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float two_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return underflow ? 0.0f : p * two_n;
}

inline float exp_t(float x) { return exp_fast(x); }
inline double exp_t(double x) { return std::exp(x); }

template <typename T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

}  // namespace brt::kernels::cpu
