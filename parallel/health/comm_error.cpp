#include "parallel/health/comm_error.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "parallel/health/abort_fallback.h"

namespace brt::parallel {

std::string describe(const CollectiveInfo& info) {
  std::ostringstream s;
  s << info.op << " #" << info.sequence << " (" << info.type << ", " << info.bytes
    << " bytes) on group '" << info.group << "' of " << info.group_size << " ranks";
  return s.str();
}

std::string describe_timeout(const CollectiveInfo& info, const RankLocation& self,
                             double waited_seconds, double timeout_seconds,
                             std::span<const RankLocation> missing_peers) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << "brt::parallel: collective timeout on world rank " << self.world_rank << " (host "
    << self.host << "): " << describe(info) << " still incomplete after " << waited_seconds
    << " s (timeout " << timeout_seconds << " s). ";
  if (missing_peers.empty()) {
    s << "All of this rank's transfers had completed; the op was not being progressed.";
  } else {
    s << "Still waiting for world rank" << (missing_peers.size() > 1 ? "s " : " ");
    for (size_t i = 0; i < missing_peers.size(); ++i) {
      s << (i ? ", " : "") << missing_peers[i].world_rank << " (host " << missing_peers[i].host
        << ")";
    }
    s << ": dead, stalled, or inside a different collective (check that every rank of group '"
      << info.group << "' issues the same collectives in the same order).";
  }
  s << " Ending the job.\n";
  return s.str();
}

void abort_job(const std::string& message, int exit_code) {
  // One write() call: async-signal-safe-ish and not interleaved with other ranks mid-line.
  const ssize_t written = ::write(2, message.data(), message.size());
  (void)written;
  int initialized = 0, finalized = 0, world = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &world);
  // One process has nobody to stop: exit quietly instead of Open MPI's MPI_ABORT banner.
  if (initialized && !finalized && world > 1) {
    // MPI_Abort cannot end a job with an unreachable host: a helper ends what is left of it
    // on this host after a grace period (parallel/health/abort_fallback.h).
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const std::string marker = std::string(kJobAbortMarker) + "world rank " + std::to_string(rank) + " (host " + host +
                               "), exit status " + std::to_string(exit_code) + "\n";
    const ssize_t marked = ::write(2, marker.data(), marker.size());
    (void)marked;
    arm_abort_fallback(plan_abort_fallback(rank, host, exit_code));
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  ::_exit(exit_code);
}

}  // namespace brt::parallel
