// Read side of a prepared corpus: the documents of one split with their tokens served from
// memory-mapped shards (no copies, the OS pages them in). Opening cross-checks the manifest,
// index, every shard's .meta and size, and tokenizer.model; reading verifies each document's
// token ids and checksum as a stream reads it (docs/data-format.md, "Verification").
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/shard_format.h"

namespace brt::data {

// A read-only memory map of a whole file.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Asks the kernel to start reading [offset, offset + length) in the background.
  void will_need(size_t offset, size_t length) const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Verifies one document as it is read front to back (streams read a document segment by
// segment, in order): the bytes copied out are hashed as they go, so checking costs no second
// pass over the data, and when the document's last byte has been hashed the state must equal
// its checksum in the shard's .meta. One per reader (a stream); never shared between threads.
struct DocumentCheck {
  int64_t document = -1;  // split-local index being read; -1: none
  int64_t hashed = 0;     // tokens [0, hashed) of it are hashed
  uint64_t state = 0;     // the chained FNV-1a state after them
};

class TokenDataset {
 public:
  // Opens `split` of the prepared directory, after checking that manifest.tsv, index.tsv,
  // tokenizer.model and every shard's .meta and .bin size agree (std::runtime_error naming the
  // file that disagrees, and the document where there is one). When expected_tokenizer_hash
  // is non-empty it must equal the manifest's.
  static std::shared_ptr<const TokenDataset> open(const std::filesystem::path& prepared_dir, Split split,
                                                  std::string_view expected_tokenizer_hash = {});

  Split split() const { return split_; }
  const Manifest& manifest() const { return manifest_; }
  const std::string& tokenizer_hash() const { return manifest_.tokenizer_hash; }
  int vocab_size() const { return manifest_.vocab_size; }
  int bos_id() const { return bos_id_; }
  SplitTotals totals() const { return manifest_.totals[static_cast<size_t>(split_)]; }

  // Documents of the split in document-id order; index i is the split-local document index.
  int64_t num_documents() const { return static_cast<int64_t>(documents_.size()); }
  const DocumentRecord& document(int64_t i) const { return documents_[static_cast<size_t>(i)]; }
  // The record of a global document id (Batch::doc_id), or nullptr if it is not in this split.
  const DocumentRecord* find_document(int64_t doc_id) const;
  // Copies tokens [begin, begin + count) of document i into out (the range must be valid).
  // With `check`, every id must lie in the tokenizer's vocabulary and the whole document's
  // checksum is verified at its first read, whichever part is copied (a std::runtime_error
  // naming the shard, the document and the position otherwise): no segment of a damaged
  // document reaches the model. Without `check` nothing is verified (benchmarks).
  void copy_tokens(int64_t i, int64_t begin, int64_t count, int32_t* out,
                   DocumentCheck* check = nullptr) const;
  // The whole document, verified.
  std::vector<int32_t> tokens(int64_t i) const;
  // Hint that document i will be read soon (madvise WILLNEED).
  void prefetch(int64_t i) const;

 private:
  TokenDataset() = default;
  void open_shards(const std::filesystem::path& dir);
  void verify_document(int64_t i, DocumentCheck& check) const;
  [[noreturn]] void bad_token(int64_t i, int64_t position, int32_t id) const;

  std::filesystem::path dir_;
  Split split_ = Split::train;
  Manifest manifest_;
  int bos_id_ = 1;
  std::vector<DocumentRecord> documents_;  // with their checksums from the .meta files
  // Per document: the chained FNV-1a state before its first byte and after its last.
  std::vector<uint64_t> chain_begin_, chain_end_;
  std::vector<std::unique_ptr<MappedFile>> shards_;
};

}  // namespace brt::data
