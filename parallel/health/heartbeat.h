// A rank's heartbeat to `brt-dist launch` (launch/supervise/supervisor.h): under the supervisor
// (which sets kHeartbeatEnv to the interval in seconds and forwards it to every rank) each
// process writes one line on stderr every interval, from a thread of its own, so it beats also
// while its main thread sits in a long collective or a checkpoint save:
//     brt-dist heartbeat: world rank 3 (host h2) step 12: checkpoint save: writing /model/embed
// and, as it ends normally, "brt-dist heartbeat: world rank 3 (host h2) done". The launcher
// carries stderr to the supervisor (mpirun's and srun's I/O forwarding), which takes these lines
// out of the log and ends the job when a rank that has beaten falls silent: a stopped process,
// a dead host or a cut link stops its beats, where train.timeout_s (the inner bound) would wait
// its whole length. Not set: no thread, nothing written.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "parallel/health/comm_error.h"

namespace brt::parallel {

inline constexpr const char* kHeartbeatMarker = "brt-dist heartbeat: ";
inline constexpr const char* kHeartbeatEnv = "BRT_HEARTBEAT_S";

struct HeartbeatReport {
  int world_rank = -1;
  std::string host;
  int64_t step = -1;     // the training step begun last (-1: none yet)
  std::string activity;  // what the rank does (JobMonitor::activity)
  bool done = false;     // the process is ending normally: stop watching it
};

// The line (without its newline); the activity is cut to 300 characters.
std::string format_heartbeat(const HeartbeatReport& report);
// A heartbeat line's report, the marker found anywhere in the line (mpirun --tag-output puts
// "[1,3]<stderr>:" before it); nullopt for any other line.
std::optional<HeartbeatReport> parse_heartbeat(std::string_view line);
// The interval kHeartbeatEnv asks for: nullopt when it is unset or empty; throws
// std::invalid_argument naming the variable for a value that is not a number in [0.05, 600].
std::optional<double> heartbeat_interval_from(const char* value);

class HeartbeatEmitter {
 public:
  // Writes `self`'s heartbeat to `fd` now and every `interval_s`, the step and activity read
  // from `probe` each time (from this emitter's thread).
  using Probe = std::function<void(int64_t& step, std::string& activity)>;
  HeartbeatEmitter(RankLocation self, double interval_s, Probe probe, int fd = 2);
  // Stops the thread and writes the "done" line.
  ~HeartbeatEmitter();
  HeartbeatEmitter(const HeartbeatEmitter&) = delete;
  HeartbeatEmitter& operator=(const HeartbeatEmitter&) = delete;

 private:
  void run();
  void write_line(const HeartbeatReport& report) const;

  RankLocation self_;
  double interval_s_;
  Probe probe_;
  int fd_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace brt::parallel
