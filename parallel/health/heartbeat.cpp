#include "parallel/health/heartbeat.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace brt::parallel {

std::string format_heartbeat(const HeartbeatReport& r) {
  std::string line = std::string(kHeartbeatMarker) + "world rank " + std::to_string(r.world_rank) + " (host " +
                     r.host + ")";
  if (r.done) return line + " done";
  line += " step " + std::to_string(r.step) + ": ";
  line += r.activity.size() > 300 ? r.activity.substr(0, 300) : r.activity;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  return line;
}

std::optional<HeartbeatReport> parse_heartbeat(std::string_view line) {
  const std::string_view marker = kHeartbeatMarker;
  const size_t at = line.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string text(line.substr(at + marker.size()));
  HeartbeatReport r;
  char host[256] = {};
  int used = 0;
  if (std::sscanf(text.c_str(), "world rank %d (host %255[^)])%n", &r.world_rank, host, &used) != 2 || used == 0)
    return std::nullopt;
  r.host = host;
  const std::string rest = text.substr(size_t(used));
  if (rest == " done") {
    r.done = true;
    return r;
  }
  long long step = 0;
  int skip = 0;
  if (std::sscanf(rest.c_str(), " step %lld: %n", &step, &skip) != 1 || skip == 0) return std::nullopt;
  r.step = step;
  r.activity = rest.substr(size_t(skip));
  return r;
}

std::optional<double> heartbeat_interval_from(const char* value) {
  if (value == nullptr || *value == '\0') return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(value, &end);
  if (end == value || *end != '\0' || !std::isfinite(v) || v < 0.05 || v > 600)
    throw std::invalid_argument(std::string(kHeartbeatEnv) + "='" + value +
                                "': the heartbeat interval must be a number of seconds in [0.05, 600]");
  return v;
}

HeartbeatEmitter::HeartbeatEmitter(RankLocation self, double interval_s, Probe probe, int fd)
    : self_(std::move(self)), interval_s_(interval_s), probe_(std::move(probe)), fd_(fd) {
  thread_ = std::thread([this] { run(); });
}

HeartbeatEmitter::~HeartbeatEmitter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  HeartbeatReport bye{self_.world_rank, self_.host, -1, "", true};
  write_line(bye);
}

void HeartbeatEmitter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    HeartbeatReport r{self_.world_rank, self_.host, -1, "", false};
    lock.unlock();
    probe_(r.step, r.activity);
    write_line(r);
    lock.lock();
    wake_.wait_for(lock, std::chrono::duration<double>(interval_s_), [this] { return stopping_; });
  }
}

// One write(2) of the whole line: lines of a process's threads (and of the ranks mpirun merges)
// do not interleave mid-line below PIPE_BUF.
void HeartbeatEmitter::write_line(const HeartbeatReport& report) const {
  const std::string line = format_heartbeat(report) + "\n";
  for (ssize_t n = -1; n < 0;) {
    n = ::write(fd_, line.data(), line.size());
    if (n < 0 && errno != EINTR) return;  // stderr closed: nothing to tell
  }
}

}  // namespace brt::parallel
