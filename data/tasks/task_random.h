// Counter-based random numbers for the task documents (data/tasks/tasks.h) and their mixture into
// the streams (data/tasks/task_mixture.h): every draw is a pure function of (seed, purpose, counter),
// with our own generator and bounded draws, so a document is the same on every rank, every
// run and every standard library (std distributions differ between libraries).
#pragma once

#include <cstdint>
#include <initializer_list>

namespace brt::data {

inline uint64_t splitmix64_next(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One 64-bit value from several: a key for "the k-th slot of stream g under seed s".
inline uint64_t mix_keys(std::initializer_list<uint64_t> keys) {
  uint64_t state = 0x6A09E667F3BCC909ull;
  uint64_t out = 0;
  for (const uint64_t key : keys) {
    state ^= key;
    out = splitmix64_next(state);
    state = out;
  }
  return out;
}

class TaskRandom {
 public:
  TaskRandom(uint64_t seed, uint64_t purpose) : state_(mix_keys({seed, purpose})) {}
  uint64_t next() { return splitmix64_next(state_); }
  // Uniform in [0, n) for n >= 1 (Lemire's multiply; the bias is below 2^-64 · n).
  int64_t below(int64_t n) {
    return static_cast<int64_t>((static_cast<unsigned __int128>(next()) * static_cast<uint64_t>(n)) >> 64);
  }
  // Uniform in [lo, hi] (inclusive).
  int64_t between(int64_t lo, int64_t hi) { return lo + below(hi - lo + 1); }
  // Uniform in [0, 1) with 53 bits.
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace brt::data
