// The supervisor's side of the ranks' heartbeats (parallel/health/heartbeat.h): which ranks beat,
// when each was last heard (the supervisor's own clock: hosts' clocks may differ), what each
// last reported; and the launcher's command with the heartbeat's variable forwarded to every
// rank. A rank is watched from its first beat until its "done" line; one silent for the
// timeout ends the job (supervisor.cpp). A rank that never beats is never judged (a launcher
// that does not carry the variable or stderr loses the watch, not the job): train.timeout_s
// stays the inner bound. The variable reaches the ranks by with_variable_forwarded (host_list.h).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "parallel/health/heartbeat.h"

namespace brt::launch {

// The interval the ranks beat at for a silence timeout: six beats fit in it, 0.2 to 5 s.
double heartbeat_interval_for(double timeout_s);

class HeartbeatWatch {
 public:
  using Clock = std::chrono::steady_clock;
  explicit HeartbeatWatch(double timeout_s) : timeout_s_(timeout_s) {}

  void beat(const parallel::HeartbeatReport& report, Clock::time_point now);
  // The supervisor itself did not run from `since` to `now` (stopped, starved): no rank is
  // blamed for that gap, every rank's silence counts from `now`.
  void forgive(Clock::time_point now);
  // A rank silent past the timeout: `text` is one sentence naming its rank, host, silence and
  // last report; `last_heard` when its last beat came (about when it stopped).
  struct SilentRank {
    int world_rank = -1;
    std::string host, text;
    Clock::time_point last_heard{};
  };
  // The first rank silent for longer than the timeout at `now`; nullopt while every watched
  // rank beats.
  std::optional<SilentRank> silent(Clock::time_point now) const;
  size_t watched() const;
  size_t ever_heard() const { return ranks_.size(); }

 private:
  struct Rank {
    parallel::HeartbeatReport last;
    Clock::time_point heard{};
    bool done = false;
  };
  double timeout_s_;
  std::map<int, Rank> ranks_;
};

}  // namespace brt::launch
