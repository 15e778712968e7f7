#include "checkpoint/checksum.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace brt::checkpoint {
namespace {

// Sum of terms over n contiguous elements whose first flat index is `first`. Written as a plain
// counted loop so the compiler vectorises it (AVX-512 has 64-bit multiplies).
template <typename Bits>
uint64_t line_sum(const Bits* values, int64_t n, uint64_t first) {
  // key = (first + k) * kChecksumIndexKey, kept as an induction variable (one multiply fewer
  // per element than checksum_term; same value mod 2^64).
  uint64_t sum = 0;
  uint64_t key = first * kChecksumIndexKey;
  for (int64_t k = 0; k < n; ++k) {
    sum += fmix64(static_cast<uint64_t>(values[k]) + key);
    key += kChecksumIndexKey;
  }
  return sum;
}

uint64_t line_sum_bytes(const unsigned char* bytes, size_t elem_size, int64_t n, uint64_t first) {
  // The buffers come from std::vector<T> / spans of T, so they are aligned for T.
  if (elem_size == 4) return line_sum(reinterpret_cast<const uint32_t*>(bytes), n, first);
  return line_sum(reinterpret_cast<const uint64_t*>(bytes), n, first);
}

}  // namespace

ChunkGrid chunk_grid_with(const Shape& shape, int64_t rows_per_chunk) {
  if (shape.empty()) throw std::invalid_argument("checkpoint: tensors need rank >= 1");
  if (rows_per_chunk < 1) throw std::invalid_argument("checkpoint: rows_per_chunk must be >= 1");
  ChunkGrid grid;
  grid.rows = shape[0];
  grid.row_elems = 1;
  for (size_t d = 1; d < shape.size(); ++d) grid.row_elems *= shape[d];
  grid.rows_per_chunk = rows_per_chunk;
  grid.n_chunks = (grid.rows + rows_per_chunk - 1) / rows_per_chunk;
  return grid;
}

ChunkGrid canonical_chunk_grid(const Shape& shape) {
  if (shape.empty()) throw std::invalid_argument("checkpoint: tensors need rank >= 1");
  int64_t row_elems = 1;
  for (size_t d = 1; d < shape.size(); ++d) row_elems *= shape[d];
  int64_t rows_per_chunk = row_elems > 0 ? kChecksumChunkElems / row_elems : kChecksumChunkElems;
  return chunk_grid_with(shape, rows_per_chunk < 1 ? 1 : rows_per_chunk);
}

void accumulate_checksums(const Shape& shape, const ChunkGrid& grid, const Slice& slice,
                          const void* data, size_t elem_size, std::span<uint64_t> chunk_sums) {
  if (elem_size != 4 && elem_size != 8) throw std::invalid_argument("checksum: elem_size 4 or 8");
  if (static_cast<int64_t>(chunk_sums.size()) != grid.n_chunks) {
    throw std::invalid_argument("checksum: chunk_sums has the wrong size");
  }
  const int64_t numel = slice.numel();
  if (numel == 0) return;
  const size_t rank = shape.size();
  const auto* bytes = static_cast<const unsigned char*>(data);

  if (rank == 1) {
    // Rows are single elements: the one line crosses chunk boundaries.
    int64_t row = slice.start[0];
    const int64_t end = row + slice.count[0];
    while (row < end) {
      const int64_t chunk = grid.chunk_of_row(row);
      const int64_t piece_end = std::min(end, grid.end_row(chunk));
      chunk_sums[chunk] += line_sum_bytes(bytes + (row - slice.start[0]) * elem_size, elem_size,
                                          piece_end - row, static_cast<uint64_t>(row));
      row = piece_end;
    }
    return;
  }

  // Rank >= 2: walk the slice line by line (a line = the slice's extent along the last dim);
  // each line lies inside one row, hence one chunk.
  std::vector<int64_t> stride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) stride[d] = stride[d + 1] * shape[d + 1];
  std::vector<int64_t> idx(rank - 1, 0);  // odometer over dims [0, rank-1)
  const int64_t line_len = slice.count[rank - 1];
  const int64_t n_lines = numel / line_len;
  for (int64_t line = 0; line < n_lines; ++line) {
    int64_t flat = slice.start[rank - 1];
    for (size_t d = 0; d + 1 < rank; ++d) flat += (slice.start[d] + idx[d]) * stride[d];
    const int64_t chunk = grid.chunk_of_row(slice.start[0] + idx[0]);
    chunk_sums[chunk] += line_sum_bytes(bytes + line * line_len * elem_size, elem_size, line_len,
                                        static_cast<uint64_t>(flat));
    for (size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < slice.count[d]) break;
      idx[d] = 0;
    }
  }
}

namespace {
uint64_t mix_words(uint64_t h, const unsigned char* bytes, size_t n) {
  for (size_t at = 0; at < n; at += 8) {
    uint64_t word = 0;
    std::memcpy(&word, bytes + at, std::min<size_t>(8, n - at));  // little-endian host
    h = fmix64(h ^ word) + kChecksumIndexKey;
  }
  return h;
}
}  // namespace

uint64_t attribute_hash(std::string_view name, char kind, std::span<const unsigned char> bytes) {
  uint64_t h = fmix64(name.size() + kChecksumIndexKey);
  h = mix_words(h, reinterpret_cast<const unsigned char*>(name.data()), name.size());
  const unsigned char k = static_cast<unsigned char>(kind);
  h = mix_words(h, &k, 1);
  h = fmix64(h ^ bytes.size()) + kChecksumIndexKey;
  return mix_words(h, bytes.data(), bytes.size());
}

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::optional<uint64_t> parse_hex64(std::string_view text) {
  if (text.size() != 16) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return std::nullopt;
    value = value << 4 | static_cast<uint64_t>(digit);
  }
  return value;
}

uint64_t sum_of(std::span<const uint64_t> chunk_sums) {
  uint64_t total = 0;
  for (uint64_t s : chunk_sums) total += s;
  return total;
}

}  // namespace brt::checkpoint
