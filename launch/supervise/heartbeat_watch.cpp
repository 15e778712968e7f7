#include "launch/supervise/heartbeat_watch.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace brt::launch {

double heartbeat_interval_for(double timeout_s) { return std::clamp(timeout_s / 6.0, 0.2, 5.0); }

void HeartbeatWatch::beat(const parallel::HeartbeatReport& report, Clock::time_point now) {
  Rank& r = ranks_[report.world_rank];
  if (report.done) {
    r.done = true;
    r.last.host = report.host;
    return;
  }
  r.last = report;
  r.heard = now;
}

void HeartbeatWatch::forgive(Clock::time_point now) {
  for (auto& [rank, r] : ranks_) r.heard = now;
}

std::optional<HeartbeatWatch::SilentRank> HeartbeatWatch::silent(Clock::time_point now) const {
  for (const auto& [rank, r] : ranks_) {
    if (r.done) continue;
    const double quiet = std::chrono::duration<double>(now - r.heard).count();
    if (quiet <= timeout_s_) continue;
    char text[160];
    std::snprintf(text, sizeof text, "world rank %d (host %s) has sent no heartbeat for %.1f s (timeout %g s: launch.heartbeat_timeout_s, --heartbeat-timeout-s)",
                  rank, r.last.host.c_str(), quiet, timeout_s_);
    const std::string step = r.last.step < 0 ? "before its first step" : "in step " + std::to_string(r.last.step);
    return SilentRank{rank, r.last.host, std::string(text) + "; it last reported " + step + ": " + r.last.activity,
                      r.heard};
  }
  return std::nullopt;
}

size_t HeartbeatWatch::watched() const {
  return size_t(std::count_if(ranks_.begin(), ranks_.end(), [](const auto& kv) { return !kv.second.done; }));
}

}  // namespace brt::launch
