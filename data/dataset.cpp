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

std::shared_ptr<const TokenDataset> TokenDataset::open(const fs::path& dir, Split split,
                                                       std::string_view expected_tokenizer_hash) {
  std::shared_ptr<TokenDataset> dataset(new TokenDataset());
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
  for (auto& d : read_index(dir)) {
    if (d.split == split) dataset->documents_.push_back(std::move(d));
  }
  const int32_t shard_count = manifest.shards_per_split[static_cast<size_t>(split)];
  for (int32_t s = 0; s < shard_count; ++s) {
    dataset->shards_.push_back(std::make_unique<MappedFile>(shard_tokens_path(dir, split, s)));
  }
  for (const auto& d : dataset->documents_) {
    const auto end_byte = static_cast<size_t>((d.token_offset + d.tokens) * manifest.token_bytes);
    if (d.shard < 0 || d.shard >= shard_count || end_byte > dataset->shards_[static_cast<size_t>(d.shard)]->size()) {
      throw std::runtime_error(index_path(dir).string() + ": document " + std::to_string(d.doc_id) +
                               " lies outside its shard " + std::to_string(d.shard));
    }
  }
  return dataset;
}

void TokenDataset::copy_tokens(int64_t i, int64_t begin, int64_t count, int32_t* out) const {
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
}

const DocumentRecord* TokenDataset::find_document(int64_t doc_id) const {
  // The index is in document-id order.
  const auto it = std::lower_bound(documents_.begin(), documents_.end(), doc_id,
                                   [](const DocumentRecord& d, int64_t id) { return d.doc_id < id; });
  return it != documents_.end() && it->doc_id == doc_id ? &*it : nullptr;
}

std::vector<int32_t> TokenDataset::tokens(int64_t i) const {
  std::vector<int32_t> out(static_cast<size_t>(document(i).tokens));
  copy_tokens(i, 0, document(i).tokens, out.data());
  return out;
}

void TokenDataset::prefetch(int64_t i) const {
  const DocumentRecord& d = document(i);
  shards_[static_cast<size_t>(d.shard)]->will_need(static_cast<size_t>(d.token_offset * manifest_.token_bytes),
                                                   static_cast<size_t>(d.tokens * manifest_.token_bytes));
}

}  // namespace brt::data
