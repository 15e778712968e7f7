#include "parallel/flight_recorder.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

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

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// The value of "key": in one JSON line of ours (strings unescaped, numbers as text).
std::optional<std::string> json_field(const std::string& line, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  const size_t at = line.find(needle);
  if (at == std::string::npos) return std::nullopt;
  size_t p = at + needle.size();
  if (p < line.size() && line[p] == '"') {
    std::string out;
    for (++p; p < line.size() && line[p] != '"'; ++p) {
      if (line[p] == '\\' && p + 1 < line.size()) {
        if (line[p + 1] == 'u' && p + 5 < line.size()) {
          out += static_cast<char>(std::strtol(line.substr(p + 2, 4).c_str(), nullptr, 16));
          p += 5;
          continue;
        }
        ++p;
      }
      out += line[p];
    }
    return out;
  }
  const size_t end = line.find_first_of(",}", p);
  return line.substr(p, end == std::string::npos ? std::string::npos : end - p);
}

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

std::string flight_jsonl(const std::vector<FlightEntry>& entries, const RankLocation& self, int world_size,
                         double request) {
  std::ostringstream out;
  out.precision(17);
  out << "{\"rank\":" << self.world_rank << ",\"host\":" << json_string(self.host) << ",\"world\":" << world_size
      << ",\"request\":" << request << "}\n";
  for (const FlightEntry& e : entries) {
    out << "{\"op\":" << json_string(e.op) << ",\"group\":" << json_string(e.group) << ",\"seq\":" << e.sequence
        << ",\"bytes\":" << e.bytes << ",\"start\":" << e.start << ",\"end\":" << e.end << "}\n";
  }
  return out.str();
}

std::optional<RankFlight> parse_flight_jsonl(const std::string& text) {
  RankFlight flight;
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const auto rank = json_field(line, "rank"), host = json_field(line, "host"), request = json_field(line, "request");
  if (!rank || !host || !request) return std::nullopt;
  flight.rank = std::atoi(rank->c_str());
  flight.host = *host;
  flight.request = std::atof(request->c_str());
  while (std::getline(in, line)) {
    FlightEntry e;
    const auto op = json_field(line, "op"), group = json_field(line, "group"), seq = json_field(line, "seq"),
               bytes = json_field(line, "bytes"), start = json_field(line, "start"), end = json_field(line, "end");
    if (!op || !group || !seq || !bytes || !start || !end) return std::nullopt;
    e.op = *op;
    e.group = *group;
    e.sequence = std::strtoull(seq->c_str(), nullptr, 10);
    e.bytes = std::atoll(bytes->c_str());
    e.start = std::atof(start->c_str());
    e.end = std::atof(end->c_str());
    flight.entries.push_back(std::move(e));
  }
  return flight;
}

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
