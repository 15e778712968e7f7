// The job-wide side of runtime/numerics.h: groups of ranks, their differences, the JSON record
// checkpoints keep and the comparison of two records.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "runtime/numerics.h"

namespace brt::runtime {

namespace {

std::string value_or_none(const Numerics& n, const std::string& key) {
  const std::string v = n.value(key);
  return v.empty() ? "(none)" : v;
}

}  // namespace

std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return out;
}

namespace {

// The decisive fields' keys in first-seen order, with their labels.
std::vector<std::pair<std::string, std::string>> decisive_keys(const std::vector<NumericsGroup>& groups) {
  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto& g : groups)
    for (const auto& f : g.numerics.fields)
      if (f.decisive && std::none_of(keys.begin(), keys.end(), [&](const auto& k) { return k.first == f.key; }))
        keys.push_back({f.key, f.label});
  return keys;
}

}  // namespace

std::string ranks_on_host(const NumericsGroup& group) {
  return (group.ranks.size() == 1 ? "rank " : "ranks ") + rank_ranges(group.ranks) + " on " + group.host;
}

bool numerics_agree(const std::vector<NumericsGroup>& groups) {
  for (const auto& g : groups)
    if (g.numerics.decisive_text() != groups.front().numerics.decisive_text()) return false;
  return true;
}

std::string numerics_differences(const std::vector<NumericsGroup>& groups) {
  std::string out;
  for (const auto& [key, label] : decisive_keys(groups)) {
    // value -> the groups holding it, in order of first appearance
    std::vector<std::pair<std::string, std::vector<const NumericsGroup*>>> by_value;
    for (const auto& g : groups) {
      const std::string v = value_or_none(g.numerics, key);
      auto it = std::find_if(by_value.begin(), by_value.end(), [&](const auto& e) { return e.first == v; });
      if (it == by_value.end()) by_value.push_back({v, {&g}});
      else it->second.push_back(&g);
    }
    if (by_value.size() < 2) continue;
    std::string part = label + ":";
    for (size_t i = 0; i < by_value.size(); ++i) {
      part += (i ? ", " : " ") + by_value[i].first + " on ";
      for (size_t j = 0; j < by_value[i].second.size(); ++j)
        part += (j ? " and " : "") + ranks_on_host(*by_value[i].second[j]);
    }
    out += (out.empty() ? "" : "; ") + part;
  }
  return out;
}

std::string numerics_record(const std::vector<NumericsGroup>& groups) {
  nlohmann::json record = {{"format", 1}, {"groups", nlohmann::json::array()}};
  for (const auto& g : groups) {
    nlohmann::json fields = nlohmann::json::array();
    for (const auto& f : g.numerics.fields)
      fields.push_back({{"key", f.key}, {"label", f.label}, {"value", f.value}, {"decisive", f.decisive}});
    record["groups"].push_back({{"host", g.host}, {"ranks", g.ranks}, {"fields", fields}});
  }
  return record.dump();
}

std::vector<NumericsGroup> parse_numerics_record(const std::string& json) {
  std::vector<NumericsGroup> groups;
  if (json.empty()) return groups;
  try {
    const nlohmann::json record = nlohmann::json::parse(json);
    for (const auto& g : record.at("groups")) {
      NumericsGroup group;
      group.host = g.at("host").get<std::string>();
      group.ranks = g.at("ranks").get<std::vector<int>>();
      for (const auto& f : g.at("fields"))
        group.numerics.add(f.at("key").get<std::string>(), f.at("label").get<std::string>(),
                           f.at("value").get<std::string>(), f.at("decisive").get<bool>());
      groups.push_back(std::move(group));
    }
  } catch (const nlohmann::json::exception&) {
    return {};
  }
  return groups;
}

std::string numerics_record_change(const std::string& stored_json, const std::string& current_json,
                                   const std::string& stored_name, const std::string& current_name) {
  const std::vector<NumericsGroup> stored = parse_numerics_record(stored_json);
  const std::vector<NumericsGroup> current = parse_numerics_record(current_json);
  if (stored.empty() || current.empty()) return "";
  auto distinct = [](const std::vector<NumericsGroup>& groups) {
    std::set<std::string> out;
    for (const auto& g : groups) out.insert(g.numerics.decisive_text());
    return out;
  };
  if (distinct(stored) == distinct(current)) return "";
  std::vector<NumericsGroup> both = stored;
  both.insert(both.end(), current.begin(), current.end());
  std::string out;
  for (const auto& [key, label] : decisive_keys(both)) {
    auto values = [&key = key](const std::vector<NumericsGroup>& groups) {
      std::vector<std::string> v;
      for (const auto& g : groups)
        if (const std::string x = value_or_none(g.numerics, key); std::find(v.begin(), v.end(), x) == v.end())
          v.push_back(x);
      return v;
    };
    const std::vector<std::string> a = values(stored), b = values(current);
    if (std::set<std::string>(a.begin(), a.end()) == std::set<std::string>(b.begin(), b.end())) continue;
    auto joined = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& x : v) s += (s.empty() ? "" : " / ") + x;
      return s;
    };
    out += (out.empty() ? "" : "; ") + label + " " + joined(a) + " in " + stored_name + ", " + joined(b) + " " +
           current_name;
  }
  return out.empty() ? "the ranks are grouped differently over the same fingerprints" : out;
}

std::string numerics_record_lines(const std::string& json, const std::string& indent) {
  std::string out;
  for (const auto& g : parse_numerics_record(json)) out += indent + ranks_on_host(g) + ": " + g.numerics.summary() + "\n";
  return out;
}

}  // namespace brt::runtime
