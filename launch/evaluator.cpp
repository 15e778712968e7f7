#include "launch/evaluator.h"

#include "launch/progress.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>
#include <unordered_map>

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

void json_buckets(std::ostringstream& o, const std::vector<PositionBucket>& buckets) {
  for (size_t i = 0; i < buckets.size(); ++i) {
    const auto& b = buckets[i];
    o << (i ? "," : "") << "{\"begin\":" << b.begin << ",\"end\":" << (b.end < 0 ? -1 : b.end)
      << ",\"tokens\":" << b.tokens << ",\"nats\":" << b.nats << ",\"bits_per_token\":"
      << (b.tokens ? b.nats / double(b.tokens) / std::log(2.0) : 0.0) << "}";
  }
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
  return o.str();
}

std::string EvalReport::json() const {
  std::ostringstream o;
  o.precision(10);
  o << "{\"split\":\"" << split << "\",\"documents\":" << documents << ",\"tokens\":" << tokens
    << ",\"bytes\":" << bytes << ",\"words\":" << words << ",\"nats\":" << nats
    << ",\"bits_per_token\":" << bits_per_token() << ",\"bits_per_byte\":" << bits_per_byte()
    << ",\"word_perplexity\":" << word_perplexity() << ",\"seconds\":" << seconds
    << ",\"seq_len\":" << seq_len << ",\"window\":" << window << ",\"trained_seq_len\":" << trained_seq_len
    << ",\"position_buckets\":[";
  json_buckets(o, buckets);
  o << "],\"segment_buckets\":[";
  json_buckets(o, segment_buckets);
  o << "]}";
  return o.str();
}

template <typename T>
EvalReport evaluate_split(core::Model<T>& model, const RunConfig& cfg, const std::string& split,
                          int dp_rank, int dp_size, const SumReducer& reduce, bool progress,
                          int64_t trained_seq_len) {
  const auto t0 = std::chrono::steady_clock::now();
  auto dataset = data::TokenDataset::open(cfg.data.path, data::parse_split(split));
  data::StreamOptions opt;
  opt.streams_per_rank = model.streams();
  opt.seq_len = model.config().seq_len;
  opt.dp_rank = dp_rank;
  opt.dp_size = dp_size;
  opt.single_pass = true;
  opt.shuffle = false;
  opt.bos_id = data::Tokenizer::load(data::tokenizer_path(cfg.data.path)).bos_id();
  data::DocumentStreams streams(dataset, opt);

  EvalReport r;
  r.split = split;
  const data::SplitTotals totals = dataset->totals();
  r.documents = dataset->num_documents();
  r.bytes = totals.bytes;
  r.words = totals.words;
  r.buckets = {{0, 512}, {512, 4096}, {4096, 32768}, {32768, -1}};
  r.seq_len = model.config().seq_len;
  r.window = model.config().window;
  r.trained_seq_len = trained_seq_len > 0 ? trained_seq_len : r.seq_len;
  r.segment_buckets = segment_buckets(r.seq_len, r.window, r.trained_seq_len);
  for (auto& ref : model.carried_state()) {  // start clean; documents reset it anyway
    int64_t n = 1;
    for (auto s : ref.shape) n *= s;
    model.memory().fill_zero(ref.data, size_t(n) * sizeof(T));  // backend memory
  }
  // Totals are kept per document (and position bucket) and summed in document order at the
  // end, so every layout — however documents fall on ranks and streams — adds the same
  // numbers in the same order and reports identical totals.
  std::unordered_map<int64_t, size_t> index_of;
  for (int64_t i = 0; i < dataset->num_documents(); ++i) index_of[dataset->document(i).doc_id] = size_t(i);
  // nats, then (nats, tokens) per document bucket, then per segment bucket
  const size_t nb = r.buckets.size(), ns = r.segment_buckets.size(), per_doc = 1 + 2 * (nb + ns);
  std::vector<double> acc(size_t(dataset->num_documents()) * per_doc, 0.0);
  data::Batch batch;
  int64_t steps = 0, local_tokens = 0;
  Progress shown("eval " + split, progress);
  const double expected_tokens = double(totals.tokens) / std::max(1, dp_size);  // this rank's share, about
  while (streams.next(batch)) {
    model.forward({batch.inputs.data(), batch.targets.data(), batch.mask.data(),
                   batch.doc_start.data()}, T(0));
    const std::vector<T> losses = model.row_losses();  // a host copy
    for (size_t i = 0; i < batch.mask.size(); ++i) {
      if (!batch.mask[i]) continue;
      const size_t stream = i / size_t(batch.seq);
      double* doc = acc.data() + index_of.at(batch.doc_id[stream]) * per_doc;
      const double l = double(losses[i]);
      doc[0] += l;
      const int64_t target_pos = batch.position[i] + 1;
      for (size_t k = 0; k < nb; ++k) {
        const auto& b = r.buckets[k];
        if (target_pos >= b.begin && (b.end < 0 || target_pos < b.end)) {
          doc[1 + 2 * k] += l;
          doc[2 + 2 * k] += 1;
          break;
        }
      }
      const int64_t in_segment = int64_t(i % size_t(batch.seq));
      for (size_t k = 0; k < ns; ++k) {
        if (in_segment < r.segment_buckets[k].end) {
          doc[1 + 2 * (nb + k)] += l;
          doc[2 + 2 * (nb + k)] += 1;
          break;
        }
      }
    }
    local_tokens += int64_t(std::count(batch.mask.begin(), batch.mask.end(), uint8_t(1)));
    ++steps;
    char detail[160];
    std::snprintf(detail, sizeof detail, "%lld segments, %lld tokens on this rank, %.0f tokens/s", (long long)steps,
                  (long long)local_tokens, local_tokens / std::max(1e-9, shown.elapsed_s()));
    shown.update(expected_tokens > 0 ? double(local_tokens) / expected_tokens : -1, detail);
  }
  {
    char detail[160];
    std::snprintf(detail, sizeof detail, "%lld segments, %lld tokens on this rank in %.1f s", (long long)steps,
                  (long long)local_tokens, shown.elapsed_s());
    shown.finish(detail);
  }
  // Each document was read by exactly one stream on one rank: the sum over ranks only adds
  // zeros, so it is exact.
  if (reduce) reduce(acc);
  for (int64_t d = 0; d < dataset->num_documents(); ++d) {
    const double* doc = acc.data() + size_t(d) * per_doc;
    r.nats += doc[0];
    for (size_t k = 0; k < nb; ++k) {
      r.buckets[k].nats += doc[1 + 2 * k];
      r.buckets[k].tokens += int64_t(doc[2 + 2 * k]);
      r.tokens += int64_t(doc[2 + 2 * k]);
    }
    for (size_t k = 0; k < ns; ++k) {
      r.segment_buckets[k].nats += doc[1 + 2 * (nb + k)];
      r.segment_buckets[k].tokens += int64_t(doc[2 + 2 * (nb + k)]);
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

template EvalReport evaluate_split<float>(core::Model<float>&, const RunConfig&, const std::string&, int, int,
                                          const SumReducer&, bool, int64_t);
template EvalReport evaluate_split<double>(core::Model<double>&, const RunConfig&, const std::string&, int, int,
                                           const SumReducer&, bool, int64_t);

}  // namespace brt::launch
