// `brt-dist eval --task mqar` (docs/fidelity.md, "MQAR"; data/tasks/mqar.h): a grid of pair counts x
// gaps (in windows W) of MQAR documents, read segment by segment with the caches and states
// carried, scored teacher-forced on every answer token (argmax = the value); per cell the
// accuracy over its answers. With --ablate the same grid with the carried state reset per
// segment and per block (core/diagnostics.h): a model whose recall past the window lives in its
// state falls to chance there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model.h"
#include "data/tasks/mqar.h"
#include "launch/eval/evaluator.h"

namespace brt::launch {

struct MqarGrid {
  std::vector<int> pairs = {4, 8, 16};
  std::vector<double> gap_windows = {0.5, 1, 2, 4};  // the gap in units of model.window
  int samples = 8;                                   // documents per cell
  uint64_t seed = 1;  // --task-seed: another seed, other documents (a test grid beside a validation grid)
};

struct MqarCellResult {
  int pairs = 0;
  double gap_windows = 0;
  int64_t gap_tokens = 0;
  int64_t documents = 0, answers = 0, hits = 0, exact = 0;  // exact: documents with every answer right
  double nats = 0;                                           // summed over the answers
  double accuracy() const { return answers > 0 ? double(hits) / double(answers) : 0.0; }
  double answer_nats() const { return answers > 0 ? nats / double(answers) : 0.0; }
};

struct MqarPassResult {
  std::string mode = "none";  // none | segment | block
  bool applies = true;        // false: the model carries nothing the ablation resets
  std::vector<MqarCellResult> cells;
  int64_t answers = 0, hits = 0;
  double accuracy() const { return answers > 0 ? double(hits) / double(answers) : 0.0; }
};

struct MqarReport {
  MqarGrid grid;
  std::string checkpoint, vocabulary;
  int64_t seq_len = 0, window = 0, values = 0;
  MqarPassResult plain;
  std::vector<MqarPassResult> ablations;
  double seconds = 0;
  std::string text() const;  // one accuracy table per pass: pairs down, gaps across
  std::string json() const;  // docs/fidelity.md, "MQAR": cells and their accuracy per pass
};

struct MqarEvalOptions {
  MqarGrid grid;
  std::string checkpoint;
  int data_rank = 0, data_size = 1;
  SumReducer reduce;
  bool progress = false;
  int64_t trained_seq_len = 0;  // set with the other evaluators' options; MQAR documents do not depend on it
  bool ablate = false;
};

// Cells pairs-major; sample s of every gap of one pair count has the same keys and values, so
// across a row only the distance changes. std::invalid_argument naming --pairs when a count
// exceeds the vocabulary's keys.
std::vector<MqarCellResult> mqar_grid_cells(const MqarGrid& grid, int window);
std::vector<data::MqarSpec> mqar_grid_specs(const MqarGrid& grid, int window);

template <typename T>
MqarReport evaluate_mqar(core::Model<T>& model, const MqarEvalOptions& options);

}  // namespace brt::launch
