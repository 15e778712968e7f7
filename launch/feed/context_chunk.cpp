#include "launch/feed/context_chunk.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace brt::launch {

namespace {

template <typename V>
void copy_chunk(const V& full, int streams, int seq, int begin, int len, V& out) {
  for (int b = 0; b < streams; ++b) {
    const auto from = full.begin() + (ptrdiff_t(b) * seq + begin);
    std::copy(from, from + len, out.begin() + ptrdiff_t(b) * len);
  }
}

}  // namespace

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
