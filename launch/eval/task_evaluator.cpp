#include "launch/eval/task_evaluator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "data/streams.h"
#include "launch/eval/logit_rows.h"
#include "launch/process/progress.h"

namespace brt::launch {

namespace {

// What every pass over the grid reads: the documents in grid order (doc_id = sample index) and
// how they are dealt to the streams.
struct TaskSetup {
  std::shared_ptr<const data::TaskGenerator> generator;
  std::vector<data::TaskCell> cells;
  std::vector<data::TaskSample> samples;
  std::vector<data::TaskSpec> specs;
  data::StreamOptions streams;
};

// One pass: every sample's answer score (this rank's samples; zeros elsewhere), summed over
// ranks. Each document is read by exactly one stream on one rank, so the sum only adds zeros.
template <typename T>
std::vector<data::AnswerScore> task_pass(core::Model<T>& model, const TaskSetup& setup, const TaskEvalOptions& opt,
                                         const std::string& label, int64_t* tokens_read) {
  clear_carried_state(model);  // documents reset it anyway; nothing of a previous pass remains
  data::TaskDocumentStreams streams(setup.generator, setup.specs, setup.streams);
  std::vector<double> acc(setup.specs.size() * 3, 0.0);  // per document: tokens, argmax hits, nats
  data::Batch batch;
  std::vector<T> row;
  int64_t local_tokens = 0, steps = 0;
  Progress shown(label, opt.progress);
  const double expected = double(std::max<int64_t>(1, streams.total_tokens()));
  while (streams.next(batch)) {
    const T* logits =
        model.forward_logits({batch.inputs.data(), batch.targets.data(), batch.mask.data(), batch.doc_start.data()});
    for (size_t i = 0; i < batch.mask.size(); ++i) {
      if (streams.answer_token(batch, i) < 0) continue;
      whole_row(model, logits, i, row);
      const data::AnswerTokenScore s = data::score_answer_token(std::span<const T>(row), batch.targets[i]);
      double* doc = acc.data() + size_t(batch.doc_id[i / size_t(batch.seq)]) * 3;
      doc[0] += 1;
      doc[1] += s.argmax ? 1 : 0;
      doc[2] += s.nats;
    }
    local_tokens += int64_t(std::count(batch.mask.begin(), batch.mask.end(), uint8_t(1)));
    ++steps;
    shown.update(double(local_tokens) / expected,
                 std::to_string(steps) + " segments, " + std::to_string(local_tokens) + " tokens on this rank");
  }
  shown.finish(std::to_string(steps) + " segments, " + std::to_string(local_tokens) + " tokens on this rank");
  acc.push_back(double(local_tokens));
  if (opt.reduce) opt.reduce(acc);
  *tokens_read = int64_t(acc.back());
  std::vector<data::AnswerScore> scores(setup.specs.size());
  for (size_t j = 0; j < scores.size(); ++j) {
    scores[j].tokens = int64_t(acc[3 * j]);
    scores[j].argmax_hits = int64_t(acc[3 * j + 1]);
    scores[j].nats = acc[3 * j + 2];
  }
  return scores;
}

// The cells of a pass and the grid's totals, added in grid order (the same on every layout).
TaskPassResult pass_result(const TaskSetup& setup, const std::vector<data::AnswerScore>& scores, int window) {
  TaskPassResult r;
  r.cells = data::task_cell_results(setup.cells, setup.samples, scores, window);
  for (const auto& c : r.cells) {
    r.n += c.n;
    r.exact += c.exact;
    r.answer_nats_sum += c.answer_nats_sum;
  }
  return r;
}

// The grid with the carried state ablated (core/diagnostics.h); a model it changes nothing in
// would compute the plain pass's numbers to the bit, so they are taken as they are.
template <typename T>
TaskPassResult ablated_pass(core::Model<T>& model, core::CarryAblation mode, const TaskSetup& setup,
                            const TaskEvalOptions& opt, const TaskPassResult& plain) {
  const std::string name = core::carry_ablation_name(mode);
  TaskPassResult r = plain;
  if (model.carry_ablation_applies(mode)) {
    model.set_carry_ablation(mode);
    try {
      int64_t tokens = 0;
      r = pass_result(setup, task_pass(model, setup, opt, "eval --task (ablation: " + name + ")", &tokens),
                      model.config().window);
    } catch (...) {
      model.set_carry_ablation(core::CarryAblation::kNone);
      throw;
    }
    model.set_carry_ablation(core::CarryAblation::kNone);
  } else {
    r.applies = false;
  }
  r.mode = name;
  return r;
}

TaskSetup task_setup(std::shared_ptr<const data::TaskGenerator> generator, const TaskEvalOptions& opt, int streams,
                     int seq_len) {
  TaskSetup setup;
  setup.cells = data::task_grid_cells(*generator, opt.grid);
  setup.samples = data::task_grid_samples(*generator, opt.grid);
  for (const auto& s : setup.samples) setup.specs.push_back(s.spec);
  setup.generator = std::move(generator);
  setup.streams.streams_per_rank = streams;
  setup.streams.seq_len = seq_len;
  setup.streams.data_rank = opt.data_rank;
  setup.streams.data_size = opt.data_size;
  setup.streams.single_pass = true;
  setup.streams.shuffle = false;
  setup.streams.bos_id = setup.generator->corpus().bos_id();  // the tokenizer that made the filler
  return setup;
}

}  // namespace

template <typename T>
TaskReport evaluate_task(core::Model<T>& model, std::shared_ptr<const data::TaskGenerator> generator,
                         const TaskEvalOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  if (generator->corpus().vocab_size() > model.config().vocab)  // ids past the embedding
    throw std::invalid_argument("model.vocab: " + std::to_string(model.config().vocab) +
                                " is smaller than the vocabulary (" + std::to_string(generator->corpus().vocab_size()) +
                                ") of the tokenizer that made the task documents' filler");
  const TaskSetup setup = task_setup(std::move(generator), opt, model.streams(), model.config().seq_len);
  TaskReport r;
  r.grid = opt.grid;
  r.split = opt.split;
  r.checkpoint = opt.checkpoint;
  r.seq_len = model.config().seq_len;
  r.window = model.config().window;
  r.trained_seq_len = opt.trained_seq_len > 0 ? opt.trained_seq_len : r.seq_len;
  const std::string label = "eval --task " + std::string(data::task_kind_name(opt.grid.shape.kind));
  r.plain = pass_result(setup, task_pass(model, setup, opt, label, &r.tokens), model.config().window);
  if (opt.ablate)
    for (const auto mode : {core::CarryAblation::kSegment, core::CarryAblation::kBlock})
      r.ablations.push_back(ablated_pass(model, mode, setup, opt, r.plain));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

template TaskReport evaluate_task<float>(core::Model<float>&, std::shared_ptr<const data::TaskGenerator>,
                                         const TaskEvalOptions&);

namespace {

void pass_text(std::ostringstream& o, const TaskPassResult& p) {
  char line[200];
  o << "    length   depth  distance (tokens, windows)  accuracy  answer nats      n\n";
  for (const auto& c : p.cells) {
    std::snprintf(line, sizeof line, "  %8lld  %6.3f  %10lld  %10.3f      %8.3f  %11.4f  %5lld\n",
                  (long long)c.cell.length, c.cell.depth, (long long)c.cell.distance_tokens, c.distance_windows,
                  c.accuracy(), c.answer_nats(), (long long)c.n);
    o << line;
  }
  std::snprintf(line, sizeof line, "  %-42s  %8.3f  %11.4f  %5lld\n", "all", p.accuracy(), p.answer_nats(),
                (long long)p.n);
  o << line;
}

nlohmann::ordered_json cells_json(const TaskPassResult& p) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& c : p.cells)
    out.push_back({{"length", c.cell.length}, {"depth", c.cell.depth}, {"distance_tokens", c.cell.distance_tokens},
                   {"distance_windows", c.distance_windows}, {"accuracy", c.accuracy()},
                   {"answer_nats", c.answer_nats()}, {"n", c.n}});
  return out;
}

}  // namespace

std::string TaskReport::text() const {
  std::ostringstream o;
  char line[320];
  const data::TaskSpec& s = grid.shape;
  std::snprintf(line, sizeof line,
                "eval --task %s (digits %d, facts %d, supporting facts %d) on %s: %zu cells x %d documents, "
                "seed %llu, %lld tokens, N = %lld, W = %lld (trained at N = %lld), %.1f s\n",
                std::string(data::task_kind_name(s.kind)).c_str(), s.digits, s.facts, s.supporting_facts,
                split.c_str(), plain.cells.size(), grid.samples, (unsigned long long)s.seed, (long long)tokens,
                (long long)seq_len, (long long)window, (long long)trained_seq_len, seconds);
  o << line;
  pass_text(o, plain);
  for (const auto& a : ablations) {
    o << "  carried state ablated (" << a.mode << (a.applies ? "" : ": the model carries nothing it resets") << "):\n";
    pass_text(o, a);
  }
  return o.str();
}

std::string TaskReport::json() const {
  const data::TaskSpec& s = grid.shape;
  nlohmann::ordered_json report = {
      {"task", std::string(data::task_kind_name(s.kind))}, {"digits", s.digits}, {"facts", s.facts},
      {"supporting_facts", s.supporting_facts}, {"split", split}, {"checkpoint", checkpoint}, {"seed", s.seed},
      {"samples_per_cell", grid.samples}, {"seq_len", seq_len}, {"window", window},
      {"trained_seq_len", trained_seq_len}, {"cells", cells_json(plain)}, {"accuracy", plain.accuracy()},
      {"answer_nats", plain.answer_nats()}};
  if (!ablations.empty()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& a : ablations)
      list.push_back({{"mode", a.mode}, {"applies", a.applies}, {"cells", cells_json(a)},
                      {"accuracy", a.accuracy()}, {"answer_nats", a.answer_nats()}});
    report["ablations"] = list;
  }
  // A path that is not UTF-8 is replaced, never a failed write.
  return report.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace brt::launch
