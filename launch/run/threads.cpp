#include "launch/run/threads.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>

namespace brt::launch {

ThreadChoice choose_threads(int configured, const parallel::CpuShare& share) {
  ThreadChoice c;
  if (configured > 0) {
    c.threads = configured;
    c.why = "train.threads";
    return c;
  }
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr && std::atoi(env) > 0) {
    c.threads = std::atoi(env);
    c.why = "OMP_NUM_THREADS";
    return c;
  }
  c.threads = std::max(1, share.cores_in_mask / std::max(1, share.ranks_sharing));
  c.why = std::to_string(share.cores_in_mask) + " core" + (share.cores_in_mask == 1 ? "" : "s") +
          " in this rank's affinity mask, shared by " + std::to_string(share.ranks_sharing) + " of the node's " +
          std::to_string(share.local_size) + " rank" + (share.local_size == 1 ? "" : "s") +
          "; train.threads overrides";
  return c;
}

std::string apply_threads(const ThreadChoice& choice) {
  omp_set_num_threads(choice.threads);
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  return "threads: " + std::to_string(choice.threads) + " per rank (" + choice.why + "); idle threads wait " +
         (policy == nullptr ? std::string("as the OpenMP runtime decides") : std::string(policy)) +
         " (OMP_WAIT_POLICY)";
}

}  // namespace brt::launch
