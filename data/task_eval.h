// What `brt-dist eval --task passkey|needle|facts` needs from the data side
// (docs/evaluation.md, "Long-range tasks"): the grid of document lengths x depths and the seeded
// documents of each cell, single-pass streams that feed them to the model segment by segment
// with the carried state (as DocumentStreams feeds a book), and the scoring of the answer.
//
// Scoring is teacher-forced: at every answer token the model sees the true prefix (the whole
// document up to it) and is scored on that token. A document counts as an exact match when the
// argmax of the logits equals the answer token at every answer position (what greedy decoding
// would produce, token by token, given the true prefix); its answer loss is the mean of the
// answer tokens' losses in nats.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "data/batch.h"
#include "data/streams.h"
#include "data/tasks/tasks.h"

namespace brt::data {

struct TaskGrid {
  TaskSpec shape;                // kind, digits, facts, supporting_facts; shape.seed seeds the grid
  std::vector<int64_t> lengths;  // document lengths in tokens (without the stream's BOS)
  std::vector<double> depths;    // 0 (fact first) .. 1 (fact right before the question)
  int samples = 8;               // documents per cell
};

// One cell: every sample has exactly this length and distance (TaskGenerator::grid_spec).
struct TaskCell {
  int64_t length = 0;
  double depth = 0;
  int64_t distance_tokens = 0;
};

struct TaskSample {
  size_t cell = 0;
  int sample = 0;
  TaskSpec spec;
};

// Cells length-major (every depth of the first length, then the next length), and their
// samples cell by cell. Sample s of every cell of one length has the same seed, so across the
// depths of a length only where the fact sits changes: the same content, the same haystack.
// Deterministic: the same list on every rank.
std::vector<TaskCell> task_grid_cells(const TaskGenerator& generator, const TaskGrid& grid);
std::vector<TaskSample> task_grid_samples(const TaskGenerator& generator, const TaskGrid& grid);

// One answer token from the logits row of the position that predicts it.
struct AnswerTokenScore {
  double nats = 0;       // -log softmax(logits)[target]
  bool argmax = false;   // the largest logit (the first one, on ties) is the target's
};
template <typename T>
AnswerTokenScore score_answer_token(std::span<const T> logits, int32_t target) {
  size_t best = 0;
  double top = -std::numeric_limits<double>::infinity();
  for (size_t v = 0; v < logits.size(); ++v) {
    if (double(logits[v]) > top) top = double(logits[v]), best = v;
  }
  double sum = 0;
  for (const T x : logits) sum += std::exp(double(x) - top);
  return {top + std::log(sum) - double(logits[static_cast<size_t>(target)]), best == static_cast<size_t>(target)};
}

// One document's answer.
struct AnswerScore {
  int64_t tokens = 0;
  int64_t argmax_hits = 0;
  double nats = 0;  // summed over the answer tokens
  void add(const AnswerTokenScore& t) {
    ++tokens;
    argmax_hits += t.argmax ? 1 : 0;
    nats += t.nats;
  }
  bool exact_match() const { return tokens > 0 && argmax_hits == tokens; }
  double mean_nats() const { return tokens > 0 ? nats / double(tokens) : 0.0; }
};

// A cell's totals (the JSON's cells[]): accuracy = exact matches / n, answer_nats = the mean
// over its documents of their mean answer-token loss.
struct TaskCellResult {
  TaskCell cell;
  double distance_windows = 0;
  int64_t n = 0, exact = 0;
  double answer_nats_sum = 0;
  double accuracy() const { return n > 0 ? double(exact) / double(n) : 0.0; }
  double answer_nats() const { return n > 0 ? answer_nats_sum / double(n) : 0.0; }
};

// Per-sample results (index = position in task_grid_samples; summed over ranks first, each
// sample scored on exactly one rank) into per-cell totals, added in sample order so every
// layout reports the same numbers.
std::vector<TaskCellResult> task_cell_results(const std::vector<TaskCell>& cells,
                                              const std::vector<TaskSample>& samples,
                                              const std::vector<AnswerScore>& scores, int window);

// Single-pass streams over a list of task specs: document j is read by global stream
// j mod G (G = data_size x B, as DocumentStreams deals a split), segment by segment, BOS first
// (options.add_bos), doc_start at its first segment; a stream with nothing left goes idle
// (mask 0, doc_id -1). Batch::doc_id is the document's index in the list, Batch::task is 1.
// Documents are made when a stream starts them, so a long grid never sits in memory at once.
class TaskDocumentStreams {
 public:
  TaskDocumentStreams(std::shared_ptr<const TaskGenerator> generator, std::vector<TaskSpec> specs,
                      const StreamOptions& options);
  // false (and `out` all idle) once every stream of this rank is done.
  bool next(Batch& out);
  // Which answer token row `row` of the last batch predicts: its index in the answer span of
  // the document its stream reads, or -1 (not an answer target, or masked).
  int64_t answer_token(const Batch& batch, size_t row) const;
  // The document stream s read in the last batch (doc_id >= 0 there).
  const TaskDocument& document(int s) const { return current_[static_cast<size_t>(s)].doc; }
  // Tokens this rank's streams will read, BOS included (progress and ETA).
  int64_t total_tokens() const { return total_tokens_; }

 private:
  struct Current {
    int64_t index = -1;  // into specs_
    TaskDocument doc;
    int64_t offset = 0;
  };
  std::shared_ptr<const TaskGenerator> generator_;
  std::vector<TaskSpec> specs_;
  StreamOptions options_;
  int64_t global_streams_ = 0, first_stream_ = 0;
  std::vector<int64_t> taken_;  // per stream: documents of its deal begun
  std::vector<Current> current_;
  std::vector<int32_t> view_;
  int64_t total_tokens_ = 0;
};

}  // namespace brt::data
