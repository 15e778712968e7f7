#include "data/tasks/mqar.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "data/tasks/task_random.h"

namespace brt::data {

namespace {

// Purposes of the draws (data/tasks/task_random.h): one per part of a document.
constexpr uint64_t kKeysDraw = 0x6b657973ull, kValuesDraw = 0x76616c73ull, kFillerDraw = 0x66696c6cull,
                   kOrderDraw = 0x6f726472ull, kSpecDraw = 0x73706563ull;

std::string range_text(int32_t begin, int32_t count) {
  return std::to_string(begin) + "-" + std::to_string(begin + count - 1) + " (" + std::to_string(count) + ")";
}

void append_filler(const MqarVocabulary& v, int64_t count, TaskRandom& draw, MqarDocument& doc) {
  for (int64_t i = 0; i < count; ++i) {
    doc.tokens.push_back(v.filler_begin + int32_t(draw.below(v.filler)));
    doc.answer.push_back(0);
  }
}

}  // namespace

MqarVocabulary MqarVocabulary::of(int vocab) {
  MqarVocabulary v;
  v.keys = (vocab - kReserved - kFillerIds) / 2;
  if (v.keys < 4)
    throw std::invalid_argument("MQAR needs model.vocab >= " + std::to_string(kReserved + kFillerIds + 8) +
                                " (4 reserved ids, " + std::to_string(kFillerIds) +
                                " filler ids and at least 4 keys and 4 values), got " + std::to_string(vocab));
  v.values = v.keys;
  v.keys_begin = kReserved;
  v.values_begin = v.keys_begin + v.keys;
  v.filler_begin = v.values_begin + v.values;
  v.filler = kFillerIds;
  return v;
}

std::string MqarVocabulary::describe() const {
  return "keys " + range_text(keys_begin, keys) + ", values " + range_text(values_begin, values) + ", filler " +
         range_text(filler_begin, filler);
}

MqarDocument make_mqar_document(const MqarVocabulary& v, const MqarSpec& spec) {
  if (spec.pairs < 1 || spec.pairs > v.keys)
    throw std::invalid_argument("MQAR pairs = " + std::to_string(spec.pairs) + " must be in [1, " +
                                std::to_string(v.keys) + "] (the keys of the vocabulary, " + v.describe() + ")");
  if (spec.gap_tokens < 0 || spec.prefix_tokens < 0)
    throw std::invalid_argument("MQAR gap and prefix must be >= 0 tokens");
  // P distinct keys: the first P of a seeded shuffle of all keys (Fisher-Yates, partial).
  std::vector<int32_t> keys(size_t(v.keys));
  std::iota(keys.begin(), keys.end(), v.keys_begin);
  TaskRandom key_draw(spec.seed, kKeysDraw);
  for (int i = 0; i < spec.pairs; ++i) std::swap(keys[size_t(i)], keys[size_t(key_draw.between(i, v.keys - 1))]);
  TaskRandom value_draw(spec.seed, kValuesDraw), filler_draw(spec.seed, kFillerDraw), order_draw(spec.seed, kOrderDraw);
  std::vector<int32_t> values(size_t(spec.pairs));
  for (auto& value : values) value = v.values_begin + int32_t(value_draw.below(v.values));

  MqarDocument doc;
  const size_t length = size_t(spec.prefix_tokens + spec.gap_tokens + 4 * int64_t(spec.pairs));
  doc.tokens.reserve(length);
  doc.answer.reserve(length);
  append_filler(v, spec.prefix_tokens, filler_draw, doc);
  doc.pairs_begin = int64_t(doc.tokens.size());
  for (int i = 0; i < spec.pairs; ++i) {
    doc.tokens.insert(doc.tokens.end(), {keys[size_t(i)], values[size_t(i)]});
    doc.answer.insert(doc.answer.end(), {0, 0});
  }
  doc.gap_begin = int64_t(doc.tokens.size());
  append_filler(v, spec.gap_tokens, filler_draw, doc);
  doc.queries_begin = int64_t(doc.tokens.size());
  std::vector<int> order(size_t(spec.pairs));
  std::iota(order.begin(), order.end(), 0);
  for (int i = spec.pairs - 1; i > 0; --i) std::swap(order[size_t(i)], order[size_t(order_draw.below(i + 1))]);
  for (const int i : order) {
    doc.tokens.insert(doc.tokens.end(), {keys[size_t(i)], values[size_t(i)]});
    doc.answer.insert(doc.answer.end(), {0, 1});
  }
  return doc;
}

MqarSpec mqar_training_spec(const MqarOptions& o, int64_t global_stream, int64_t document) {
  TaskRandom draw(mix_keys({o.seed, o.purpose, uint64_t(global_stream), uint64_t(document)}), kSpecDraw);
  MqarSpec spec;
  spec.pairs = int(draw.between(o.min_pairs, o.max_pairs));
  spec.gap_tokens = draw.between(o.min_gap, o.max_gap);
  spec.prefix_tokens = draw.between(o.min_prefix, o.max_prefix);
  spec.seed = draw.next();
  return spec;
}

void check_mqar_options(const MqarOptions& o, const MqarVocabulary& v) {
  auto fail = [](const std::string& key, const std::string& what) {
    throw std::invalid_argument(key + ": " + what);
  };
  if (o.min_pairs < 1) fail("data.tasks.min_pairs", "must be >= 1");
  if (o.max_pairs < o.min_pairs)
    fail("data.tasks.max_pairs", std::to_string(o.max_pairs) + " is below data.tasks.min_pairs (" +
                                     std::to_string(o.min_pairs) + ")");
  if (o.max_pairs > v.keys)
    fail("data.tasks.max_pairs", std::to_string(o.max_pairs) + " is more than the vocabulary's " +
                                     std::to_string(v.keys) + " keys (" + v.describe() +
                                     "); raise model.vocab or lower it");
  if (o.min_gap < 0 || o.max_gap < o.min_gap) fail("data.tasks.max_distance", "must be >= data.tasks.min_distance >= 0");
  if (o.min_prefix < 0 || o.max_prefix < o.min_prefix) fail("data.tasks.max_prefix", "must be >= data.tasks.min_prefix >= 0");
}

MqarStreams::MqarStreams(MqarVocabulary vocab, MqarDocumentAt document, int streams, int seq, int64_t first_stream,
                         bool answers_only)
    : vocab_(vocab),
      document_(std::move(document)),
      streams_(streams),
      seq_(seq),
      first_stream_(first_stream),
      answers_only_(answers_only),
      current_(size_t(streams)) {
  for (int s = 0; s < streams_; ++s) load(s);
}

// Begins stream s's next document (its taken-th), or leaves it idle when there is none.
void MqarStreams::load(int s) {
  Current& c = current_[size_t(s)];
  const std::optional<MqarSource> next = document_(first_stream_ + s, c.taken);
  c.offset = 0;
  if (!next) {
    c.id = -1;
    c.doc = {};
    return;
  }
  ++c.taken;
  c.id = next->id;
  c.doc = make_mqar_document(vocab_, next->spec);
}

void MqarStreams::fill(int s, Batch& out) const {
  const Current& c = current_[size_t(s)];
  out.doc_start[size_t(s)] = c.id >= 0 && c.offset == 0;
  out.doc_id[size_t(s)] = c.id;
  out.task[size_t(s)] = c.id >= 0;
  const int64_t len = int64_t(c.doc.tokens.size());
  for (int i = 0; i < seq_; ++i) {
    const size_t r = size_t(s) * size_t(seq_) + size_t(i);
    const int64_t p = c.offset + i;
    const bool has_target = c.id >= 0 && p + 1 < len;
    out.inputs[r] = p < len ? c.doc.tokens[size_t(p)] : 0;
    out.targets[r] = has_target ? c.doc.tokens[size_t(p + 1)] : 0;
    out.mask[r] = has_target && (!answers_only_ || c.doc.answer[size_t(p + 1)]);
    out.position[r] = p;
  }
}

bool MqarStreams::next(Batch& out) {
  out.resize(streams_, seq_);
  bool any = false;
  for (int s = 0; s < streams_; ++s) {
    Current& c = current_[size_t(s)];
    if (c.id >= 0 && c.offset + 1 >= int64_t(c.doc.tokens.size())) load(s);  // read to its end: the next
    fill(s, out);
    if (c.id >= 0) c.offset += seq_, any = true;
  }
  return any;
}

std::vector<int64_t> MqarStreams::cursor() const {
  std::vector<int64_t> flat;
  for (const Current& c : current_) flat.insert(flat.end(), {c.taken, c.offset});
  return flat;
}

void MqarStreams::restore(const std::vector<int64_t>& flat) {
  if (flat.size() != 2 * size_t(streams_))
    throw std::invalid_argument("MQAR data cursor has " + std::to_string(flat.size()) + " entries, expected " +
                                std::to_string(2 * streams_) + " (2 per stream)");
  for (int s = 0; s < streams_; ++s) {
    Current& c = current_[size_t(s)];
    c.taken = std::max<int64_t>(0, flat[2 * size_t(s)] - 1);  // load() begins document taken - 1 again
    load(s);
    c.offset = flat[2 * size_t(s) + 1];
  }
}

}  // namespace brt::data
