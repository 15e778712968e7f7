#include "parallel/health/flight_recorder.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace brt::parallel {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

FlightEntry* FlightRecorder::slot(uint64_t token) {
  const uint64_t id = token / 2;
  return token % 2 ? &local_[id % kLocalCapacity] : &ring_[id % kCapacity];
}

uint64_t FlightRecorder::begin(const std::string& op, const std::string& group, uint64_t sequence,
                               int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = next_++;
  const uint64_t token = id * 2 + (group == kLocalGroup ? 1 : 0);
  *slot(token) = {op, group, sequence, bytes, wall_seconds(), -1, id};
  return token;
}

void FlightRecorder::end(uint64_t token) {
  std::lock_guard<std::mutex> lock(mutex_);
  FlightEntry* e = slot(token);
  if (e->id == token / 2) e->end = wall_seconds();  // else already overwritten by newer entries
}

std::vector<FlightEntry> FlightRecorder::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<FlightEntry> out;
  for (const FlightEntry& e : ring_)
    if (e.id != 0) out.push_back(e);
  for (const FlightEntry& e : local_)
    if (e.id != 0) out.push_back(e);
  std::sort(out.begin(), out.end(), [](const FlightEntry& a, const FlightEntry& b) { return a.id < b.id; });
  return out;
}

namespace {

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

std::string describe_entry(const FlightEntry& e, double now) {
  std::string text = e.op;
  if (e.group != kLocalGroup) text += " (" + std::to_string(e.bytes) + " bytes)";
  text += e.end < 0 ? ", unfinished after " + seconds_text(now - e.start) : ", finished";
  return text;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

}  // namespace

// One JSON object per line (nlohmann-json): the rank's header, then one entry per operation.
std::string flight_jsonl(const std::vector<FlightEntry>& entries, const RankLocation& self, int world_size,
                         double request) {
  using Json = nlohmann::ordered_json;
  const auto line = [](const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n"; };
  std::string out = line({{"rank", self.world_rank}, {"host", self.host}, {"world", world_size}, {"request", request}});
  for (const FlightEntry& e : entries)
    out += line({{"op", e.op}, {"group", e.group}, {"seq", e.sequence}, {"bytes", e.bytes}, {"start", e.start},
                 {"end", e.end}});
  return out;
}

std::optional<RankFlight> parse_flight_jsonl(const std::string& text) {
  RankFlight flight;
  std::istringstream in(text);
  std::string line;
  try {
    if (!std::getline(in, line)) return std::nullopt;
    const nlohmann::json head = nlohmann::json::parse(line);
    flight.rank = head.at("rank").get<int>();
    flight.host = head.at("host").get<std::string>();
    flight.request = head.at("request").get<double>();
    while (std::getline(in, line)) {
      const nlohmann::json j = nlohmann::json::parse(line);
      FlightEntry e;
      e.op = j.at("op").get<std::string>();
      e.group = j.at("group").get<std::string>();
      e.sequence = j.at("seq").get<uint64_t>();
      e.bytes = j.at("bytes").get<int64_t>();
      e.start = j.at("start").get<double>();
      e.end = j.at("end").get<double>();
      flight.entries.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception&) {  // not a record of ours (or cut short): no flight
    return std::nullopt;
  }
  return flight;
}

namespace {

// Every rank of a group inside collective #`seq` and none finished: each waits for messages
// from the others that are not arriving. Across hosts that is the network between them (a cut
// link, a dead switch port) — named, since each rank's own report can only say "timeout".
std::string waiting_on_each_other(const std::vector<std::optional<RankFlight>>& by_rank,
                                  const std::map<int, std::map<uint64_t, const FlightEntry*>>& ranks, uint64_t seq) {
  if (ranks.size() < 2) return "";
  std::set<std::string> kinds, hosts;
  for (const auto& [r, seqs] : ranks) {
    auto it = seqs.find(seq);
    if (it == seqs.end() || it->second->end >= 0) return "";
    kinds.insert(it->second->op + "/" + std::to_string(it->second->bytes));
    hosts.insert(by_rank[size_t(r)]->host);
  }
  if (kinds.size() != 1) return "";
  std::string text = "    all " + std::to_string(ranks.size()) + " ranks are inside it and none has finished: their "
                     "messages to each other are not arriving";
  if (hosts.size() > 1) {
    text += " — check the network between hosts";
    for (const std::string& h : hosts) text += " " + h;
    text += " (a cut link, a host's network down)";
  }
  return text + "\n";
}

}  // namespace

std::string describe_divergence(const std::vector<std::optional<RankFlight>>& by_rank, double now) {
  std::ostringstream out;
  std::vector<int> missing, present;
  for (size_t r = 0; r < by_rank.size(); ++r) (by_rank[r] ? present : missing).push_back(int(r));
  if (!missing.empty())
    out << "  no flight record from world rank" << (missing.size() > 1 ? "s " : " ") << rank_list(missing)
        << " (stopped, dead, or hung where its watchdog cannot run)\n";

  // Per collective group: every present rank's entries by sequence number.
  std::map<std::string, std::map<int, std::map<uint64_t, const FlightEntry*>>> groups;
  for (int r : present)
    for (const FlightEntry& e : by_rank[size_t(r)]->entries)
      if (e.group != kLocalGroup) groups[e.group][r][e.sequence] = &e;
  bool any_divergence = false;
  for (const auto& [group, ranks] : groups) {
    uint64_t lo = 0, hi = 0;
    for (const auto& [r, seqs] : ranks) {
      lo = std::max(lo, seqs.begin()->first);  // the window every rank still remembers
      hi = std::max(hi, seqs.rbegin()->first);
    }
    for (uint64_t s = lo; s <= hi; ++s) {
      std::set<std::string> kinds;
      bool all_finished = true, all_reached = true;
      for (const auto& [r, seqs] : ranks) {
        auto it = seqs.find(s);
        if (it == seqs.end()) {
          all_reached = false;
          continue;
        }
        kinds.insert(it->second->op + "/" + std::to_string(it->second->bytes));
        all_finished = all_finished && it->second->end >= 0;
      }
      if (all_reached && all_finished && kinds.size() == 1) continue;
      any_divergence = true;
      out << "  group '" << group << "': the ranks diverge at #" << s << ":";
      for (const auto& [r, seqs] : ranks) {
        auto it = seqs.find(s);
        out << "\n    world rank " << r << ": ";
        if (it != seqs.end()) {
          out << describe_entry(*it->second, now);
        } else {
          out << "did not reach it (last #" << (seqs.upper_bound(s) == seqs.begin() ? 0 : std::prev(seqs.upper_bound(s))->first) << ")";
        }
      }
      out << "\n";
      out << waiting_on_each_other(by_rank, ranks, s);
      break;
    }
  }
  if (!any_divergence && !groups.empty())
    out << "  the records of the ranks that wrote one agree on every collective they hold\n";
  for (int r : present) {
    for (const FlightEntry& e : by_rank[size_t(r)]->entries) {
      if (e.group == kLocalGroup && e.end < 0)
        out << "  world rank " << r << " (host " << by_rank[size_t(r)]->host << ") is in '" << e.op << "' since "
            << seconds_text(now - e.start) << "\n";
    }
  }
  return out.str();
}

}  // namespace brt::parallel
