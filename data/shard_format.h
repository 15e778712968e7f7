// On-disk format of a prepared corpus (docs/data-format.md): token shards (raw little-endian
// uint16 or uint32), one text .meta per shard that doubles as its completion marker, a
// document index and a manifest.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/corpus/text.h"

namespace brt::data {

inline constexpr int kShardFormatVersion = 1;

// One document of the prepared corpus (a row of index.tsv).
struct DocumentRecord {
  int64_t doc_id = 0;  // position in the canonical corpus order (split, path)
  Split split = Split::train;
  int32_t shard = 0;         // shard number within the split
  int64_t token_offset = 0;  // first token within the shard
  int64_t tokens = 0;
  int64_t bytes = 0;  // UTF-8 bytes of the normalised text
  int64_t words = 0;  // whitespace-separated words (PG19 word-level perplexity)
  std::string source;  // the file it came from
  // FNV-1a 64 (hex) of the shard's bytes from its start through this document's last token:
  // the shard's checksum chained document by document, so that a reader can verify each
  // document as it streams it (docs/data-format.md, "Verification"). From the .meta; empty in
  // index.tsv rows and in .meta files of older prepares.
  std::string checksum;
};

struct ShardMeta {
  std::string tokenizer_hash;
  int token_bytes = 2;
  Split split = Split::train;
  int32_t shard = 0;
  std::string plan_hash;  // hash of the documents assigned to this shard (ids, paths, sizes, times)
  int64_t tokens = 0;
  std::string checksum;  // FNV-1a 64 of the .bin file's bytes
  std::vector<DocumentRecord> documents;
  std::vector<std::pair<int64_t, std::string>> skipped;  // (doc_id, source) of bad documents
};

struct SplitTotals {
  int64_t documents = 0, tokens = 0, bytes = 0, words = 0;
};

struct Manifest {
  std::string tokenizer_hash;
  int vocab_size = 0;
  int token_bytes = 2;
  std::vector<int32_t> shards_per_split = std::vector<int32_t>(kNumSplits, 0);
  std::vector<SplitTotals> totals = std::vector<SplitTotals>(kNumSplits);
};

// Paths inside a prepared directory.
std::filesystem::path shard_tokens_path(const std::filesystem::path& dir, Split split, int32_t shard);
std::filesystem::path shard_meta_path(const std::filesystem::path& dir, Split split, int32_t shard);
std::filesystem::path manifest_path(const std::filesystem::path& dir);
std::filesystem::path index_path(const std::filesystem::path& dir);
std::filesystem::path tokenizer_path(const std::filesystem::path& dir);

// Atomic writes (temporary file + rename), so a crash never leaves a half-written marker.
void write_text_file_atomically(const std::filesystem::path& path, const std::string& text);
void write_shard_meta(const std::filesystem::path& path, const ShardMeta& meta);
// std::nullopt when the file is absent; throws naming the file (and line) when it is malformed.
std::optional<ShardMeta> read_shard_meta(const std::filesystem::path& path);

void write_manifest(const std::filesystem::path& dir, const Manifest& manifest);
Manifest read_manifest(const std::filesystem::path& dir);
void write_index(const std::filesystem::path& dir, const std::vector<DocumentRecord>& documents);
// Throws naming index.tsv, the line and (when it can be read) the document of a malformed row.
std::vector<DocumentRecord> read_index(const std::filesystem::path& dir);

// FNV-1a 64 of a whole file (hex); throws naming the file if it cannot be read.
std::string checksum_file(const std::filesystem::path& path);

}  // namespace brt::data
