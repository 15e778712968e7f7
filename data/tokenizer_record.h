// How a prepared directory's tokenizer.model was made (tokenizer.tsv, docs/data-format.md):
// trained by prepare with these settings on this corpus, or given with --tokenizer. prepare
// compares it with what a rerun asks for, so a changed --vocab, --model-type or corpus is
// refused (or retrained with --retrain) instead of silently reusing the old tokenizer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/corpus/corpus.h"
#include "data/tokenizer.h"

namespace brt::data {

struct TokenizerRecord {
  std::string hash;     // of the tokenizer.model it describes
  std::string source;   // "trained" or "given"
  // source "trained": the settings and the documents it was trained on.
  std::string model_type;
  int vocab = 0;  // as asked for (the model may hold fewer pieces)
  uint64_t max_sentences = 0;
  int64_t max_training_bytes = 0;
  uint32_t seed = 0;
  std::string corpus_hash;  // corpus_identity() of the training documents
  int64_t corpus_documents = 0, corpus_bytes = 0;
  // source "given": the --tokenizer file.
  std::string given_path;
};

// The training documents' identity: split, file name and size of each (not the folder they
// are in, so a moved corpus is the same corpus; an added, removed, renamed or resized
// document changes it). Sets documents and bytes too.
std::string corpus_identity(const std::vector<CorpusFile>& files, int64_t* documents, int64_t* bytes);

// What prepare would record for training a tokenizer on `training_files` with `options`.
TokenizerRecord trained_record(const TokenizerTrainOptions& options, const std::vector<CorpusFile>& training_files);

// One line per setting that differs ("vocab 4096 -> 512"), the hash ignored; empty when equal.
std::vector<std::string> record_differences(const TokenizerRecord& stored, const TokenizerRecord& wanted);
// A phrase for messages: "a bpe tokenizer of vocab 4096 trained on 6 documents (12 kB)".
std::string describe_record(const TokenizerRecord& record);

// What one prepare run asks of the tokenizer in `dir` (= PrepareOptions' fields).
struct TokenizerRequest {
  std::filesystem::path dir;
  std::filesystem::path given;  // --tokenizer FILE, or empty: train (or reuse what was trained)
  bool retrain = false;
  TokenizerTrainOptions train;
  BadDocumentPolicy bad_documents = BadDocumentPolicy::fail;
  bool show_progress = false;
};

// World rank 0 of prepare: leaves in dir/tokenizer.model the tokenizer the request asks for,
// with its record. A given model replaces a different stored one; with none given, a stored
// model whose record matches the request is reused, one made otherwise (or without a record)
// is refused — std::runtime_error naming the file and every change, nothing touched — unless
// `retrain`. Before a model is replaced, manifest.tsv and index.tsv are removed, so the
// directory never claims to be prepared with a tokenizer it no longer holds. Returns true when
// it trained one.
bool settle_tokenizer(const TokenizerRequest& request, const std::vector<CorpusFile>& files);

std::filesystem::path tokenizer_record_path(const std::filesystem::path& dir);
void write_tokenizer_record(const std::filesystem::path& dir, const TokenizerRecord& record);
// std::nullopt when absent; throws naming the file when malformed.
std::optional<TokenizerRecord> read_tokenizer_record(const std::filesystem::path& dir);

}  // namespace brt::data
