// A flight recorder: each rank keeps its last 64 operations — every
// collective (op, group, sequence number, bytes, start and end time) and every guarded local
// operation such as "checkpoint save: writing /model/embed" — so that after a timeout or a fatal
// error the ranks' records can be laid side by side and the first sequence number at which they
// diverge named. Written as JSONL to <checkpoint.dir or cwd>/flight/rank-K.jsonl (JobMonitor).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "parallel/health/comm_error.h"

namespace brt::parallel {

inline constexpr const char* kLocalGroup = "local";  // the group of a rank's own operations

struct FlightEntry {
  std::string op;          // "all_reduce(sum)", or a local operation's description
  std::string group;       // "world", "dp_cp[0]", "tp[1]", ... or kLocalGroup
  uint64_t sequence = 0;   // the group's collective number (local: this rank's count)
  int64_t bytes = 0;
  double start = 0;        // wall-clock seconds since the epoch (comparable across hosts)
  double end = -1;         // -1: still open
  uint64_t id = 0;         // recorder-internal
};

class FlightRecorder {
 public:
  static constexpr size_t kCapacity = 64;       // collectives kept
  static constexpr size_t kLocalCapacity = 16;  // local operations kept (a save has one per dataset)
  // Records an operation that starts now; returns the token end() takes.
  uint64_t begin(const std::string& op, const std::string& group, uint64_t sequence, int64_t bytes);
  void end(uint64_t token);
  // The kept entries (the last kCapacity collectives and kLocalCapacity local operations),
  // oldest first. Thread-safe (the watchdog reads while the main thread writes).
  std::vector<FlightEntry> entries() const;

 private:
  FlightEntry* slot(uint64_t token);  // token = id * 2 + (local ? 1 : 0)
  mutable std::mutex mutex_;
  std::array<FlightEntry, kCapacity> ring_{};
  std::array<FlightEntry, kLocalCapacity> local_{};
  uint64_t next_ = 1;
};

double wall_seconds();

// One rank's dump: a header line {"rank":R,"host":"H","world":N,"request":T} and one line per
// entry. `request` identifies the dump (the failing rank's request time).
std::string flight_jsonl(const std::vector<FlightEntry>& entries, const RankLocation& self, int world_size,
                         double request);

struct RankFlight {
  int rank = -1;
  std::string host;
  double request = 0;
  std::vector<FlightEntry> entries;
};
// Parses flight_jsonl's output; nullopt if it is not one.
std::optional<RankFlight> parse_flight_jsonl(const std::string& text);

// The comparison of the ranks' records (index = world rank; nullopt: that rank wrote none):
// which ranks wrote nothing, for every group the first sequence number at which the ranks'
// records differ (another op or size, unfinished on one rank, or not reached), and each rank's
// open local operation. `now` is the time the report is made.
std::string describe_divergence(const std::vector<std::optional<RankFlight>>& by_rank, double now);

}  // namespace brt::parallel
