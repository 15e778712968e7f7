#include "data/tokenizer.h"

#include "data/corpus/corpus_formats.h"
#include "data/output_file.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <regex>
#include <stdexcept>
#include <unordered_map>

// Exported by libsentencepiece but not declared in its public headers: the trainer logs
// hundreds of INFO lines otherwise.
namespace sentencepiece::logging {
int GetMinLogLevel();
void SetMinLogLevel(int level);
}  // namespace sentencepiece::logging

namespace brt::data {

namespace {

constexpr std::string_view kLiteralSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's "▁"

// Feeds documents to the SentencePiece trainer line by line (without the newline; "\n" is a
// user-defined piece, so it needs no statistics). Empty lines are skipped.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>& documents) : documents_(documents) {
    advance_to_line();
  }
  bool done() const override { return doc_ >= documents_.size(); }
  void Next() override {
    pos_ = end_ + 1;
    advance_to_line();
  }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void advance_to_line() {
    while (doc_ < documents_.size()) {
      const std::string& doc = documents_[doc_];
      while (pos_ < doc.size()) {
        end_ = doc.find('\n', pos_);
        if (end_ == std::string::npos) end_ = doc.size();
        if (end_ > pos_) {
          line_.assign(doc, pos_, end_ - pos_);
          return;
        }
        pos_ = end_ + 1;
      }
      ++doc_;
      pos_ = 0;
    }
  }

  const std::vector<std::string>& documents_;
  size_t doc_ = 0, pos_ = 0, end_ = 0;
  std::string line_;
};

}  // namespace

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_serialized(std::string serialized_model_proto) {
  Tokenizer tokenizer;
  tokenizer.processor_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = tokenizer.processor_->LoadFromSerializedProto(serialized_model_proto);
  if (!status.ok()) throw std::runtime_error("cannot load SentencePiece model: " + status.ToString());
  tokenizer.serialized_ = std::move(serialized_model_proto);
  tokenizer.hash_ = hex64(fnv1a64(tokenizer.serialized_.data(), tokenizer.serialized_.size()));
  for (char byte : kLiteralSpaceMarker) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", static_cast<unsigned>(static_cast<uint8_t>(byte)));
    const int id = tokenizer.processor_->PieceToId(piece);
    // Without byte pieces a literal U+2581 cannot round-trip; note it by leaving this empty.
    if (id == tokenizer.processor_->unk_id()) {
      tokenizer.literal_space_marker_ids_.clear();
      break;
    }
    tokenizer.literal_space_marker_ids_.push_back(id);
  }
  return tokenizer;
}

Tokenizer Tokenizer::load(const std::filesystem::path& model_file) {
  try {
    return from_serialized(read_file_bytes(model_file));
  } catch (const std::exception& error) {
    throw std::runtime_error("tokenizer " + model_file.string() + ": " + error.what());
  }
}

Tokenizer Tokenizer::train(const std::vector<std::string>& documents,
                           const TokenizerTrainOptions& options) {
  if (options.model_type != "bpe" && options.model_type != "unigram") {
    throw std::runtime_error("tokenizer model_type must be bpe or unigram, not '" +
                             options.model_type + "'");
  }
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", options.model_type},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      {"byte_fallback", "true"},
      {"split_digits", "true"},
      {"allow_whitespace_only_pieces", "true"},
      {"user_defined_symbols", "\n"},
      {"character_coverage", "1.0"},
      {"max_sentence_length", "65536"},
      {"input_sentence_size", std::to_string(options.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(std::max(1, options.threads))},
      {"hard_vocab_limit", "false"},
  };
  LineIterator lines(documents);
  if (lines.done()) throw std::runtime_error("tokenizer training: no text to train on");
  // The trainer's sampling and shuffling draw from SentencePiece's own generator.
  sentencepiece::SetRandomGeneratorSeed(options.seed);
  const int previous_log_level = sentencepiece::logging::GetMinLogLevel();
  sentencepiece::logging::SetMinLogLevel(options.verbose ? 0 : 1);  // 0 INFO, 1 WARNING
  std::string serialized;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &serialized);
  sentencepiece::logging::SetMinLogLevel(previous_log_level);
  if (!status.ok()) throw std::runtime_error(training_failure_message(status.ToString(), options.vocab_size));
  return from_serialized(std::move(serialized));
}

std::string training_failure_message(const std::string& sentencepiece_status, int vocab_size) {
  // SentencePiece's own advice names its flags (--character_coverage), which brt-dist does not
  // have: every character is kept (character_coverage = 1, with byte fallback), so the one fix
  // is a vocabulary at least as large as the pieces the corpus requires.
  static const std::regex kTooSmall(R"(Vocabulary size is smaller than required_chars\. (\d+) vs (\d+))");
  std::smatch m;
  if (std::regex_search(sentencepiece_status, m, kTooSmall))
    return "the tokenizer's vocabulary (--vocab / model.vocab = " + std::to_string(vocab_size) +
           ") is smaller than this corpus needs: " + m[2].str() +
           " pieces, its distinct characters (every one is kept) and the control pieces; use --vocab " + m[2].str() +
           " or more";
  return "SentencePiece training failed: " + sentencepiece_status;
}

Tokenizer Tokenizer::train_on_files(const std::vector<CorpusFile>& files,
                                    const TokenizerTrainOptions& options,
                                    BadDocumentPolicy policy) {
  std::vector<size_t> order(files.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(options.seed);  // engine output is fully specified by the standard
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  std::vector<std::string> documents;
  int64_t bytes = 0;
  DocumentReader reader;  // records of a JSONL file, cuts of a long text (data/corpus/corpus_formats.h)
  for (size_t index : order) {
    if (bytes >= options.max_training_bytes) break;
    auto text = load_document(files[index], policy, reader);
    if (!text) continue;
    bytes += static_cast<int64_t>(text->size());
    documents.push_back(std::move(*text));
  }
  return train(documents, options);
}

void Tokenizer::encode_piece(std::string_view text, std::vector<int>& scratch,
                             std::vector<int32_t>& ids) const {
  const auto status = processor_->Encode(text, &scratch);
  if (!status.ok()) throw std::runtime_error("SentencePiece encode failed: " + status.ToString());
  ids.insert(ids.end(), scratch.begin(), scratch.end());
}

void Tokenizer::encode_reference_append(std::string_view text, std::vector<int32_t>& ids) const {
  std::vector<int> scratch;
  while (!text.empty()) {
    const size_t marker = literal_space_marker_ids_.empty() ? std::string_view::npos : text.find(kLiteralSpaceMarker);
    const size_t newline = text.find('\n');
    const size_t cut = std::min(marker, newline == std::string_view::npos ? newline : newline + 1);
    if (cut == std::string_view::npos) {
      encode_piece(text, scratch, ids);
      return;
    }
    if (cut > 0) encode_piece(text.substr(0, cut), scratch, ids);
    text.remove_prefix(cut);
    if (cut == marker) {
      ids.insert(ids.end(), literal_space_marker_ids_.begin(), literal_space_marker_ids_.end());
      text.remove_prefix(kLiteralSpaceMarker.size());
    }
  }
}

std::vector<int32_t> Tokenizer::encode_reference(std::string_view text) const {
  std::vector<int32_t> ids;
  encode_reference_append(text, ids);
  return ids;
}

// Word-level encoding with a cache. The trainer only forms pieces inside SentencePiece's
// "words" (a run of spaces followed by non-spaces; split_by_whitespace with whitespace-only
// pieces allowed) and "\n" is an atomic user-defined piece, so no piece crosses a word
// boundary and BPE merges (or unigram's Viterbi path) on the whole text decompose into
// independent runs on each word. Encoding each distinct word once therefore gives the same ids
// as SentencePiece on the whole text (tests check this against encode_reference) several
// times faster, since a book repeats its words.
void Tokenizer::encode_append(std::string_view text, std::vector<int32_t>& ids) const {
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;  // word -> ids span
  std::vector<int32_t> cached_ids;
  std::vector<int> scratch;
  size_t start = 0;
  const auto flush = [&](size_t end) {
    if (end == start) return;
    const std::string_view word = text.substr(start, end - start);
    auto [entry, inserted] = cache.try_emplace(word);
    if (inserted) {
      const auto first = static_cast<uint32_t>(cached_ids.size());
      encode_piece(word, scratch, cached_ids);
      entry->second = {first, static_cast<uint32_t>(cached_ids.size()) - first};
    }
    const auto begin = cached_ids.begin() + entry->second.first;
    ids.insert(ids.end(), begin, begin + entry->second.second);
    start = end;
  };
  const bool escape_markers = !literal_space_marker_ids_.empty();
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') {
      flush(i);
      flush(i + 1);
      ++i;
    } else if (c == ' ') {
      if (i > start && text[i - 1] != ' ') flush(i);
      ++i;
    } else if (escape_markers && c == kLiteralSpaceMarker[0] && text.substr(i, 3) == kLiteralSpaceMarker) {
      // SentencePiece decodes U+2581 as a space; its byte pieces decode verbatim.
      flush(i);
      ids.insert(ids.end(), literal_space_marker_ids_.begin(), literal_space_marker_ids_.end());
      i += kLiteralSpaceMarker.size();
      start = i;
    } else {
      ++i;
    }
  }
  flush(text.size());
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  encode_append(text, ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  const std::vector<int> piece_ids(ids.begin(), ids.end());
  std::string text;
  const auto status = processor_->Decode(piece_ids, &text);
  if (!status.ok()) throw std::runtime_error("SentencePiece decode failed: " + status.ToString());
  return text;
}

int Tokenizer::vocab_size() const { return processor_->GetPieceSize(); }
int Tokenizer::bos_id() const { return processor_->bos_id(); }
int Tokenizer::eos_id() const { return processor_->eos_id(); }
int Tokenizer::unk_id() const { return processor_->unk_id(); }

void Tokenizer::save(const std::filesystem::path& model_file) const {
  write_file_atomically(model_file, serialized_);  // checked, through a .tmp (data/output_file.h)
}

void check_tokenizer_hash(std::string_view expected, std::string_view actual,
                          std::string_view what) {
  if (expected != actual) {
    throw std::runtime_error(std::string(what) + " was made with tokenizer " +
                             std::string(expected) + " but the tokenizer in use is " +
                             std::string(actual));
  }
}

}  // namespace brt::data
