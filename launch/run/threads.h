// Threads that fit the machine: by default each rank runs as many OpenMP
// (and OpenBLAS) threads as the cores in its affinity mask divided by the ranks of its node
// that share those cores, at least one; train.threads (or OMP_NUM_THREADS) overrides. Idle threads wait passively
// (runtime/blas_env.h), so anything else running on the cores slows a run down gracefully.
#pragma once

#include <string>

#include "parallel/cpu_share.h"

namespace brt::launch {

struct ThreadChoice {
  int threads = 1;
  std::string why;  // for the start-up line
};

// `configured` > 0 (train.threads): that many; else OMP_NUM_THREADS when set; else the share.
ThreadChoice choose_threads(int configured, const parallel::CpuShare& share);
// Sets the OpenMP thread count and returns the start-up line: "threads: 1 per rank (...)".
std::string apply_threads(const ThreadChoice& choice);

}  // namespace brt::launch
