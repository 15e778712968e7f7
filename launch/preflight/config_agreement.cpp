#include "launch/preflight/config_agreement.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <span>
#include <sstream>

#include "launch/config/config_keys.h"
#include "parallel/launch_refused.h"
#include "parallel/mpi/mpi_communicator.h"
#include "parallel/mpi/mpi_session.h"
#include "runtime/numerics.h"

namespace brt::launch {

namespace {

constexpr size_t kMaxKeysShown = 16;

// key -> value of a canonical text, and the keys in their order.
struct ParsedConfig {
  std::vector<std::string> keys;
  std::map<std::string, std::string> values;
};

ParsedConfig parse_canonical(const std::string& text) {
  ParsedConfig parsed;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    parsed.keys.push_back(line.substr(0, eq));
    parsed.values[parsed.keys.back()] = line.substr(eq + 3);
  }
  return parsed;
}

std::string ranks_phrase(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "world rank " : "world ranks ") + rank_list_text(ranks);
}

// "32 on world rank 0; 64 on world ranks 1-3" for one key (configs with equal values merged).
std::string key_values_text(const std::string& key, const std::vector<ParsedConfig>& parsed,
                            const std::vector<RankConfig>& configs) {
  std::vector<std::pair<std::string, std::vector<int>>> by_value;
  for (size_t c = 0; c < parsed.size(); ++c) {
    const auto it = parsed[c].values.find(key);
    const std::string value = it == parsed[c].values.end() ? "(no such key in this build)" : it->second;
    size_t k = 0;
    while (k < by_value.size() && by_value[k].first != value) ++k;
    if (k == by_value.size()) by_value.push_back({value, {}});
    auto& ranks = by_value[k].second;
    ranks.insert(ranks.end(), configs[c].world_ranks.begin(), configs[c].world_ranks.end());
  }
  if (by_value.size() < 2) return "";
  std::string out;
  for (auto& [value, ranks] : by_value) {
    std::sort(ranks.begin(), ranks.end());
    out += (out.empty() ? "" : "; ") + value + " on " + ranks_phrase(ranks);
  }
  return out;
}

}  // namespace

std::string canonical_config_text(const RunConfig& config) {
  std::string out;
  for (const auto& spec : config_keys()) out += spec.key + " = " + value_text(spec.get(config)) + "\n";
  return out;
}

uint64_t config_hash(const std::string& canonical_text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : canonical_text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string rank_list_text(const std::vector<int>& ranks) {
  return runtime::rank_ranges(ranks);
}

std::string describe_config_differences(const std::vector<RankConfig>& configs) {
  std::vector<ParsedConfig> parsed;
  for (const auto& c : configs) parsed.push_back(parse_canonical(c.canonical_text));
  // Every key any config has, in the first config's order, then any others.
  std::vector<std::string> keys;
  for (const auto& p : parsed)
    for (const auto& k : p.keys)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  std::vector<std::string> lines;
  for (const auto& key : keys)
    if (const std::string values = key_values_text(key, parsed, configs); !values.empty())
      lines.push_back(key + ": " + values);
  std::string message = "the ranks were started with different configs; every rank must resolve the same one "
                        "(an mpirun app context or a per-rank override differs). ";
  if (lines.empty()) {
    message += "Their resolved configs differ in form only (different brt-dist builds?).";
  } else {
    message += std::to_string(lines.size()) + (lines.size() == 1 ? " key differs:" : " keys differ:");
    for (size_t i = 0; i < lines.size() && i < kMaxKeysShown; ++i) message += "\n  " + lines[i];
    if (lines.size() > kMaxKeysShown)
      message += "\n  ... and " + std::to_string(lines.size() - kMaxKeysShown) + " more";
  }
  return message + "\nNothing was started: give every rank the same config and overrides.";
}

std::vector<RankConfig> distinct_texts(parallel::Communicator& world, const std::string& mine) {
  const int64_t my_hash = int64_t(config_hash(mine));
  std::vector<int64_t> hashes(size_t(world.size()));
  world.all_gather(std::span<const int64_t>(&my_hash, 1), std::span<int64_t>(hashes));
  std::vector<int64_t> distinct;
  std::vector<RankConfig> texts;
  for (int r = 0; r < world.size(); ++r) {
    size_t k = 0;
    while (k < distinct.size() && distinct[k] != hashes[size_t(r)]) ++k;
    if (k == distinct.size()) {
      distinct.push_back(hashes[size_t(r)]);
      texts.emplace_back();
    }
    texts[k].world_ranks.push_back(r);
  }
  // One text: every rank's hash equals its own, so each has it already.
  if (texts.size() == 1) {
    texts[0].canonical_text = mine;
    return texts;
  }
  for (auto& t : texts) {
    std::string text = world.rank() == t.world_ranks.front() ? mine : std::string();
    parallel::broadcast_string(world, text, t.world_ranks.front());
    t.canonical_text = std::move(text);
  }
  return texts;
}

void agree_on_config(parallel::MpiSession& session, const RunConfig& config) {
  if (session.world_size() == 1) return;
  parallel::CommOptions options;
  options.timeout = std::chrono::milliseconds(int64_t(config.train.timeout_s * 1000));
  options.monitor = &session.monitor();
  parallel::MpiCommunicator world(MPI_COMM_WORLD, "world (config check)", options);
  const std::vector<RankConfig> configs = distinct_texts(world, canonical_config_text(config));
  if (configs.size() == 1) return;
  // Every rank builds the same message, so run_mpi_main prints it once and every rank exits with
  // the same status.
  throw parallel::LaunchRefused(describe_config_differences(configs));
}

}  // namespace brt::launch
