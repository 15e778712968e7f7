// Timing of collectives on any Communicator, for the α-β fit (parallel/alpha_beta.h), the
// comm benchmark (bench/comm/) and a preflight bandwidth check. Backend-independent: it
// synchronises and agrees on repetition counts through the group itself.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "parallel/alpha_beta.h"
#include "parallel/communicator.h"

namespace brt::parallel {

struct TimingOptions {
  double min_seconds = 0.05;  // per size: repeat until the batch takes at least this long
  int min_repetitions = 3;
  int max_repetitions = 1 << 16;
  int warmup = 2;
};

// Seconds per all-reduce (sum, float32) of each payload size (bytes, a multiple of 4), as the
// slowest rank of `group` saw it. Collective over `group`; every rank gets the same result.
std::vector<CommSample> measure_all_reduce(Communicator& group, std::span<const int64_t> sizes_bytes,
                                           const TimingOptions& options = {});

// Payload sizes min, 2·min, 4·min, ... up to max (inclusive when a power-of-two multiple).
std::vector<int64_t> doubling_sizes(int64_t min_bytes, int64_t max_bytes);

}  // namespace brt::parallel
