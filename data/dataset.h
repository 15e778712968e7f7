// Read side of a prepared corpus: the documents of one split with their tokens served from
// memory-mapped shards (no copies, the OS pages them in), checked against the tokenizer hash.
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

class TokenDataset {
 public:
  // Opens `split` of the prepared directory. When expected_tokenizer_hash is non-empty it must
  // equal the manifest's (else std::runtime_error naming the directory).
  static std::shared_ptr<const TokenDataset> open(const std::filesystem::path& prepared_dir, Split split,
                                                  std::string_view expected_tokenizer_hash = {});

  Split split() const { return split_; }
  const Manifest& manifest() const { return manifest_; }
  const std::string& tokenizer_hash() const { return manifest_.tokenizer_hash; }
  int vocab_size() const { return manifest_.vocab_size; }
  SplitTotals totals() const { return manifest_.totals[static_cast<size_t>(split_)]; }

  // Documents of the split in document-id order; index i is the split-local document index.
  int64_t num_documents() const { return static_cast<int64_t>(documents_.size()); }
  const DocumentRecord& document(int64_t i) const { return documents_[static_cast<size_t>(i)]; }
  // The record of a global document id (Batch::doc_id), or nullptr if it is not in this split.
  const DocumentRecord* find_document(int64_t doc_id) const;
  // Copies tokens [begin, begin + count) of document i into out (the range must be valid).
  void copy_tokens(int64_t i, int64_t begin, int64_t count, int32_t* out) const;
  std::vector<int32_t> tokens(int64_t i) const;
  // Hint that document i will be read soon (madvise WILLNEED).
  void prefetch(int64_t i) const;

 private:
  TokenDataset() = default;
  Split split_ = Split::train;
  Manifest manifest_;
  std::vector<DocumentRecord> documents_;
  std::vector<std::unique_ptr<MappedFile>> shards_;
};

}  // namespace brt::data
