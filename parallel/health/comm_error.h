// How collectives fail loudly: errors become CommError exceptions that say which op, group and
// rank; stalls past the timeout end the whole job with a message naming the collective
// (op, bytes, group, sequence number) and the peers it was still waiting for.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace brt::parallel {

// An MPI or NCCL call failed; the message names the collective, group and rank.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Exit status of a job ended by a collective timeout (the value `timeout(1)` uses).
inline constexpr int kCollectiveTimeoutExitCode = 124;

// Where a process sits in the job, for messages.
struct RankLocation {
  int world_rank = -1;
  std::string host;
};

// One collective, as named in messages: "all_reduce(sum) #17 float32 4096 bytes on tp[1]".
struct CollectiveInfo {
  std::string op;          // e.g. "all_reduce(sum)"
  std::string type;        // e.g. "float32"
  int64_t bytes = 0;       // payload per rank (the caller's buffer)
  std::string group;       // e.g. "tp[1]"
  int group_size = 0;
  uint64_t sequence = 0;   // per-group collective number, from 0
};

std::string describe(const CollectiveInfo& info);

// The timeout report: who waited, in which collective, for how long, and which peers had
// not delivered (or accepted) their data.
std::string describe_timeout(const CollectiveInfo& info, const RankLocation& self,
                             double waited_seconds, double timeout_seconds,
                             std::span<const RankLocation> missing_peers);

// Prints `message` to stderr (one write, so ranks do not interleave mid-line) and ends the
// whole job: MPI_Abort on MPI_COMM_WORLD when MPI is initialised, else _exit. Never returns.
// What MPI_Abort cannot end within kAbortGraceSeconds (a host unreachable) ends by itself
// (parallel/health/abort_fallback.h).
// Before MPI_Abort, one line starting with kJobAbortMarker names the rank, its host and the
// status: "brt-dist: job abort: world rank 0 (host h1), exit status 124" — what `brt-dist launch`
// (launch/supervise/supervisor.h) reads to end a launcher that cannot end the job itself.
inline constexpr const char* kJobAbortMarker = "brt-dist: job abort: ";
[[noreturn]] void abort_job(const std::string& message, int exit_code);

}  // namespace brt::parallel
