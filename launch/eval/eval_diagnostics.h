// Long-range diagnostics of `brt-dist eval` (docs/evaluation.md): the loss on tokens by the
// distance to their previous occurrence in the document (the BRT paper's "names beyond the
// window"), the loss with the carried state ablated, and the recurrent/BST layers' statistics.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/diagnostics.h"

namespace brt::launch {

// Targets whose previous occurrence in the same document is `distance` tokens back, with
// distance in (min_distance, max_distance] (max_distance < 0: unbounded); "first": none before.
struct LongRangeClass {
  std::string name;  // first | within_w | within_wl | beyond_wl
  int64_t min_distance = 0, max_distance = 0;
  double nats = 0;
  int64_t tokens = 0;
};

// first; ≤ W (the window a token attends to); (W, W·L] (what L stacked windows can reach);
// > W·L (only carried state can bring it: the recurrent state, the SSM).
std::vector<LongRangeClass> long_range_classes(int64_t window, int layers);
// The class of a distance (0: no previous occurrence).
size_t long_range_class_of(const std::vector<LongRangeClass>& classes, int64_t distance);

// Per stream, the last position of every token of the current document.
class RepeatDistances {
 public:
  explicit RepeatDistances(int streams) : last_(size_t(streams)) {}
  // A new document on `stream`, whose first (input) token sits at position 0.
  void start_document(int stream, int32_t first_token);
  // The distance from `position` back to the previous `token` in the document (0: none);
  // then records the token there. Call in document order.
  int64_t advance(int stream, int32_t token, int64_t position);

 private:
  std::vector<std::unordered_map<int32_t, int64_t>> last_;
};

// One pass of the split with the carried state ablated (core::CarryAblation).
struct AblationResult {
  std::string mode;      // segment | block
  bool applies = false;  // false: the model carries nothing this resets (numbers unchanged)
  double nats = 0;
  int64_t tokens = 0;
  std::vector<LongRangeClass> long_range;
  double bits_per_token() const;
};

double bits_per_token(double nats, int64_t tokens);

// Report sections (text lines indented like EvalReport::text, and JSON values through
// nlohmann-json, keys in the order written).
void long_range_text(std::ostringstream& o, const std::vector<LongRangeClass>& classes,
                     int64_t window, int layers);
void ablation_text(std::ostringstream& o, const std::vector<AblationResult>& ablations,
                   double baseline_bits);
void layers_text(std::ostringstream& o, const std::vector<core::LayerDiagnostics>& layers);
nlohmann::ordered_json long_range_json(const std::vector<LongRangeClass>& classes);
nlohmann::ordered_json ablation_json(const std::vector<AblationResult>& ablations, double baseline_bits);
nlohmann::ordered_json layers_json(const std::vector<core::LayerDiagnostics>& layers);

}  // namespace brt::launch
