// Multi-query associative recall (MQAR; docs/fidelity.md, "MQAR"): the task that separates a
// model whose recall is bounded by its attention window from one that carries state past it
// (Zoology, Arora et al. 2023; Based, arXiv 2402.18668), trained as the task itself.
//
// A document, in token ids of its own synthetic vocabulary (no corpus, no tokenizer):
//
//   [prefix filler] k1 v1 k2 v2 ... kP vP [gap filler] q1 a1 q2 a2 ... qP aP
//
// P distinct keys each with a value (values may repeat), `gap` filler tokens, then every key
// once more in a seeded order, each followed by its value: the answer. Keys, values and filler
// come from disjoint id ranges (MqarVocabulary), so nothing but the pairs tells an answer; the
// loss (data.tasks.loss = answers) and the score count the answer tokens only. The distance of
// a document is its gap: the tokens strictly between the last pair's value and the first query,
// so every query's pair lies at least gap + 1 tokens back (and at most gap + 4P - 1).
//
// Everything is a pure function of (vocabulary, spec): the same document in every run and on
// every rank. MqarStreams feeds documents segment by segment with the carried state, like
// DocumentStreams feeds books (model.md §8).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/batch.h"

namespace brt::data {

// The ids of a vocabulary of `vocab`: 0..3 reserved (0 the padding of a short segment, never
// in a document), then keys, values (as many as keys) and kFillerIds filler ids.
struct MqarVocabulary {
  static constexpr int32_t kReserved = 4;
  static constexpr int32_t kFillerIds = 8;
  int32_t keys_begin = 0, keys = 0;
  int32_t values_begin = 0, values = 0;
  int32_t filler_begin = 0, filler = 0;
  // std::invalid_argument naming model.vocab when it leaves fewer than 4 keys.
  static MqarVocabulary of(int vocab);
  // "keys 4-29 (26), values 30-55 (26), filler 56-63 (8)"
  std::string describe() const;
};

struct MqarSpec {
  int pairs = 4;
  int64_t gap_tokens = 0;     // filler between the last pair and the first query
  int64_t prefix_tokens = 0;  // filler before the first pair
  uint64_t seed = 0;          // the keys, values, filler and query order
};

struct MqarDocument {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> answer;  // [tokens.size()]: 1 where the token is an answer (a query's value)
  int64_t pairs_begin = 0, gap_begin = 0, queries_begin = 0;
};

// std::invalid_argument naming the field when the spec cannot be met (more pairs than keys).
MqarDocument make_mqar_document(const MqarVocabulary& vocab, const MqarSpec& spec);

// The training documents' draws (the data.tasks.* keys): the k-th document of global stream g
// is made from a hash of (seed, g, k), its pairs, gap and prefix uniform in their ranges.
struct MqarOptions {
  int min_pairs = 4, max_pairs = 16;
  int64_t min_gap = 0, max_gap = 64;
  int64_t min_prefix = 0, max_prefix = 0;
  uint64_t seed = 0;
  // Which documents: the training streams' and a held-out split's are drawn under distinct
  // purposes, so no document of one is a document of the other (by the hash, not by chance).
  uint64_t purpose = 0;
};
MqarSpec mqar_training_spec(const MqarOptions& options, int64_t global_stream, int64_t document);
// std::invalid_argument naming the data.tasks key that is out of range for `vocab`.
void check_mqar_options(const MqarOptions& options, const MqarVocabulary& vocab);

// Streams of MQAR documents: stream s (global stream first_stream + s) reads the documents
// `document(g, k)` gives for k = 0, 1, ... in turn, N tokens a step; an empty answer ends the
// stream (single pass: it goes idle, mask 0, doc_id -1). doc_id is the id the function gives.
// answers_only: only answer targets are unmasked (the loss of data.tasks.loss = answers).
struct MqarSource {
  int64_t id = 0;
  MqarSpec spec;
};
using MqarDocumentAt = std::function<std::optional<MqarSource>(int64_t global_stream, int64_t document)>;

class MqarStreams {
 public:
  MqarStreams(MqarVocabulary vocab, MqarDocumentAt document, int streams, int seq, int64_t first_stream,
              bool answers_only);
  // false once every stream is idle (never, for training's endless streams).
  bool next(Batch& out);
  // Per stream (documents begun, offset in the current one): the checkpoint's cursor.
  std::vector<int64_t> cursor() const;
  void restore(const std::vector<int64_t>& cursor);
  // The document stream s reads (valid while it is not idle).
  const MqarDocument& document(int s) const { return current_[size_t(s)].doc; }

 private:
  struct Current {
    int64_t taken = 0;   // documents of this stream begun (the current one included)
    int64_t offset = 0;  // next input position in it
    int64_t id = -1;     // -1: idle
    MqarDocument doc;
  };
  void load(int s);
  void fill(int s, Batch& out) const;

  MqarVocabulary vocab_;
  MqarDocumentAt document_;
  int streams_ = 0, seq_ = 0;
  int64_t first_stream_ = 0;
  bool answers_only_ = true;
  std::vector<Current> current_;
};

}  // namespace brt::data
