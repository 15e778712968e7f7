// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. Every random number is a pure function of (key, counter), which is
// what makes initialisation and dropout independent of the parallel layout (model.md §10b, §11).
#pragma once

#include <array>
#include <cstdint>

namespace brt::core {

inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kW0;
    key[1] += kW1;
  }
  return ctr;
}

// 64-bit FNV-1a, to turn a parameter name into part of the generator's key.
inline uint64_t fnv1a64(const char* s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(s[i]);
    h *= 1099511628211ull;
  }
  return h;
}

// Uniform double in (0, 1) from two 32-bit words (53 bits of precision, never exactly 0).
inline double uniform_open01(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);
  return (static_cast<double>(bits & ((1ull << 53) - 1)) + 0.5) / 9007199254740992.0;
}

// A stream of values keyed by (seed, stream id): draw(counter) -> four 32-bit words.
class CounterRng {
 public:
  CounterRng(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}
  std::array<uint32_t, 4> draw(uint64_t counter_hi, uint64_t counter_lo) const {
    const std::array<uint32_t, 4> ctr = {static_cast<uint32_t>(counter_lo),
                                         static_cast<uint32_t>(counter_lo >> 32),
                                         static_cast<uint32_t>(counter_hi),
                                         static_cast<uint32_t>(counter_hi >> 32) ^
                                             static_cast<uint32_t>(stream_)};
    const std::array<uint32_t, 2> key = {static_cast<uint32_t>(seed_ ^ (stream_ >> 32)),
                                         static_cast<uint32_t>(seed_ >> 32) ^
                                             static_cast<uint32_t>(stream_ * 0x9E3779B97F4A7C15ull >> 32)};
    return philox4x32(ctr, key);
  }
  // Standard normal for (counter_hi, counter_lo) by Box-Muller.
  double normal(uint64_t counter_hi, uint64_t counter_lo) const;
  double uniform(uint64_t counter_hi, uint64_t counter_lo) const {
    const auto w = draw(counter_hi, counter_lo);
    return uniform_open01(w[0], w[1]);
  }

 private:
  uint64_t seed_;
  uint64_t stream_;
};

}  // namespace brt::core
