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
    std::snprintf(text, sizeof text, "world rank %d (host %s) has sent no heartbeat for %.1f s (--heartbeat-timeout-s %g)",
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

namespace {

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// srun --export=LIST: NONE becomes the variable alone (srun adds SLURM_*), a list without ALL
// gets it appended; ALL (the default) carries it already.
void forward_srun_export(std::vector<std::string>& out, const std::string& name) {
  for (size_t i = 1; i < out.size(); ++i) {
    std::string* list = nullptr;
    if (out[i].rfind("--export=", 0) == 0) {
      list = &out[i];
    } else if (out[i] == "--export" && i + 1 < out.size()) {
      list = &out[++i];
    } else {
      continue;
    }
    const size_t eq = list->rfind("--export=", 0) == 0 ? 9 : 0;
    const std::string value = list->substr(eq);
    if (value.rfind("ALL", 0) == 0) return;
    *list = list->substr(0, eq) + (value == "NONE" ? name : value + "," + name);
    return;
  }
}

}  // namespace

std::vector<std::string> with_heartbeat_forwarded(const std::vector<std::string>& command, std::string& note,
                                                  const std::string& name) {
  std::vector<std::string> out = command;
  if (out.empty()) return out;
  const std::string launcher = base_name(out[0]);
  if (launcher == "mpirun" || launcher == "mpiexec" || launcher == "orterun") {
    const bool env_list = std::getenv("OMPI_MCA_mca_base_env_list") != nullptr ||
                          std::any_of(out.begin(), out.end(), [](const std::string& a) {
                            return a.find("mca_base_env_list") != std::string::npos;
                          });
    if (env_list) {
      note = "the command sets mca_base_env_list, which refuses -x beside it: add " + name +
             " to it, or ranks on other hosts do not see it";
      return out;
    }
    out.insert(out.begin() + 1, {"-x", name});
  } else if (launcher == "srun") {
    forward_srun_export(out, name);
  }
  return out;
}

}  // namespace brt::launch
