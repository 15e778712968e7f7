#include "launch/eval/evaluator.h"

#include "launch/feed/context_chunk.h"

#include "launch/process/progress.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "data/shard_format.h"
#include "data/streams.h"
#include "data/tokenizer.h"

namespace brt::launch {

double EvalReport::bits_per_token() const { return tokens ? nats / double(tokens) / std::log(2.0) : 0; }
double EvalReport::bits_per_byte() const { return bytes ? nats / double(bytes) / std::log(2.0) : 0; }
double EvalReport::word_perplexity() const { return words ? std::exp(nats / double(words)) : 0; }

namespace {

std::string bucket_name(const PositionBucket& b) {
  auto k = [](int64_t n) {
    if (n >= 1024 && n % 1024 == 0) return std::to_string(n / 1024) + "k";
    return std::to_string(n);
  };
  return b.end < 0 ? k(b.begin) + "+" : k(b.begin) + "-" + k(b.end);
}

std::string bucket_line(const PositionBucket& b) {
  char line[160];
  std::snprintf(line, sizeof line, "    %-10s %10lld tokens  %.4f bits/token\n", bucket_name(b).c_str(),
                (long long)b.tokens, b.tokens ? b.nats / double(b.tokens) / std::log(2.0) : 0.0);
  return line;
}

nlohmann::ordered_json json_buckets(const std::vector<PositionBucket>& buckets) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& b : buckets)
    out.push_back({{"begin", b.begin}, {"end", b.end < 0 ? -1 : b.end}, {"tokens", b.tokens}, {"nats", b.nats},
                   {"bits_per_token", b.tokens ? b.nats / double(b.tokens) / std::log(2.0) : 0.0}});
  return out;
}

// Edges W, 2W, 4W, ... and the training length, the last bucket ending at N: [0, W), [W, 2W),
// ..., so the tokens past the length the model was trained on get buckets of their own.
std::vector<PositionBucket> segment_buckets(int64_t seq_len, int64_t window, int64_t trained_seq_len) {
  std::set<int64_t> edges = {seq_len};
  for (int64_t e = std::max<int64_t>(1, window); e < seq_len; e *= 2) edges.insert(e);
  if (trained_seq_len > 0 && trained_seq_len < seq_len) edges.insert(trained_seq_len);
  std::vector<PositionBucket> out;
  int64_t begin = 0;
  for (int64_t e : edges) {
    out.push_back({begin, e, 0, 0});
    begin = e;
  }
  return out;
}

}  // namespace

std::string EvalReport::text() const {
  std::ostringstream o;
  char line[256];
  std::snprintf(line, sizeof line,
                "eval %s: %lld documents, %lld tokens, %lld bytes, %lld words, %.1f s\n"
                "  loss %.4f nats/token | bits/token %.4f | bits/byte %.4f | word perplexity %.3f\n",
                split.c_str(), (long long)documents, (long long)tokens, (long long)bytes,
                (long long)words, seconds, tokens ? nats / double(tokens) : 0.0, bits_per_token(),
                bits_per_byte(), word_perplexity());
  o << line << "  loss by position in the document:\n";
  for (const auto& b : buckets) o << bucket_line(b);
  std::snprintf(line, sizeof line, "  loss by position in the segment (N = %lld, W = %lld, trained at N = %lld):\n",
                (long long)seq_len, (long long)window, (long long)trained_seq_len);
  o << line;
  for (const auto& b : segment_buckets) o << bucket_line(b);
  if (!long_range.empty()) long_range_text(o, long_range, window, layers);
  ablation_text(o, ablations, bits_per_token());
  layers_text(o, layer_stats);
  return o.str();
}

std::string EvalReport::json() const {
  const nlohmann::ordered_json report = {
      {"split", split}, {"documents", documents}, {"tokens", tokens}, {"bytes", bytes}, {"words", words},
      {"nats", nats}, {"bits_per_token", bits_per_token()}, {"bits_per_byte", bits_per_byte()},
      {"word_perplexity", word_perplexity()}, {"seconds", seconds}, {"seq_len", seq_len}, {"window", window},
      {"trained_seq_len", trained_seq_len}, {"position_buckets", json_buckets(buckets)},
      {"segment_buckets", json_buckets(segment_buckets)}, {"layers_total", layers},
      {"long_range", long_range_json(long_range)}, {"ablation", ablation_json(ablations, bits_per_token())},
      {"layers", layers_json(layer_stats)}};
  // Text from the data (a split name) that is not UTF-8 is replaced, never a failed write.
  return report.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

namespace {

// Where one pass keeps its sums per document: nats, then (nats, tokens) per document-position
// bucket, per segment-position bucket and per long-range class.
struct DocSlots {
  size_t nb, ns, nl;
  size_t per_doc() const { return 1 + 2 * (nb + ns + nl); }
  size_t segment(size_t k) const { return 1 + 2 * (nb + k); }
  size_t long_range(size_t k) const { return 1 + 2 * (nb + ns + k); }
};

void add_to(double* doc, size_t slot, double nats) {
  doc[slot] += nats;
  doc[slot + 1] += 1;
}

// Context parallelism: the segment's [B, N] losses from every chunk's [B, N/C].
template <typename T>
std::vector<T> segment_losses(const core::ContextParallel& cp, const std::vector<T>& chunk, int streams,
                              int seq) {
  std::vector<T> all(chunk.size() * size_t(cp.size())), out(all.size());
  cp.group()->all_gather(std::span<const T>(chunk), std::span<T>(all));
  const size_t len = size_t(seq / cp.size());
  for (int c = 0; c < cp.size(); ++c)
    for (int b = 0; b < streams; ++b)
      std::copy_n(all.begin() + ptrdiff_t((size_t(c) * streams + b) * len), len,
                  out.begin() + ptrdiff_t(size_t(b) * seq + size_t(c) * len));
  return out;
}

// The forward of this rank's part of `batch` (its chunk under context parallelism) with the
// layer statistics, and the segment's [B, N] row losses; false on chunks other than 0, which
// leave the accounting to chunk 0.
template <typename T>
bool segment_forward(core::Model<T>& model, const data::Batch& batch, const core::ContextParallel* cp,
                     data::Batch& chunk, std::vector<core::LayerDiagnostics>* stats, std::vector<T>& losses) {
  if (cp) take_chunk(batch, cp->rank(), cp->size(), chunk);
  const data::Batch& mine = cp ? chunk : batch;
  model.forward({mine.inputs.data(), mine.targets.data(), mine.mask.data(), mine.doc_start.data()}, T(0));
  if (stats != nullptr) model.accumulate_diagnostics(mine.mask.data(), *stats);
  losses = model.row_losses();  // a host copy
  if (!cp) return true;
  losses = segment_losses(*cp, losses, batch.streams, batch.seq);
  return cp->first();
}

// Sums the per-document totals and the layer statistics over ranks in one reduction.
void reduce_with(const SumReducer& reduce, std::vector<double>& acc,
                 std::vector<core::LayerDiagnostics>* stats) {
  std::vector<double*> extra;
  if (stats != nullptr)
    for (auto& s : *stats)
      for (double* v : s.sums()) extra.push_back(v);
  const size_t n = acc.size();
  for (double* v : extra) acc.push_back(*v);
  reduce(acc);
  for (size_t k = 0; k < extra.size(); ++k) *extra[k] = acc[n + k];
  acc.resize(n);
}

// One pass over the split: the per-document sums (summed over ranks), and with `stats` the
// layer statistics. The carried state starts clean; documents reset it anyway.
template <typename T>
std::vector<double> evaluate_pass(core::Model<T>& model,
                                  const std::shared_ptr<const data::TokenDataset>& dataset,
                                  const data::StreamOptions& stream_options, const EvalReport& r,
                                  const EvalOptions& opt, const std::string& label,
                                  std::vector<core::LayerDiagnostics>* stats,
                                  std::vector<TokenLoss>* token_losses = nullptr) {
  for (auto& ref : model.carried_state()) {
    int64_t n = 1;
    for (auto s : ref.shape) n *= s;
    model.memory().fill_zero(ref.data, size_t(n) * sizeof(T));  // backend memory
  }
  data::DocumentStreams streams(dataset, stream_options);
  // Totals are kept per document (and bucket) and summed in document order at the end, so
  // every layout — however documents fall on ranks and streams — adds the same numbers in
  // the same order and reports identical totals.
  std::unordered_map<int64_t, size_t> index_of;
  for (int64_t i = 0; i < dataset->num_documents(); ++i) index_of[dataset->document(i).doc_id] = size_t(i);
  const DocSlots slots{r.buckets.size(), r.segment_buckets.size(), r.long_range.size()};
  std::vector<double> acc(size_t(dataset->num_documents()) * slots.per_doc(), 0.0);
  RepeatDistances repeats(model.streams());
  data::Batch batch;
  int64_t steps = 0, local_tokens = 0;
  Progress shown(label, opt.progress);
  const double expected_tokens = double(dataset->totals().tokens) / std::max(1, opt.data_size);  // about
  const core::ContextParallel* cp = opt.cp != nullptr && opt.cp->active() ? opt.cp : nullptr;
  data::Batch chunk;
  std::vector<T> losses;
  while (streams.next(batch)) {
    if (!segment_forward(model, batch, cp, chunk, stats, losses)) {  // chunk 0 accounts for it
      ++steps;
      continue;
    }
    for (int b = 0; b < batch.streams; ++b)
      if (batch.doc_start[size_t(b)] && batch.doc_id[size_t(b)] >= 0)
        repeats.start_document(b, batch.inputs[size_t(b) * batch.seq]);
    for (size_t i = 0; i < batch.mask.size(); ++i) {  // each stream's targets in order
      if (!batch.mask[i]) continue;
      const int stream = int(i / size_t(batch.seq));
      double* doc = acc.data() + index_of.at(batch.doc_id[size_t(stream)]) * slots.per_doc();
      const double l = double(losses[i]);
      doc[0] += l;
      const int64_t target_pos = batch.position[i] + 1;
      if (token_losses != nullptr) token_losses->push_back({batch.doc_id[size_t(stream)], target_pos, l});
      for (size_t k = 0; k < slots.nb; ++k) {
        const auto& b = r.buckets[k];
        if (target_pos >= b.begin && (b.end < 0 || target_pos < b.end)) {
          add_to(doc, 1 + 2 * k, l);
          break;
        }
      }
      const int64_t in_segment = int64_t(i % size_t(batch.seq));
      for (size_t k = 0; k < slots.ns; ++k)
        if (in_segment < r.segment_buckets[k].end) {
          add_to(doc, slots.segment(k), l);
          break;
        }
      const int64_t distance = repeats.advance(stream, batch.targets[i], target_pos);
      add_to(doc, slots.long_range(long_range_class_of(r.long_range, distance)), l);
    }
    local_tokens += int64_t(std::count(batch.mask.begin(), batch.mask.end(), uint8_t(1)));
    ++steps;
    char detail[160];
    std::snprintf(detail, sizeof detail, "%lld segments, %lld tokens on this rank, %.0f tokens/s", (long long)steps,
                  (long long)local_tokens, local_tokens / std::max(1e-9, shown.elapsed_s()));
    shown.update(expected_tokens > 0 ? double(local_tokens) / expected_tokens : -1, detail);
  }
  char detail[160];
  std::snprintf(detail, sizeof detail, "%lld segments, %lld tokens on this rank in %.1f s", (long long)steps,
                (long long)local_tokens, shown.elapsed_s());
  shown.finish(detail);
  // Each document was read by exactly one stream on one rank: the sum over ranks only adds
  // zeros, so it is exact.
  if (opt.reduce) reduce_with(opt.reduce, acc, stats);
  return acc;
}

}  // namespace

namespace {

// The report's frame before any pass: the split's totals and every bucket and class, empty.
template <typename T>
EvalReport empty_report(const core::Model<T>& model, const data::TokenDataset& dataset, const std::string& split,
                        const EvalOptions& opt) {
  EvalReport r;
  r.split = split;
  const data::SplitTotals totals = dataset.totals();
  r.documents = dataset.num_documents();
  r.bytes = totals.bytes;
  r.words = totals.words;
  r.buckets = {{0, 512}, {512, 4096}, {4096, 32768}, {32768, -1}};
  r.seq_len = model.config().seq_len;
  r.window = model.config().window;
  r.layers = model.config().layers;
  r.trained_seq_len = opt.trained_seq_len > 0 ? opt.trained_seq_len : r.seq_len;
  r.segment_buckets = segment_buckets(r.seq_len, r.window, r.trained_seq_len);
  r.long_range = long_range_classes(r.window, r.layers);
  if (opt.layer_stats) r.layer_stats = model.new_layer_diagnostics();
  return r;
}

// The per-document sums of a pass added up in document order (the same order on every layout).
void add_documents(EvalReport& r, const std::vector<double>& acc, const DocSlots& slots, int64_t documents) {
  for (int64_t d = 0; d < documents; ++d) {
    const double* doc = acc.data() + size_t(d) * slots.per_doc();
    r.nats += doc[0];
    for (size_t k = 0; k < slots.nb; ++k) {
      r.buckets[k].nats += doc[1 + 2 * k];
      r.buckets[k].tokens += int64_t(doc[2 + 2 * k]);
      r.tokens += int64_t(doc[2 + 2 * k]);
    }
    for (size_t k = 0; k < slots.ns; ++k) {
      r.segment_buckets[k].nats += doc[slots.segment(k)];
      r.segment_buckets[k].tokens += int64_t(doc[slots.segment(k) + 1]);
    }
    for (size_t k = 0; k < slots.nl; ++k) {
      r.long_range[k].nats += doc[slots.long_range(k)];
      r.long_range[k].tokens += int64_t(doc[slots.long_range(k) + 1]);
    }
  }
}

// The same split with the carried state reset (core/diagnostics.h): how much the model relies
// on what its state carries across segments, and across blocks. `plain`: the plain pass's sums.
template <typename T>
AblationResult ablation_pass(core::Model<T>& model, core::CarryAblation mode,
                             const std::shared_ptr<const data::TokenDataset>& dataset,
                             const data::StreamOptions& stream_options, const EvalReport& r, const EvalOptions& opt,
                             const std::vector<double>& plain) {
  AblationResult a;
  a.mode = core::carry_ablation_name(mode);
  a.applies = model.carry_ablation_applies(mode);
  a.long_range = long_range_classes(r.window, r.layers);
  // Nothing to reset: the pass would compute the plain one's numbers to the bit
  // (tests/integration/eval_diagnostics.sh), so they are taken as they are.
  std::vector<double> ablated = plain;
  if (a.applies) {
    model.set_carry_ablation(mode);
    try {
      ablated = evaluate_pass(model, dataset, stream_options, r, opt, "eval " + r.split + " (ablation: " + a.mode + ")",
                              nullptr);
    } catch (...) {
      model.set_carry_ablation(core::CarryAblation::kNone);
      throw;
    }
    model.set_carry_ablation(core::CarryAblation::kNone);
  }
  const DocSlots slots{r.buckets.size(), r.segment_buckets.size(), r.long_range.size()};
  for (int64_t d = 0; d < r.documents; ++d) {
    const double* doc = ablated.data() + size_t(d) * slots.per_doc();
    a.nats += doc[0];
    for (size_t k = 0; k < slots.nl; ++k) {
      a.long_range[k].nats += doc[slots.long_range(k)];
      a.long_range[k].tokens += int64_t(doc[slots.long_range(k) + 1]);
      a.tokens += int64_t(doc[slots.long_range(k) + 1]);
    }
  }
  return a;
}

}  // namespace

template <typename T>
EvalReport evaluate_split(core::Model<T>& model, const RunConfig& cfg, const std::string& split,
                          const EvalOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  auto dataset = data::TokenDataset::open(cfg.data.path, data::parse_split(split));
  if (dataset->vocab_size() > model.config().vocab)  // ids past the embedding (another tokenizer's data)
    throw std::invalid_argument("model.vocab: " + std::to_string(model.config().vocab) + " is smaller than the " +
                                "vocabulary (" + std::to_string(dataset->vocab_size()) +
                                ") of the tokenizer that made " + cfg.data.path);
  data::StreamOptions stream_options;
  stream_options.streams_per_rank = model.streams();
  stream_options.seq_len = model.config().seq_len;
  stream_options.data_rank = opt.data_rank;
  stream_options.data_size = opt.data_size;
  stream_options.single_pass = true;
  stream_options.shuffle = false;
  stream_options.bos_id = dataset->bos_id();  // of the tokenizer.model that opening checked

  EvalReport r = empty_report(model, *dataset, split, opt);
  const DocSlots slots{r.buckets.size(), r.segment_buckets.size(), r.long_range.size()};
  const std::vector<double> acc =
      evaluate_pass(model, dataset, stream_options, r, opt, "eval " + split, opt.layer_stats ? &r.layer_stats : nullptr,
                    opt.token_losses ? &r.token_losses : nullptr);
  add_documents(r, acc, slots, dataset->num_documents());
  if (opt.ablate)
    for (const auto mode : {core::CarryAblation::kSegment, core::CarryAblation::kBlock})
      r.ablations.push_back(ablation_pass(model, mode, dataset, stream_options, r, opt, acc));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

template EvalReport evaluate_split<float>(core::Model<float>&, const RunConfig&, const std::string&,
                                          const EvalOptions&);
template EvalReport evaluate_split<double>(core::Model<double>&, const RunConfig&, const std::string&,
                                           const EvalOptions&);


}  // namespace brt::launch
