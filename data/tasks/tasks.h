// Long-range tasks built from the user's own corpus: a fact stated once inside real
// book text and asked for later, at a distance counted exactly in tokens.
//
//   passkey  "The pass key is 71432. Remember it. 71432 is the pass key." ... "What is the pass
//            key? The pass key is" -> " 71432"  (k digits)
//   needle   "The secret ingredient for the onion soup is saffron." at a depth of the book ...
//            "What is the secret ingredient for the onion soup? The secret ingredient for the
//            onion soup is" -> " saffron"
//   facts    BABILong-like (qa1/qa2): 2-4 templated facts about named people scattered through
//            the book ("Mary moved to the kitchen."; qa2: "Mary picked up the apple." ... "Mary
//            went to the garden."), then "Where is Mary? Mary is in the" -> " kitchen" (qa2:
//            "Where is the apple? The apple is in the" -> " garden")
//
// A document is token ids of a prepared corpus (what a stream serves, without the BOS the
// stream adds): filler drawn from the split's documents (seeded document and offset), the
// statements (each "\n" + sentence + "\n"), the question ("\n" + question) and the answer, which
// ends the document. Everything is a pure function of (spec, corpus, tokenizer): the same
// document in every run and on every rank. Scoring (data/task_eval.h): teacher-forced over the
// answer tokens. Format and grid: docs/evaluation.md, "Long-range tasks".
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.h"
#include "data/tokenizer.h"

namespace brt::data {

enum class TaskKind { passkey, needle, facts };
std::string_view task_kind_name(TaskKind kind);
// "passkey", "needle" or "facts"; std::invalid_argument naming the three otherwise.
TaskKind parse_task_kind(std::string_view name);

struct TaskSpec {
  TaskKind kind = TaskKind::passkey;
  // Tokens strictly between the fact's last token and the question's first (filler and any
  // other statements there). Exact.
  int64_t distance_tokens = 0;
  // Where the document begins. length_tokens > 0: the document is exactly that long and the
  // filler before the fact takes up what the rest leaves (an eval grid cell, TaskGenerator::
  // grid_spec); otherwise prefix_tokens tokens come before the fact.
  int64_t length_tokens = 0;
  int64_t prefix_tokens = 0;
  int digits = 5;            // passkey: 1..18 digits
  int facts = 3;             // facts: statements in all, supporting ones included (2..4)
  int supporting_facts = 1;  // facts: 1 (qa1-like) or 2 (qa2-like: who holds the object, where they went)
  uint64_t seed = 0;         // picks the content, the filler and the other statements' places
};

struct TokenSpan {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool contains(int64_t i) const { return i >= begin && i < end; }
  bool operator==(const TokenSpan&) const = default;
};

// A run of filler tokens: tokens [begin, begin + tokens) of corpus document doc_id, which are
// tokens [draw_offset, draw_offset + tokens) of the document's filler (filler_tokens()).
struct FillerSlice {
  int64_t doc_id = 0;
  int64_t begin = 0;
  int64_t tokens = 0;
  int64_t draw_offset = 0;
};

struct TaskDocument {
  TaskSpec spec;
  std::vector<int32_t> tokens;  // no BOS (streams add it: stream position = index + 1)
  TokenSpan fact;               // the fact asked about (facts: the first supporting fact)
  std::vector<TokenSpan> statements;  // every inserted statement, the fact included, in order
  TokenSpan question;           // "\n" + question, up to the answer
  TokenSpan answer;             // the scored tokens: [question.end, tokens.size())
  int64_t distance_tokens = 0;  // question.begin - fact.end
  std::string answer_text;      // what the answer tokens decode to, e.g. " 71432"
  std::vector<FillerSlice> filler;

  double distance_windows(int window) const { return double(distance_tokens) / double(window); }
  // The share of the haystack (everything but the fact, question and answer) before the fact.
  double depth() const;
};

// The tokens of `doc` outside every statement, the question and the answer: the filler, in
// order (the concatenation of its FillerSlices' corpus tokens).
std::vector<int32_t> filler_tokens(const TaskDocument& doc);

class TaskGenerator {
 public:
  // Filler comes from `filler`'s documents (any split); `tokenizer` must be the one that made
  // them (its hash is checked against the corpus manifest).
  TaskGenerator(std::shared_ptr<const TokenDataset> filler, std::shared_ptr<const Tokenizer> tokenizer);
  // `split` of a prepared directory with its tokenizer.model.
  static std::shared_ptr<const TaskGenerator> open(const std::filesystem::path& prepared_dir, Split split);

  // std::invalid_argument naming the field when the spec cannot be met (a distance too short
  // for the statements that must lie in it, a length too short for the rest).
  TaskDocument make(const TaskSpec& spec) const;

  // The spec of an eval grid cell: `shape` (kind, digits, facts, seed) for a document exactly
  // `length` tokens long with the fact at `depth` (0: at the start, 1: right before the
  // question). The distance is the same for every seed: round((1 - depth) * (length -
  // reserve)), at least min_distance; the prefix takes up the rest.
  struct Bounds {
    int64_t reserve = 0;       // the most tokens the fact, question and answer take for any content
    int64_t min_distance = 0;  // the fewest that must lie between fact and question (qa2's second fact)
  };
  Bounds bounds(const TaskSpec& shape) const { return {reserve_tokens(shape), min_distance_tokens(shape)}; }
  TaskSpec grid_spec(const TaskSpec& shape, int64_t length, double depth) const {
    return grid_spec(shape, bounds(shape), length, depth);
  }
  // The same with the shape's bounds computed once (they encode every content of the shape).
  static TaskSpec grid_spec(const TaskSpec& shape, const Bounds& bounds, int64_t length, double depth);
  int64_t reserve_tokens(const TaskSpec& shape) const;
  int64_t min_distance_tokens(const TaskSpec& shape) const;

  const TokenDataset& corpus() const { return *filler_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // Tokenizer hash, split, documents and tokens: what a document depends on besides its spec.
  std::string identity() const;

 private:
  void check_spec(const TaskSpec& spec) const;
  // Appends `count` filler tokens from seeded (document, offset) draws.
  void draw_filler(int64_t count, uint64_t seed, std::vector<int32_t>& out, std::vector<FillerSlice>& slices) const;
  void copy_checked(int64_t local_doc, int64_t begin, int64_t count, int32_t* out) const;
  int64_t encoded_size(const std::string& text) const;

  std::shared_ptr<const TokenDataset> filler_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::vector<int64_t> eligible_;  // split-local documents with at least one token
  // Filler documents are verified (token ids, checksum) the first time one is drawn; random
  // slices would otherwise be read unchecked. Shared by the streams' threads, hence atomic.
  std::unique_ptr<std::atomic<uint8_t>[]> verified_;
};

}  // namespace brt::data
