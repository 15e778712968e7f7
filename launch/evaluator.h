// `brt-dist eval`: streams every document of a split through a model, segment by segment with
// caches and recurrent state carried across the whole document (MODEL.md §8), and reports
// bits/token, bits/byte, word-level perplexity and the loss by position within the document.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/model.h"
#include "launch/config.h"

namespace brt::launch {

struct PositionBucket {
  int64_t begin = 0, end = 0;  // target positions [begin, end) within a document
  double nats = 0;
  int64_t tokens = 0;
};

struct EvalReport {
  std::string split;
  int64_t documents = 0;  // in the split
  int64_t tokens = 0;     // predicted targets
  int64_t bytes = 0;      // UTF-8 bytes of the split's (normalised) text
  int64_t words = 0;      // whitespace-separated words of the split's text
  double nats = 0;
  std::vector<PositionBucket> buckets;
  double seconds = 0;
  double bits_per_token() const;
  double bits_per_byte() const;
  double word_perplexity() const;  // exp(total nats / words)
  std::string text() const;
  std::string json() const;
};

// Sums a vector of doubles over the ranks that evaluate together (identity on one process).
using SumReducer = std::function<void(std::vector<double>&)>;

// Evaluates `split` of cfg.data.path with this rank's streams (dp_rank of dp_size) and, with a
// reducer, sums the totals over ranks so every layout reports the same numbers.
template <typename T>
EvalReport evaluate_split(core::Model<T>& model, const RunConfig& cfg, const std::string& split,
                          int dp_rank = 0, int dp_size = 1, const SumReducer& reduce = {},
                          bool progress = false);

}  // namespace brt::launch
