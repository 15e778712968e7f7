#include "parallel/comm_benchmark.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace brt::parallel {

std::vector<int64_t> doubling_sizes(int64_t min_bytes, int64_t max_bytes) {
  if (min_bytes <= 0) throw std::invalid_argument("doubling_sizes: min_bytes must be positive");
  std::vector<int64_t> sizes;
  for (int64_t b = min_bytes; b <= max_bytes; b *= 2) sizes.push_back(b);
  return sizes;
}

std::vector<CommSample> measure_all_reduce(Communicator& group, std::span<const int64_t> sizes_bytes,
                                           const TimingOptions& options) {
  using Clock = std::chrono::steady_clock;
  int64_t largest = 0;
  for (int64_t b : sizes_bytes) {
    if (b <= 0 || b % 4 != 0) {
      throw std::invalid_argument("measure_all_reduce: sizes must be positive multiples of 4 bytes");
    }
    largest = std::max(largest, b);
  }
  std::vector<float> buf(static_cast<size_t>(largest / 4), 1.0f);
  std::vector<CommSample> samples;
  for (int64_t bytes : sizes_bytes) {
    std::span<float> data(buf.data(), static_cast<size_t>(bytes / 4));
    auto once = [&] {
      group.all_reduce(data);
      data[0] = 1.0f;  // keep values bounded over many repetitions
    };
    for (int w = 0; w < options.warmup; ++w) once();
    int reps = options.min_repetitions;
    for (;;) {
      group.barrier();
      const auto t0 = Clock::now();
      for (int r = 0; r < reps; ++r) once();
      // The slowest rank's time, agreed by everyone, so every rank takes the same branch.
      const double elapsed = group.all_reduce_value(
          std::chrono::duration<double>(Clock::now() - t0).count(), ReduceOp::kMax);
      if (elapsed >= options.min_seconds || reps >= options.max_repetitions) {
        samples.push_back({static_cast<double>(bytes), elapsed / reps});
        break;
      }
      const double scale = elapsed > 0 ? 1.2 * options.min_seconds / elapsed : 8.0;
      reps = std::min(options.max_repetitions,
                      std::max(reps * 2, static_cast<int>(reps * std::min(scale, 1e6))));
    }
  }
  return samples;
}

}  // namespace brt::parallel
