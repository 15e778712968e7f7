#include "data/dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "data/tokenizer.h"

namespace brt::data {

namespace fs = std::filesystem;

MappedFile::MappedFile(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path.string() + ": " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot stat " + path.string());
  }
  size_ = static_cast<size_t>(info.st_size);
  if (size_ > 0) {
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) {
      ::close(fd);
      throw std::runtime_error("cannot mmap " + path.string() + ": " + std::strerror(errno));
    }
    data_ = static_cast<const uint8_t*>(mapped);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::will_need(size_t offset, size_t length) const {
  if (!data_ || offset >= size_) return;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t start = offset / page * page;
  length = std::min(length + (offset - start), size_ - start);
  ::madvise(const_cast<uint8_t*>(data_) + start, length, MADV_WILLNEED);
}

namespace {

const char* const kRerun = "rerun `brt-dist prepare` with the same flags to redo it";

// tokenizer.model against the manifest: the pieces the shards' ids mean. Returns its BOS id.
int check_tokenizer_model(const fs::path& dir, const Manifest& manifest) {
  const Tokenizer tokenizer = Tokenizer::load(tokenizer_path(dir));
  if (tokenizer.hash() != manifest.tokenizer_hash) {
    throw std::runtime_error(tokenizer_path(dir).string() + " is tokenizer " + tokenizer.hash() + ", but " +
                             manifest_path(dir).string() + " says the shards were made with tokenizer " +
                             manifest.tokenizer_hash + " (the model was replaced after prepare): restore it, "
                             "or rerun `brt-dist prepare` to redo the shards");
  }
  if (tokenizer.vocab_size() != manifest.vocab_size) {
    throw std::runtime_error(manifest_path(dir).string() + " says vocab_size " + std::to_string(manifest.vocab_size) +
                             ", but " + tokenizer_path(dir).string() + " has " +
                             std::to_string(tokenizer.vocab_size()) + " pieces");
  }
  return tokenizer.bos_id();
}

std::string describe(const DocumentRecord& d) {
  return "document " + std::to_string(d.doc_id) + " (" + d.source + ")";
}

// A shard's .meta against the manifest and its own checksums, and the .bin's size against the
// .meta: everything that can be checked without reading the tokens. Returns its documents.
std::vector<DocumentRecord> checked_shard_meta(const fs::path& dir, Split split, int32_t shard,
                                               const Manifest& manifest, size_t bin_size) {
  const fs::path meta_file = shard_meta_path(dir, split, shard);
  const fs::path bin_file = shard_tokens_path(dir, split, shard);
  const auto meta = read_shard_meta(meta_file);
  if (!meta) {
    throw std::runtime_error(meta_file.string() + " is missing, but " + manifest_path(dir).string() + " lists " +
                             std::to_string(manifest.shards_per_split[static_cast<size_t>(split)]) +
                             " shards of split " + std::string(split_name(split)) + "; " + kRerun);
  }
  const auto fail = [&](const std::string& what) { throw std::runtime_error(meta_file.string() + ": " + what); };
  if (meta->tokenizer_hash != manifest.tokenizer_hash) {
    fail("made with tokenizer " + meta->tokenizer_hash + ", but " + manifest_path(dir).string() +
         " says tokenizer " + manifest.tokenizer_hash + " (shards of different prepare runs); " + kRerun);
  }
  if (meta->token_bytes != manifest.token_bytes) {
    fail("token_bytes " + std::to_string(meta->token_bytes) + ", but " + manifest_path(dir).string() + " says " +
         std::to_string(manifest.token_bytes));
  }
  if (meta->split != split || meta->shard != shard)
    fail("describes another shard (" + std::string(split_name(meta->split)) + " " + std::to_string(meta->shard) + ")");
  uint64_t chain = kFnvOffsetBasis;
  int64_t next_offset = 0;
  for (const auto& d : meta->documents) {
    if (d.checksum.empty()) {
      fail("has no per-document checksums (written by an older brt-dist prepare); " + std::string(kRerun));
    }
    if (d.token_offset != next_offset || d.tokens < 0 || !parse_hex64(d.checksum, &chain)) {
      fail("the row of " + describe(d) + " is malformed (offset " + std::to_string(d.token_offset) + ", expected " +
           std::to_string(next_offset) + "; checksum '" + d.checksum + "'); " + kRerun);
    }
    next_offset += d.tokens;
  }
  if (next_offset != meta->tokens || hex64(chain) != meta->checksum) {
    fail("its documents hold " + std::to_string(next_offset) + " tokens ending in checksum " + hex64(chain) +
         ", but it says " + std::to_string(meta->tokens) + " tokens, checksum " + meta->checksum + "; " + kRerun);
  }
  const auto want = static_cast<size_t>(meta->tokens * meta->token_bytes);
  if (bin_size != want) {
    std::string first_lost;
    for (const auto& d : meta->documents) {
      if (static_cast<size_t>((d.token_offset + d.tokens) * meta->token_bytes) > bin_size) {
        first_lost = "; " + describe(d) + " and the documents after it lie past its end";
        break;
      }
    }
    throw std::runtime_error(bin_file.string() + " is " + (bin_size < want ? "truncated" : "damaged") + ": " +
                             std::to_string(bin_size) + " bytes, but " + meta_file.filename().string() + " says " +
                             std::to_string(want) + " (" + std::to_string(meta->tokens) + " tokens of " +
                             std::to_string(meta->token_bytes) + " bytes)" + first_lost + "; " + kRerun);
  }
  return meta->documents;
}

}  // namespace

std::shared_ptr<const TokenDataset> TokenDataset::open(const fs::path& dir, Split split,
                                                       std::string_view expected_tokenizer_hash) {
  std::shared_ptr<TokenDataset> dataset(new TokenDataset());
  dataset->dir_ = dir;
  dataset->split_ = split;
  dataset->manifest_ = read_manifest(dir);
  const Manifest& manifest = dataset->manifest_;
  if (!expected_tokenizer_hash.empty()) {
    check_tokenizer_hash(manifest.tokenizer_hash, expected_tokenizer_hash,
                         "prepared corpus " + dir.string());
  }
  if (manifest.token_bytes != 2 && manifest.token_bytes != 4) {
    throw std::runtime_error(manifest_path(dir).string() + ": token_bytes must be 2 or 4");
  }
  dataset->bos_id_ = check_tokenizer_model(dir, manifest);
  for (auto& d : read_index(dir)) {
    if (d.split == split) dataset->documents_.push_back(std::move(d));
  }
  const SplitTotals totals = manifest.totals[static_cast<size_t>(split)];
  int64_t tokens = 0;
  for (const auto& d : dataset->documents_) tokens += d.tokens;
  if (static_cast<int64_t>(dataset->documents_.size()) != totals.documents || tokens != totals.tokens) {
    throw std::runtime_error(index_path(dir).string() + " holds " + std::to_string(dataset->documents_.size()) +
                             " documents (" + std::to_string(tokens) + " tokens) of split " +
                             std::string(split_name(split)) + ", but " + manifest_path(dir).string() + " says " +
                             std::to_string(totals.documents) + " (" + std::to_string(totals.tokens) + " tokens); " +
                             kRerun);
  }
  dataset->open_shards(dir);
  return dataset;
}

// Maps the split's shards and matches every index row with its shard's .meta row, taking the
// documents' checksums from there.
void TokenDataset::open_shards(const fs::path& dir) {
  const int32_t shard_count = manifest_.shards_per_split[static_cast<size_t>(split_)];
  std::vector<std::vector<size_t>> rows_of_shard(static_cast<size_t>(std::max(0, shard_count)));
  for (size_t k = 0; k < documents_.size(); ++k) {
    const DocumentRecord& d = documents_[k];
    if (d.shard < 0 || d.shard >= shard_count) {
      throw std::runtime_error(index_path(dir).string() + ": " + describe(d) + " names shard " +
                               std::to_string(d.shard) + ", but " + manifest_path(dir).string() + " lists " +
                               std::to_string(shard_count) + " shards of split " + std::string(split_name(split_)) +
                               "; " + kRerun);
    }
    rows_of_shard[static_cast<size_t>(d.shard)].push_back(k);
  }
  chain_begin_.assign(documents_.size(), kFnvOffsetBasis);
  chain_end_.assign(documents_.size(), kFnvOffsetBasis);
  for (int32_t s = 0; s < shard_count; ++s) {
    shards_.push_back(std::make_unique<MappedFile>(shard_tokens_path(dir, split_, s)));
    const auto meta_documents = checked_shard_meta(dir, split_, s, manifest_, shards_.back()->size());
    const auto& rows = rows_of_shard[static_cast<size_t>(s)];
    uint64_t chain = kFnvOffsetBasis;
    for (size_t j = 0; j < std::max(rows.size(), meta_documents.size()); ++j) {
      const DocumentRecord* in_meta = j < meta_documents.size() ? &meta_documents[j] : nullptr;
      DocumentRecord* in_index = j < rows.size() ? &documents_[rows[j]] : nullptr;
      if (!in_meta || !in_index || in_meta->doc_id != in_index->doc_id ||
          in_meta->token_offset != in_index->token_offset || in_meta->tokens != in_index->tokens) {
        const DocumentRecord& d = in_index ? *in_index : *in_meta;
        throw std::runtime_error(index_path(dir).string() + " and " + shard_meta_path(dir, split_, s).string() +
                                 " disagree about " + describe(d) + " (index: " +
                                 (in_index ? "offset " + std::to_string(in_index->token_offset) + ", " +
                                                 std::to_string(in_index->tokens) + " tokens" : std::string("absent")) +
                                 "; .meta: " +
                                 (in_meta ? "document " + std::to_string(in_meta->doc_id) + " at offset " +
                                                std::to_string(in_meta->token_offset) + ", " +
                                                std::to_string(in_meta->tokens) + " tokens" : std::string("absent")) +
                                 "); " + kRerun);
      }
      in_index->checksum = in_meta->checksum;
      chain_begin_[rows[j]] = chain;
      parse_hex64(in_meta->checksum, &chain);  // checked_shard_meta has parsed it once
      chain_end_[rows[j]] = chain;
    }
  }
}

void TokenDataset::copy_tokens(int64_t i, int64_t begin, int64_t count, int32_t* out, DocumentCheck* check) const {
  const DocumentRecord& d = document(i);
  const uint8_t* base = shards_[static_cast<size_t>(d.shard)]->data();
  const int64_t first = d.token_offset + begin;
  if (manifest_.token_bytes == 2) {
    uint16_t value = 0;
    for (int64_t k = 0; k < count; ++k) {
      std::memcpy(&value, base + (first + k) * 2, 2);
      out[k] = value;
    }
  } else {
    std::memcpy(out, base + first * 4, static_cast<size_t>(count) * 4);
  }
  if (check == nullptr) return;
  // Unsigned: a uint32 id past INT32_MAX reads as negative.
  const auto vocab = static_cast<uint32_t>(manifest_.vocab_size);
  for (int64_t k = 0; k < count; ++k) {
    if (static_cast<uint32_t>(out[k]) >= vocab) bad_token(i, begin + k, out[k]);
  }
  verify_document(i, *check);
}

void TokenDataset::verify_document(int64_t i, DocumentCheck& check) const {
  if (check.document == i) return;  // verified whole at its first read
  // The whole document at its first read, whatever part of it is copied: a damaged document is
  // refused before any of its segments trains (hashing is far cheaper than the steps that read it).
  const DocumentRecord& d = document(i);
  const int64_t width = manifest_.token_bytes;
  const uint8_t* tokens = shards_[static_cast<size_t>(d.shard)]->data() + d.token_offset * width;
  check = {i, d.tokens, fnv1a64(tokens, static_cast<size_t>(d.tokens * width), chain_begin_[static_cast<size_t>(i)])};
  if (check.state == chain_end_[static_cast<size_t>(i)]) return;
  check.document = -1;
  const fs::path bin = shard_tokens_path(dir_, split_, d.shard);
  throw std::runtime_error(bin.string() + " is damaged: " + describe(d) + ", tokens " +
                           std::to_string(d.token_offset) + "-" + std::to_string(d.token_offset + d.tokens) +
                           " of the shard, does not match its checksum in " +
                           shard_meta_path(dir_, split_, d.shard).filename().string() + " (read " +
                           hex64(check.state) + ", expected " + hex64(chain_end_[static_cast<size_t>(i)]) + "); " +
                           kRerun);
}

void TokenDataset::bad_token(int64_t i, int64_t position, int32_t id) const {
  const DocumentRecord& d = document(i);
  throw std::runtime_error(shard_tokens_path(dir_, split_, d.shard).string() + " is damaged: " + describe(d) +
                           " has token id " + std::to_string(static_cast<uint32_t>(id)) + " at position " +
                           std::to_string(position) + " (token " + std::to_string(d.token_offset + position) +
                           " of the shard), outside the " + std::to_string(manifest_.vocab_size) + " pieces of " +
                           tokenizer_path(dir_).string() + "; " + kRerun);
}

const DocumentRecord* TokenDataset::find_document(int64_t doc_id) const {
  // The index is in document-id order.
  const auto it = std::lower_bound(documents_.begin(), documents_.end(), doc_id,
                                   [](const DocumentRecord& d, int64_t id) { return d.doc_id < id; });
  return it != documents_.end() && it->doc_id == doc_id ? &*it : nullptr;
}

std::vector<int32_t> TokenDataset::tokens(int64_t i) const {
  std::vector<int32_t> out(static_cast<size_t>(document(i).tokens));
  DocumentCheck check;
  copy_tokens(i, 0, document(i).tokens, out.data(), &check);
  return out;
}

void TokenDataset::prefetch(int64_t i) const {
  const DocumentRecord& d = document(i);
  shards_[static_cast<size_t>(d.shard)]->will_need(static_cast<size_t>(d.token_offset * manifest_.token_bytes),
                                                   static_cast<size_t>(d.tokens * manifest_.token_bytes));
}

}  // namespace brt::data
