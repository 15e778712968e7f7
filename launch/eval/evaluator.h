// `brt-dist eval`: streams every document of a split through a model, segment by segment with
// caches and recurrent state carried across the whole document (model.md §8), and reports
// bits/token, bits/byte, word-level perplexity and the loss by position within the document.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/sharding/context_parallel.h"
#include "core/model.h"
#include "launch/config/config.h"
#include "launch/eval/eval_diagnostics.h"

namespace brt::launch {

struct PositionBucket {
  int64_t begin = 0, end = 0;  // target positions [begin, end) within a document
  double nats = 0;
  int64_t tokens = 0;
};

// One predicted target: its document, its position there (the BOS is position 0) and its loss.
struct TokenLoss {
  int64_t doc_id = 0, position = 0;
  double nats = 0;
};

struct EvalReport {
  std::string split;
  int64_t documents = 0;  // in the split
  int64_t tokens = 0;     // predicted targets
  int64_t bytes = 0;      // UTF-8 bytes of the split's (normalised) text
  int64_t words = 0;      // whitespace-separated words of the split's text
  double nats = 0;
  std::vector<PositionBucket> buckets;  // by target position within the document
  // By position within the segment (of seq_len tokens): [0, W), [W, 2W), [2W, 4W), ... up to
  // seq_len — evaluated at a longer seq_len than training's, the buckets past the training
  // length show how the model generalises to longer contexts (docs/evaluation.md).
  std::vector<PositionBucket> segment_buckets;
  int64_t seq_len = 0, window = 0, trained_seq_len = 0;
  int layers = 0;
  // By the distance to the target token's previous occurrence in its document (first, ≤ W,
  // ≤ W·L, beyond): does the model get right what only carried state can bring back?
  std::vector<LongRangeClass> long_range;
  std::vector<AblationResult> ablations;           // with EvalOptions::ablate
  std::vector<core::LayerDiagnostics> layer_stats;  // recurrent and BST layers (TP = 1)
  std::vector<TokenLoss> token_losses;  // with EvalOptions::token_losses: this rank's, in order read
  double seconds = 0;
  double bits_per_token() const;
  double bits_per_byte() const;
  double word_perplexity() const;  // exp(total nats / words)
  std::string text() const;
  std::string json() const;
};

// Sums a vector of doubles over the ranks that evaluate together (identity on one process).
using SumReducer = std::function<void(std::vector<double>&)>;

struct EvalOptions {
  int data_rank = 0, data_size = 1;  // this rank's share of the documents (its data rank under CP)
  // Context parallelism (null: none): the model runs this rank's chunk of each segment; the
  // chunks' losses are gathered and chunk 0 accounts for the segment.
  const core::ContextParallel* cp = nullptr;
  SumReducer reduce;             // sums the totals over the ranks that evaluate together
  bool progress = false;
  // The segment length the model was trained at (0: the model's): an edge of the
  // segment-position buckets when evaluating at a longer one.
  int64_t trained_seq_len = 0;
  bool ablate = false;       // two more passes: the carried state reset per segment, per block
  bool layer_stats = false;  // gate and state-share statistics of recurrent/BST layers
  bool token_losses = false; // keep every predicted target's loss (EvalReport::token_losses)
};

// Evaluates `split` of cfg.data.path with this rank's streams; with a reducer, every layout
// reports the same totals.
template <typename T>
EvalReport evaluate_split(core::Model<T>& model, const RunConfig& cfg, const std::string& split,
                          const EvalOptions& options = {});

}  // namespace brt::launch
