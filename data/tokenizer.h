// SentencePiece tokenizer: train (BPE or unigram) or load a .model, encode
// and decode with an exact text -> ids -> text round trip, and a hash that shards and
// checkpoints record so that a mismatch is an error rather than silent garbage.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus/corpus.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace brt::data {

struct TokenizerTrainOptions {
  int vocab_size = 4096;
  std::string model_type = "bpe";  // "bpe" or "unigram"
  // Sampling keeps training to seconds on book corpora: at most this many lines (reservoir
  // sampled by SentencePiece) drawn from at most max_training_bytes of documents, picked in a
  // seeded random order.
  uint64_t max_sentences = 100000;
  int64_t max_training_bytes = 64ll << 20;
  int threads = 2;
  uint32_t seed = 1234;
  bool verbose = false;  // SentencePiece's INFO log (hundreds of lines)
};

// The message for a failed SentencePiece training: a vocabulary below what the corpus needs is
// said in brt-dist's terms (--vocab, with the smallest size that works), anything else as
// SentencePiece reported it.
std::string training_failure_message(const std::string& sentencepiece_status, int vocab_size);

class Tokenizer {
 public:
  // Loads an existing SentencePiece .model file; throws naming the file.
  static Tokenizer load(const std::filesystem::path& model_file);
  static Tokenizer from_serialized(std::string serialized_model_proto);
  // Trains on the given documents (already normalised text). Trainer settings make the round
  // trip exact: identity normalisation, no dummy prefix, whitespace kept, byte fallback (so no
  // <unk>), digits split, whitespace-only pieces allowed, "\n" a user-defined piece.
  static Tokenizer train(const std::vector<std::string>& documents,
                         const TokenizerTrainOptions& options);
  // Picks training documents from `files` (seeded order, up to max_training_bytes; bad
  // documents handled by `policy`) and trains.
  static Tokenizer train_on_files(const std::vector<CorpusFile>& files,
                                  const TokenizerTrainOptions& options, BadDocumentPolicy policy);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Exact: decode(encode(t)) == t for any valid UTF-8 t (including the literal U+2581 "▁",
  // which SentencePiece would otherwise decode as a space: it is emitted as byte pieces).
  // Thread-safe (const).
  std::vector<int32_t> encode(std::string_view text) const;
  void encode_append(std::string_view text, std::vector<int32_t>& ids) const;
  std::string decode(std::span<const int32_t> ids) const;
  // SentencePiece applied line by line, as spm_encode does (same U+2581 handling): the
  // reference that encode() must match id for id; several times slower.
  std::vector<int32_t> encode_reference(std::string_view text) const;
  void encode_reference_append(std::string_view text, std::vector<int32_t>& ids) const;

  int vocab_size() const;
  int bos_id() const;  // 1
  int eos_id() const;  // 2
  int unk_id() const;  // 0
  // 16 hex digits: FNV-1a 64 of the serialized model proto.
  const std::string& hash() const { return hash_; }
  const std::string& serialized() const { return serialized_; }
  // Writes the .model atomically (temporary file + rename).
  void save(const std::filesystem::path& model_file) const;

 private:
  Tokenizer() = default;
  void encode_piece(std::string_view text, std::vector<int>& scratch, std::vector<int32_t>& ids) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::string serialized_;
  std::string hash_;
  std::vector<int32_t> literal_space_marker_ids_;  // byte pieces of U+2581
};

// Throws std::runtime_error naming `what` (e.g. the shard directory or checkpoint) when the
// hashes differ.
void check_tokenizer_hash(std::string_view expected, std::string_view actual,
                          std::string_view what);

}  // namespace brt::data
