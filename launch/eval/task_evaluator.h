// `brt-dist eval --task passkey|needle|facts` (docs/evaluation.md, "Long-range tasks"): a grid
// of document lengths x depths of one task kind, the documents read segment by segment with the
// caches and states carried (as evaluate_split reads a book), scored teacher-forced on their
// answer tokens (data/task_eval.h), per cell and in all; with --ablate the same grid with the
// carried state reset per segment and per block (core/diagnostics.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "data/task_eval.h"
#include "launch/eval/evaluator.h"

namespace brt::launch {

// One pass over the grid: the cells' totals and the grid's.
struct TaskPassResult {
  std::string mode = "none";  // none (the plain pass) | segment | block
  bool applies = true;        // false: the model carries nothing the ablation resets (numbers unchanged)
  std::vector<data::TaskCellResult> cells;
  int64_t n = 0, exact = 0;
  double answer_nats_sum = 0;
  double accuracy() const { return n > 0 ? double(exact) / double(n) : 0.0; }
  double answer_nats() const { return n > 0 ? answer_nats_sum / double(n) : 0.0; }
};

struct TaskReport {
  data::TaskGrid grid;
  std::string split, checkpoint;
  int64_t seq_len = 0, window = 0, trained_seq_len = 0;
  int64_t tokens = 0;  // targets predicted per pass, over all ranks (L per document of L tokens: BOS first)
  TaskPassResult plain;
  std::vector<TaskPassResult> ablations;  // with TaskEvalOptions::ablate
  double seconds = 0;
  std::string text() const;
  std::string json() const;  // the format of docs/evaluation.md, "JSON"
};

struct TaskEvalOptions {
  data::TaskGrid grid;
  std::string split;       // the filler's split
  std::string checkpoint;  // named in the report
  int data_rank = 0, data_size = 1;  // this rank's share of the documents
  SumReducer reduce;             // sums the per-document scores over the ranks that evaluate together
  bool progress = false;
  int64_t trained_seq_len = 0;   // 0: the model's
  bool ablate = false;           // two more passes: the carried state reset per segment, per block
};

// Evaluates the grid on `generator`'s split with this rank's streams (model.streams()); with a
// reducer every layout reports the same numbers (each document is scored on one rank, the
// per-document scores summed over ranks, then added up in grid order).
template <typename T>
TaskReport evaluate_task(core::Model<T>& model, std::shared_ptr<const data::TaskGenerator> generator,
                         const TaskEvalOptions& options);

}  // namespace brt::launch
