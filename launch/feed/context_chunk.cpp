#include "launch/feed/context_chunk.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace brt::launch {

namespace {

template <typename V>
void copy_chunk(const V& full, int streams, int seq, int begin, int len, V& out) {
  for (int b = 0; b < streams; ++b) {
    const auto from = full.begin() + (ptrdiff_t(b) * seq + begin);
    std::copy(from, from + len, out.begin() + ptrdiff_t(b) * len);
  }
}

class ContextChunkSource final : public BatchSource {
 public:
  ContextChunkSource(std::unique_ptr<BatchSource> segments, int rank, int size)
      : segments_(std::move(segments)), rank_(rank), size_(size) {}
  void next(data::Batch& chunk) override {
    segments_->next(segment_);
    take_chunk(segment_, rank_, size_, chunk);
  }
  std::string describe() const override { return segments_->describe(); }
  std::vector<int64_t> cursor() const override { return segments_->cursor(); }
  void restore(const std::vector<int64_t>& cursor) override { segments_->restore(cursor); }
  std::vector<int64_t> merge_cursors(const std::vector<std::vector<int64_t>>& per_rank) const override {
    return segments_->merge_cursors(per_rank);
  }
  void restore_global(const std::vector<int64_t>& global, int data_rank, int data_size) override {
    segments_->restore_global(global, data_rank, data_size);
  }
  std::string tokenizer_hash() const override { return segments_->tokenizer_hash(); }

 private:
  std::unique_ptr<BatchSource> segments_;
  int rank_, size_;
  data::Batch segment_;  // the whole segment, reused
};

}  // namespace

std::unique_ptr<BatchSource> context_chunks(std::unique_ptr<BatchSource> segments, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument("context_chunks: chunk " + std::to_string(rank) + " of " + std::to_string(size));
  if (size == 1) return segments;
  return std::make_unique<ContextChunkSource>(std::move(segments), rank, size);
}

void take_chunk(const data::Batch& full, int rank, int size, data::Batch& chunk) {
  if (size < 1 || rank < 0 || rank >= size || full.seq % size != 0)
    throw std::invalid_argument("take_chunk: chunk " + std::to_string(rank) + " of " + std::to_string(size) +
                                " does not divide a segment of " + std::to_string(full.seq) + " tokens");
  const int len = full.seq / size, begin = rank * len, B = full.streams;
  chunk.resize(B, len);
  copy_chunk(full.inputs, B, full.seq, begin, len, chunk.inputs);
  copy_chunk(full.targets, B, full.seq, begin, len, chunk.targets);
  copy_chunk(full.mask, B, full.seq, begin, len, chunk.mask);
  if (full.position.size() == full.inputs.size())  // sources that track positions
    copy_chunk(full.position, B, full.seq, begin, len, chunk.position);
  chunk.doc_start = full.doc_start;
  if (!full.doc_id.empty()) chunk.doc_id = full.doc_id;
  if (!full.task.empty()) chunk.task = full.task;
}

}  // namespace brt::launch
