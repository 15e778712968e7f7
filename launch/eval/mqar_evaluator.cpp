#include "launch/eval/mqar_evaluator.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "data/task_eval.h"
#include "data/tasks/task_random.h"
#include "launch/eval/logit_rows.h"
#include "launch/process/progress.h"

namespace brt::launch {

namespace {

constexpr uint64_t kGridDraw = 0x67726964ull;  // "grid": the eval grid's documents, apart from training's

int64_t gap_tokens(double gap_windows, int window) { return std::llround(gap_windows * double(window)); }

}  // namespace

std::vector<MqarCellResult> mqar_grid_cells(const MqarGrid& grid, int window) {
  std::vector<MqarCellResult> cells;
  for (const int pairs : grid.pairs)
    for (const double gap : grid.gap_windows) {
      MqarCellResult c;
      c.pairs = pairs;
      c.gap_windows = gap;
      c.gap_tokens = gap_tokens(gap, window);
      cells.push_back(c);
    }
  return cells;
}

std::vector<data::MqarSpec> mqar_grid_specs(const MqarGrid& grid, int window) {
  std::vector<data::MqarSpec> specs;
  for (const MqarCellResult& c : mqar_grid_cells(grid, window))
    for (int s = 0; s < grid.samples; ++s) {
      data::MqarSpec spec;
      spec.pairs = c.pairs;
      spec.gap_tokens = c.gap_tokens;
      spec.seed = data::mix_keys({grid.seed, kGridDraw, uint64_t(c.pairs), uint64_t(s)});
      specs.push_back(spec);
    }
  return specs;
}

namespace {

// One pass over the grid: per document (answers, hits, nats) summed over ranks, then per cell
// in grid order. Document j is read by global stream j mod G (G = data_size x B), so each is
// scored on exactly one rank and the sum only adds zeros.
template <typename T>
MqarPassResult mqar_pass(core::Model<T>& model, const std::vector<data::MqarSpec>& specs, const MqarEvalOptions& opt,
                         const std::string& label) {
  clear_carried_state(model);
  const int B = model.streams();
  const int64_t G = int64_t(B) * opt.data_size;
  const auto at = [&specs, G](int64_t stream, int64_t k) -> std::optional<data::MqarSource> {
    const int64_t j = stream + k * G;
    if (j >= int64_t(specs.size())) return std::nullopt;
    return data::MqarSource{j, specs[size_t(j)]};
  };
  data::MqarStreams streams(data::MqarVocabulary::of(model.config().vocab), at, B, model.config().seq_len,
                            int64_t(opt.data_rank) * B, true);
  std::vector<double> acc(specs.size() * 3, 0.0);
  data::Batch batch;
  std::vector<T> row;
  Progress shown(label, opt.progress);
  int64_t steps = 0;
  while (streams.next(batch)) {
    const T* logits =
        model.forward_logits({batch.inputs.data(), batch.targets.data(), batch.mask.data(), batch.doc_start.data()});
    for (size_t i = 0; i < batch.mask.size(); ++i) {
      if (!batch.mask[i]) continue;  // answers only
      whole_row(model, logits, i, row);
      const data::AnswerTokenScore s = data::score_answer_token(std::span<const T>(row), batch.targets[i]);
      double* doc = acc.data() + size_t(batch.doc_id[i / size_t(batch.seq)]) * 3;
      doc[0] += 1, doc[1] += s.argmax ? 1 : 0, doc[2] += s.nats;
    }
    ++steps;
    shown.update(-1, std::to_string(steps) + (steps == 1 ? " segment" : " segments"));
  }
  shown.finish(std::to_string(steps) + (steps == 1 ? " segment" : " segments"));
  if (opt.reduce) opt.reduce(acc);
  MqarPassResult r;
  r.cells = mqar_grid_cells(opt.grid, model.config().window);
  for (size_t j = 0; j < specs.size(); ++j) {
    MqarCellResult& c = r.cells[j / size_t(opt.grid.samples)];
    const double* doc = acc.data() + 3 * j;
    c.documents += 1, c.answers += int64_t(doc[0]), c.hits += int64_t(doc[1]), c.nats += doc[2];
    c.exact += doc[0] > 0 && doc[1] == doc[0];
  }
  for (const auto& c : r.cells) r.answers += c.answers, r.hits += c.hits;
  return r;
}

}  // namespace

template <typename T>
MqarReport evaluate_mqar(core::Model<T>& model, const MqarEvalOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const data::MqarVocabulary vocab = data::MqarVocabulary::of(model.config().vocab);
  for (const int p : opt.grid.pairs)
    if (p < 1 || p > vocab.keys)
      throw std::invalid_argument("--pairs: " + std::to_string(p) + " is not in [1, " + std::to_string(vocab.keys) +
                                  "], the keys of model.vocab = " + std::to_string(model.config().vocab) + " (" +
                                  vocab.describe() + ")");
  const std::vector<data::MqarSpec> specs = mqar_grid_specs(opt.grid, model.config().window);
  MqarReport r;
  r.grid = opt.grid;
  r.checkpoint = opt.checkpoint;
  r.vocabulary = vocab.describe();
  r.values = vocab.values;
  r.seq_len = model.config().seq_len;
  r.window = model.config().window;
  r.plain = mqar_pass(model, specs, opt, "eval --task mqar");
  if (opt.ablate)
    for (const auto mode : {core::CarryAblation::kSegment, core::CarryAblation::kBlock}) {
      MqarPassResult a = r.plain;
      a.applies = model.carry_ablation_applies(mode);
      if (a.applies) {
        model.set_carry_ablation(mode);
        try {
          a = mqar_pass(model, specs, opt, std::string("eval --task mqar (ablation: ") + core::carry_ablation_name(mode) + ")");
        } catch (...) {
          model.set_carry_ablation(core::CarryAblation::kNone);
          throw;
        }
        model.set_carry_ablation(core::CarryAblation::kNone);
      }
      a.mode = std::string(core::carry_ablation_name(mode));
      r.ablations.push_back(a);
    }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

template MqarReport evaluate_mqar<float>(core::Model<float>&, const MqarEvalOptions&);

namespace {

void pass_table(std::ostringstream& o, const MqarPassResult& p, const MqarGrid& grid) {
  char cell[64];
  o << "    pairs \\ gap (W)";
  for (const double g : grid.gap_windows) std::snprintf(cell, sizeof cell, " %7g", g), o << cell;
  o << "\n";
  for (size_t i = 0; i < grid.pairs.size(); ++i) {
    std::snprintf(cell, sizeof cell, "    %16d", grid.pairs[i]);
    o << cell;
    for (size_t j = 0; j < grid.gap_windows.size(); ++j)
      std::snprintf(cell, sizeof cell, " %7.3f", p.cells[i * grid.gap_windows.size() + j].accuracy()), o << cell;
    o << "\n";
  }
  std::snprintf(cell, sizeof cell, "    all: %.4f of %lld answers\n", p.accuracy(), (long long)p.answers);
  o << cell;
}

nlohmann::ordered_json pass_json(const MqarPassResult& p) {
  nlohmann::ordered_json cells = nlohmann::ordered_json::array();
  for (const auto& c : p.cells)
    cells.push_back({{"pairs", c.pairs}, {"gap_windows", c.gap_windows}, {"gap_tokens", c.gap_tokens},
                     {"documents", c.documents}, {"answers", c.answers}, {"accuracy", c.accuracy()},
                     {"exact", c.exact}, {"answer_nats", c.answer_nats()}});
  return {{"mode", p.mode}, {"applies", p.applies}, {"accuracy", p.accuracy()}, {"answers", p.answers},
          {"cells", cells}};
}

}  // namespace

std::string MqarReport::text() const {
  std::ostringstream o;
  char line[400];
  std::snprintf(line, sizeof line,
                "eval --task mqar: %zu pair counts x %zu gaps x %d documents, seed %llu, N = %lld, W = %lld; %s; "
                "chance 1/%lld = %.4f; %.1f s\n  accuracy over the answers (teacher-forced argmax):\n",
                grid.pairs.size(), grid.gap_windows.size(), grid.samples, (unsigned long long)grid.seed,
                (long long)seq_len, (long long)window, vocabulary.c_str(), (long long)values, 1.0 / double(values),
                seconds);
  o << line;
  pass_table(o, plain, grid);
  for (const auto& a : ablations) {
    o << "  carried state ablated (" << a.mode << (a.applies ? "" : ": the model carries nothing it resets") << "):\n";
    pass_table(o, a, grid);
  }
  return o.str();
}

std::string MqarReport::json() const {
  nlohmann::ordered_json report = {{"task", "mqar"},         {"checkpoint", checkpoint},
                                   {"seed", grid.seed},      {"samples_per_cell", grid.samples},
                                   {"seq_len", seq_len},     {"window", window},
                                   {"vocabulary", vocabulary}, {"chance", 1.0 / double(values)},
                                   {"accuracy", plain.accuracy()}, {"cells", pass_json(plain)["cells"]}};
  if (!ablations.empty()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& a : ablations) list.push_back(pass_json(a));
    report["ablations"] = list;
  }
  return report.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace brt::launch
