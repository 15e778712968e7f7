#include "launch/eval/eval_diagnostics.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>

namespace brt::launch {

double bits_per_token(double nats, int64_t tokens) {
  return tokens > 0 ? nats / double(tokens) / std::log(2.0) : 0.0;
}

double AblationResult::bits_per_token() const { return launch::bits_per_token(nats, tokens); }

std::vector<LongRangeClass> long_range_classes(int64_t window, int layers) {
  const int64_t reach = window * std::max(1, layers);
  return {{"first", 0, 0, 0, 0},
          {"within_w", 0, window, 0, 0},
          {"within_wl", window, reach, 0, 0},
          {"beyond_wl", reach, -1, 0, 0}};
}

size_t long_range_class_of(const std::vector<LongRangeClass>& classes, int64_t distance) {
  if (distance <= 0) return 0;
  for (size_t k = 1; k < classes.size(); ++k)
    if (distance > classes[k].min_distance &&
        (classes[k].max_distance < 0 || distance <= classes[k].max_distance))
      return k;
  return classes.size() - 1;
}

void RepeatDistances::start_document(int stream, int32_t first_token) {
  auto& last = last_.at(size_t(stream));
  last.clear();
  last[first_token] = 0;
}

int64_t RepeatDistances::advance(int stream, int32_t token, int64_t position) {
  auto& last = last_.at(size_t(stream));
  auto [it, inserted] = last.try_emplace(token, position);
  if (inserted) return 0;
  const int64_t distance = position - it->second;
  it->second = position;
  return distance;
}

namespace {

std::string class_label(const LongRangeClass& c) {
  if (c.name == "first") return "first";
  if (c.max_distance < 0) return std::to_string(c.min_distance + 1) + "+";
  return std::to_string(c.min_distance + 1) + "-" + std::to_string(c.max_distance);
}

}  // namespace

void long_range_text(std::ostringstream& o, const std::vector<LongRangeClass>& classes,
                     int64_t window, int layers) {
  char line[200];
  std::snprintf(line, sizeof line,
                "  loss by distance to the token's previous occurrence in the document "
                "(W = %lld, W*L = %lld):\n",
                (long long)window, (long long)(window * std::max(1, layers)));
  o << line;
  for (const auto& c : classes) {
    std::snprintf(line, sizeof line, "    %-10s %10lld tokens  %.4f bits/token  (%s)\n",
                  class_label(c).c_str(), (long long)c.tokens, bits_per_token(c.nats, c.tokens),
                  c.name.c_str());
    o << line;
  }
}

void ablation_text(std::ostringstream& o, const std::vector<AblationResult>& ablations,
                   double baseline_bits) {
  if (ablations.empty()) return;
  o << "  carried state ablated (segment: reset at every segment; block: every block reads "
       "the document-start state):\n";
  char line[240];
  for (const auto& a : ablations) {
    if (!a.applies) {
      std::snprintf(line, sizeof line, "    %-8s nothing to reset in this model (%.4f bits/token)\n",
                    a.mode.c_str(), a.bits_per_token());
      o << line;
      continue;
    }
    std::string by_class;
    for (const auto& c : a.long_range) {
      char part[80];
      std::snprintf(part, sizeof part, " %s %.4f", c.name.c_str(), bits_per_token(c.nats, c.tokens));
      by_class += part;
    }
    std::snprintf(line, sizeof line, "    %-8s %.4f bits/token (%+.4f);%s\n", a.mode.c_str(),
                  a.bits_per_token(), a.bits_per_token() - baseline_bits, by_class.c_str());
    o << line;
  }
}

void layers_text(std::ostringstream& o, const std::vector<core::LayerDiagnostics>& layers) {
  char line[240];
  for (const auto& l : layers) {
    std::snprintf(line, sizeof line, "  layer %d (%s): state share of the attention output %.4f (std %.4f)",
                  l.layer, l.kind.c_str(), l.state_share.mean(), l.state_share.stddev());
    o << line;
    const auto gate = [&](const char* name, const core::MomentSums& g, const core::MomentSums& i) {
      if (l.gate_kind == "fixed")
        std::snprintf(line, sizeof line, "; %s sigma(b) mean %.4f std %.4f", name, g.mean(), g.stddev());
      else
        std::snprintf(line, sizeof line, "; %s forget mean %.4f std %.4f, input mean %.4f std %.4f",
                      name, g.mean(), g.stddev(), i.mean(), i.stddev());
      o << line;
    };
    if (!l.gate_kind.empty()) gate("gate", l.gate, l.gate_input);
    if (l.dual) gate("gate2", l.gate2, l.gate2_input);
    o << "\n";
  }
}

nlohmann::ordered_json long_range_json(const std::vector<LongRangeClass>& classes) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& c : classes)
    out.push_back({{"name", c.name}, {"min_distance", c.min_distance}, {"max_distance", c.max_distance},
                   {"tokens", c.tokens}, {"nats", c.nats}, {"bits_per_token", bits_per_token(c.nats, c.tokens)}});
  return out;
}

nlohmann::ordered_json ablation_json(const std::vector<AblationResult>& ablations, double baseline_bits) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& a : ablations)
    out.push_back({{"mode", a.mode}, {"applies", a.applies}, {"tokens", a.tokens}, {"nats", a.nats},
                   {"bits_per_token", a.bits_per_token()},
                   {"delta_bits_per_token", a.bits_per_token() - baseline_bits},
                   {"long_range", long_range_json(a.long_range)}});
  return out;
}

nlohmann::ordered_json layers_json(const std::vector<core::LayerDiagnostics>& layers) {
  const auto gate = [](const core::LayerDiagnostics& l, const core::MomentSums& g, const core::MomentSums& i) {
    nlohmann::ordered_json out = {{"kind", l.gate_kind}, {"mean", g.mean()}, {"std", g.stddev()}};
    if (l.gate_kind == "lstm") {
      out["input_mean"] = i.mean();
      out["input_std"] = i.stddev();
    }
    return out;
  };
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& l : layers) {
    nlohmann::ordered_json layer = {{"layer", l.layer}, {"kind", l.kind}, {"state_share", l.state_share.mean()},
                                    {"state_share_std", l.state_share.stddev()}};
    if (!l.gate_kind.empty()) layer["gate"] = gate(l, l.gate, l.gate_input);
    if (l.dual) layer["gate2"] = gate(l, l.gate2, l.gate2_input);
    out.push_back(std::move(layer));
  }
  return out;
}

}  // namespace brt::launch
