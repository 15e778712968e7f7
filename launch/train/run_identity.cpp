#include "launch/train/run_identity.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <system_error>

#include "data/corpus/text.h"

namespace brt::launch {

namespace fs = std::filesystem;

std::string new_run_id(const std::string& salt) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string unique = salt + "\n" + std::to_string(now.time_since_epoch().count()) + "\n" + host + "\n" +
                             std::to_string(getpid());
  const std::string hash = data::hex64(data::fnv1a64(unique.data(), unique.size()));
  return std::string(stamp) + "-" + hash.substr(0, 6);
}

namespace {

// The file's last 256 KiB: a record is a few hundred bytes, so the last id is in there unless the
// tail is all records without one.
std::string file_tail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > (256 << 10) ? size - (256 << 10) : 0;
  in.seekg(start);
  std::string tail(static_cast<size_t>(size - start), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  return tail;
}

}  // namespace

std::string metrics_file_run(const std::string& metrics_path) {
  const std::string tail = file_tail(metrics_path);
  bool any_record = false;
  size_t end = tail.size();
  while (end > 0) {
    const size_t begin = tail.rfind('\n', end - 1);
    const size_t from = begin == std::string::npos ? 0 : begin + 1;
    const std::string line = tail.substr(from, end - from);
    end = begin == std::string::npos ? 0 : begin;
    const auto record = nlohmann::json::parse(line, nullptr, false);  // a cut-off line is no record
    if (!record.is_object()) continue;
    any_record = true;
    if (record.contains("run_id") && record["run_id"].is_string()) return record["run_id"].get<std::string>();
  }
  return any_record ? "-" : "";
}

std::string config_path_beside(const std::string& metrics_path) {
  std::string path = metrics_path;
  if (path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0) path.resize(path.size() - 6);
  return path + ".config.toml";
}

namespace {

// <stem>.<id>.jsonl beside `path`, or with -2, -3, ... when that exists.
fs::path aside_path(const fs::path& path, const std::string& id) {
  const std::string stem = path.stem().string(), ext = path.extension().string();
  for (int n = 1;; ++n) {
    const fs::path candidate = path.parent_path() / (stem + "." + id + (n == 1 ? "" : "-" + std::to_string(n)) + ext);
    std::error_code ec;
    if (!fs::exists(candidate, ec)) return candidate;
  }
}

void move_aside(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec)
    throw std::runtime_error("log.metrics_path: cannot move another run's metrics " + from.string() + " aside to " +
                             to.string() + ": " + ec.message());
}

}  // namespace

MetricsRun settle_metrics_run(const std::string& metrics_path, bool resumed, const std::string& salt) {
  MetricsRun run;
  std::error_code ec;
  const bool has_records = !metrics_path.empty() && fs::file_size(metrics_path, ec) > 0 && !ec;
  const std::string theirs = has_records ? metrics_file_run(metrics_path) : "";
  if (resumed && !theirs.empty() && theirs != "-") {
    run.id = theirs;
    run.continued = true;
    return run;
  }
  run.id = new_run_id(salt);
  if (!has_records) return run;
  // Records of another run (or of one from before run ids: named by the file's time).
  std::string label = theirs;
  if (label.empty() || label == "-") {
    const auto time = fs::last_write_time(metrics_path, ec);
    const auto sys = std::chrono::file_clock::to_sys(time);
    const std::time_t t = std::chrono::system_clock::to_time_t(sys);
    std::tm utc{};
    gmtime_r(&t, &utc);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
    label = std::string("before-") + stamp;
  }
  const fs::path aside = aside_path(metrics_path, label);
  move_aside(metrics_path, aside);
  const fs::path config = config_path_beside(metrics_path);
  if (fs::exists(config, ec)) move_aside(config, config_path_beside(aside.string()));
  run.moved_to = aside.string();
  return run;
}

}  // namespace brt::launch
