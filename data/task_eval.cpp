#include "data/task_eval.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "data/tasks/task_random.h"

namespace brt::data {

namespace {
constexpr uint64_t kGridSampleKey = 0x6121D;
}

std::vector<TaskCell> task_grid_cells(const TaskGenerator& generator, const TaskGrid& grid) {
  if (grid.lengths.empty() || grid.depths.empty() || grid.samples < 1) {
    throw std::invalid_argument("task grid: needs at least one length, one depth and one sample per cell");
  }
  const TaskGenerator::Bounds bounds = generator.bounds(grid.shape);
  std::vector<TaskCell> cells;
  for (const int64_t length : grid.lengths) {
    for (const double depth : grid.depths) {
      cells.push_back({length, depth, TaskGenerator::grid_spec(grid.shape, bounds, length, depth).distance_tokens});
    }
  }
  return cells;
}

std::vector<TaskSample> task_grid_samples(const TaskGenerator& generator, const TaskGrid& grid) {
  const std::vector<TaskCell> cells = task_grid_cells(generator, grid);
  std::vector<TaskSample> samples;
  samples.reserve(cells.size() * static_cast<size_t>(grid.samples));
  for (size_t c = 0; c < cells.size(); ++c) {
    const size_t length_index = c / grid.depths.size();
    TaskSpec spec = grid.shape;
    spec.length_tokens = cells[c].length;
    spec.prefix_tokens = 0;
    spec.distance_tokens = cells[c].distance_tokens;
    for (int s = 0; s < grid.samples; ++s) {
      spec.seed = mix_keys({grid.shape.seed, kGridSampleKey, length_index, static_cast<uint64_t>(s)});
      samples.push_back({c, s, spec});
    }
  }
  return samples;
}

std::vector<TaskCellResult> task_cell_results(const std::vector<TaskCell>& cells,
                                              const std::vector<TaskSample>& samples,
                                              const std::vector<AnswerScore>& scores, int window) {
  if (scores.size() != samples.size()) {
    throw std::invalid_argument("task_cell_results: " + std::to_string(scores.size()) + " scores for " +
                                std::to_string(samples.size()) + " samples");
  }
  std::vector<TaskCellResult> results(cells.size());
  for (size_t c = 0; c < cells.size(); ++c) {
    results[c].cell = cells[c];
    results[c].distance_windows = double(cells[c].distance_tokens) / double(window);
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    TaskCellResult& r = results.at(samples[i].cell);
    ++r.n;
    r.exact += scores[i].exact_match() ? 1 : 0;
    r.answer_nats_sum += scores[i].mean_nats();
  }
  return results;
}

TaskDocumentStreams::TaskDocumentStreams(std::shared_ptr<const TaskGenerator> generator, std::vector<TaskSpec> specs,
                                         const StreamOptions& options)
    : generator_(std::move(generator)), specs_(std::move(specs)), options_(options) {
  if (options_.streams_per_rank < 1 || options_.seq_len < 1 || options_.data_size < 1 || options_.data_rank < 0 ||
      options_.data_rank >= options_.data_size) {
    throw std::invalid_argument("task streams: need B >= 1, N >= 1 and 0 <= data_rank < data_size");
  }
  global_streams_ = int64_t{options_.data_size} * options_.streams_per_rank;
  first_stream_ = int64_t{options_.data_rank} * options_.streams_per_rank;
  taken_.assign(static_cast<size_t>(options_.streams_per_rank), 0);
  current_.resize(static_cast<size_t>(options_.streams_per_rank));
  const int64_t bos = options_.add_bos ? 1 : 0;
  for (size_t j = 0; j < specs_.size(); ++j) {
    const int64_t g = static_cast<int64_t>(j) % global_streams_;
    if (g < first_stream_ || g >= first_stream_ + options_.streams_per_rank) continue;
    // length_tokens is exact for grid specs; others are counted when made.
    total_tokens_ += specs_[j].length_tokens > 0 ? specs_[j].length_tokens + bos : 0;
  }
}

bool TaskDocumentStreams::next(Batch& out) {
  out.resize(options_.streams_per_rank, options_.seq_len);
  bool any = false;
  const int64_t bos = options_.add_bos ? 1 : 0;
  for (int s = 0; s < options_.streams_per_rank; ++s) {
    Current& cur = current_[static_cast<size_t>(s)];
    if (cur.index < 0 || cur.offset >= static_cast<int64_t>(cur.doc.tokens.size()) + bos - 1) {
      const int64_t j = first_stream_ + s + taken_[static_cast<size_t>(s)] * global_streams_;
      if (j >= static_cast<int64_t>(specs_.size())) continue;  // idle
      cur.doc = generator_->make(specs_[static_cast<size_t>(j)]);
      cur.index = j;
      cur.offset = 0;
      ++taken_[static_cast<size_t>(s)];
    }
    any = true;
    const int64_t length = static_cast<int64_t>(cur.doc.tokens.size()) + bos;
    const int64_t begin = cur.offset, end = std::min(length, begin + options_.seq_len + 1);
    view_.clear();
    for (int64_t p = begin; p < end; ++p) {
      view_.push_back(p < bos ? options_.bos_id : cur.doc.tokens[static_cast<size_t>(p - bos)]);
    }
    write_segment_row(out, s, view_.data(), begin, end - begin);
    out.doc_id[static_cast<size_t>(s)] = cur.index;
    out.task[static_cast<size_t>(s)] = 1;
    cur.offset += options_.seq_len;
  }
  return any;
}

int64_t TaskDocumentStreams::answer_token(const Batch& batch, size_t row) const {
  if (!batch.mask[row]) return -1;
  const auto s = static_cast<size_t>(row / static_cast<size_t>(batch.seq));
  if (batch.doc_id[s] < 0 || current_[s].index != batch.doc_id[s]) return -1;
  // The target of row `row` is token position + 1 of the stream's view, i.e. document token
  // position + 1 - bos.
  const int64_t index = batch.position[row] + 1 - (options_.add_bos ? 1 : 0);
  const TokenSpan& answer = current_[s].doc.answer;
  return answer.contains(index) ? index - answer.begin : -1;
}

}  // namespace brt::data
