#include "parallel/health/job_monitor.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace brt::parallel {
namespace fs = std::filesystem;

namespace {

constexpr const char* kDumpRequest = "dump-request";
// How long a failing rank waits for the others' records: their watchdogs poll at most every
// 0.5 s, so healthy ranks answer well within it; a stopped or dead one never does.
constexpr double kGatherSeconds = 2.0;
// A watchdog that itself did not run for this long beyond its period was stopped (SIGSTOP,
// a frozen VM): the waits it watches restart instead of timing out at once on SIGCONT, which
// would blame a peer for this process's own pause.
constexpr double kSelfPauseSeconds = 2.0;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Written beside and renamed into place, so a reader never sees half a file.
void write_file_atomically(const fs::path& path, const std::string& text) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  // Best effort (the job is already failing), but never silent and never a stray .tmp: the
  // report would otherwise say this rank wrote nothing without saying why.
  std::ofstream out(tmp);
  out << text;
  out.close();
  if (out) fs::rename(tmp, path, ec);
  if (!out || ec) {
    const int error = errno;
    fs::remove(tmp, ec);
    std::fprintf(stderr, "warning: cannot write the flight record %s: %s\n", path.c_str(), std::strerror(error));
  }
}

// Why records cannot be written into `dir` (its creation's or a test file's error).
std::string flight_folder_problem(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return "cannot create it: " + ec.message();
  const fs::path probe = dir / (".probe." + std::to_string(::getpid()));
  std::ofstream out(probe);
  const int error = out ? 0 : errno;
  out.close();
  fs::remove(probe, ec);
  return error != 0 ? std::string(std::strerror(error)) : "this rank's own record could not be written or read there";
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

}  // namespace

JobMonitor::JobMonitor(RankLocation self, int world_size, MonitorSettings settings)
    : self_(std::move(self)), world_size_(world_size), settings_(std::move(settings)),
      created_(wall_seconds()) {
  watchdog_ = std::thread([this] { watch(); });
}

JobMonitor::~JobMonitor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

void JobMonitor::configure(const MonitorSettings& settings) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    settings_ = settings;
  }
  wake_.notify_all();
}

MonitorSettings JobMonitor::settings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return settings_;
}

JobMonitor::Guard JobMonitor::guard(const std::string& operation) {
  std::lock_guard<std::mutex> lock(mutex_);
  Open open;
  open.slot = next_slot_++;
  open.operation = operation;
  open.since = wall_seconds();
  open.flight = recorder_.begin(operation, kLocalGroup, local_sequence_++, 0);
  open_.push_back(open);
  return Guard(this, open.slot);
}

std::string JobMonitor::activity() const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!open_.empty()) {
      const Open& newest = open_.back();
      return newest.operation + (newest.phase.empty() ? "" : ": " + newest.phase);
    }
  }
  const std::vector<FlightEntry> entries = recorder_.entries();
  for (auto it = entries.rbegin(); it != entries.rend(); ++it)
    if (it->end < 0 && it->group != kLocalGroup)
      return it->op + " on " + it->group + " #" + std::to_string(it->sequence);
  return "computing";
}

void JobMonitor::set_phase(uint64_t slot, const std::string& what, bool watched) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Open& open : open_) {
    if (open.slot != slot) continue;
    recorder_.end(open.flight);
    open.phase = what;
    open.watched = watched;
    open.since = wall_seconds();
    open.flight = recorder_.begin(open.operation + ": " + what, kLocalGroup, local_sequence_++, 0);
  }
}

void JobMonitor::end_guard(uint64_t slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = open_.begin(); it != open_.end(); ++it) {
    if (it->slot != slot) continue;
    recorder_.end(it->flight);
    open_.erase(it);
    return;
  }
}

JobMonitor::Guard::Guard(Guard&& other) noexcept : monitor_(other.monitor_), slot_(other.slot_) {
  other.monitor_ = nullptr;
}

JobMonitor::Guard& JobMonitor::Guard::operator=(Guard&& other) noexcept {
  if (this != &other) {
    if (monitor_ != nullptr) monitor_->end_guard(slot_);
    monitor_ = other.monitor_;
    slot_ = other.slot_;
    other.monitor_ = nullptr;
  }
  return *this;
}

JobMonitor::Guard::~Guard() {
  if (monitor_ != nullptr) monitor_->end_guard(slot_);
}

void JobMonitor::Guard::phase(const std::string& what) {
  if (monitor_ != nullptr) monitor_->set_phase(slot_, what, true);
}

void JobMonitor::Guard::working(const std::string& what) {
  if (monitor_ != nullptr) monitor_->set_phase(slot_, what, false);
}

fs::path JobMonitor::own_record() const {
  return settings().flight_dir / ("rank-" + std::to_string(self_.world_rank) + ".jsonl");
}

void JobMonitor::write_own_record(double request) const {
  write_file_atomically(own_record(), flight_jsonl(recorder_.entries(), self_, world_size_, request));
}

void JobMonitor::answer_dump_request() {
  const fs::path request_file = settings().flight_dir / kDumpRequest;
  std::error_code ec;
  if (!fs::exists(request_file, ec)) return;
  const double request = std::atof(read_file(request_file).c_str());
  if (request < created_ || request == answered_request_) return;  // another job's, or answered
  answered_request_ = request;
  write_own_record(request);
}

void JobMonitor::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  double last_wake = wall_seconds();
  while (!stopping_) {
    const double period = std::clamp(settings_.timeout_s / 20.0, 0.05, 0.5);
    wake_.wait_for(lock, std::chrono::duration<double>(period));
    if (stopping_) break;
    const double now = wall_seconds();
    if (now - last_wake > period + kSelfPauseSeconds)
      for (Open& open : open_) open.since = now;
    last_wake = now;
    // Every open operation is watched, whichever thread opened it (a background checkpoint
    // writer has its own beside the training thread's).
    for (const Open& open : open_) {
      if (!open.watched) continue;
      const double waited = wall_seconds() - open.since;
      if (waited <= settings_.timeout_s) continue;
      const std::string what = open.operation + (open.phase.empty() ? "" : ": " + open.phase);
      const std::string report = "brt-dist: timeout on world rank " + std::to_string(self_.world_rank) + " (host " +
                                 self_.host + "): " + what + " has not finished after " + seconds_text(waited) +
                                 " s (" + settings_.timeout_key + " = " + seconds_text(settings_.timeout_s) +
                                 "); a peer is stalled or dead, or the file system hangs. Ending the job.";
      lock.unlock();
      fail(report, kCollectiveTimeoutExitCode);
    }
    lock.unlock();
    answer_dump_request();
    lock.lock();
  }
}

void JobMonitor::fail(const std::string& report, int exit_code) {
  if (failing_.exchange(true)) {
    for (;;) ::pause();  // the first caller ends the process
  }
  const MonitorSettings s = settings();
  const double request = wall_seconds();
  write_own_record(request);
  std::vector<std::optional<RankFlight>> records(static_cast<size_t>(world_size_));
  if (world_size_ > 1) {
    write_file_atomically(s.flight_dir / kDumpRequest, std::to_string(request) + "\n");
    // The other ranks' watchdogs answer within a poll period; a stopped or dead rank never does.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kGatherSeconds);
    while (true) {
      int have = 0;
      for (int r = 0; r < world_size_; ++r) {
        auto& slot = records[static_cast<size_t>(r)];
        if (slot) {
          ++have;
          continue;
        }
        auto flight = parse_flight_jsonl(read_file(s.flight_dir / ("rank-" + std::to_string(r) + ".jsonl")));
        if (flight && flight->request >= created_) {
          slot = std::move(flight);
          ++have;
        }
      }
      if (have == world_size_ || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } else {
    records[0] = parse_flight_jsonl(flight_jsonl(recorder_.entries(), self_, 1, request));
  }
  std::string message = report;
  if (message.empty() || message.back() != '\n') message += '\n';
  message += "flight records of the last " + std::to_string(FlightRecorder::kCapacity) + " collectives per rank (" +
             (s.flight_dir / "rank-K.jsonl").string() + "):\n";
  // This rank's own record missing means the folder, not the ranks: say so before the list of
  // ranks without a record (a read-only working directory blamed every rank).
  if (!records[static_cast<size_t>(self_.world_rank)])
    message += "  the flight-record folder " + s.flight_dir.string() + " cannot be written (" +
               flight_folder_problem(s.flight_dir) +
               "): records are missing because of it, not because the ranks stopped or died; set "
               "checkpoint.dir or start from a writable directory\n";
  message += describe_divergence(records, request);
  abort_job(message, exit_code);
}

}  // namespace brt::parallel
