// Where a job's ranks run and how many threads each chose: with ranks on several
// hosts, world rank 0 prints one line naming every host, its ranks and their thread count, so
// the start of a multi-host run shows that each host fitted its threads to its own cores and
// ranks (launch/run/threads.h) — e.g.
//   placement: 4 ranks on 2 hosts: h1 ranks 0-1, 1 thread each (2 cores / 2 ranks); h2 ranks
//   2-3, 1 thread each (2 cores / 2 ranks)
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "launch/run/threads.h"
#include "parallel/cpu_share.h"

namespace brt::launch {

struct RankPlace {
  std::string host;
  int threads = 1;
  std::string why;  // "2 cores / 2 ranks", "OMP_NUM_THREADS", "train.threads"
};

// The line for `ranks` (in world-rank order); "" when they all run on one host.
std::string format_placement(const std::vector<RankPlace>& ranks);
// "0-1,4" for sorted ranks.
std::string rank_ranges(const std::vector<int>& ranks);

// Collective over `world`: every rank's host and thread choice, gathered; world rank 0 gets
// format_placement's line, the other ranks "".
std::string describe_placement(MPI_Comm world, const ThreadChoice& threads, const parallel::CpuShare& share);

}  // namespace brt::launch
