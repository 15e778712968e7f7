// Slice-combinable dataset checksums (docs/checkpoint-format.md §4).
//
// Ranks write arbitrary slices of a tensor (row shards, column shards), so the checksum of the
// full logical tensor must be computable from the parts without moving data. We use an additive,
// position-keyed hash: with the element's row-major flat index i and its raw bits b (zero-extended
// to 64 bits),
//     term(i, b) = fmix64(b + i * 0x9E3779B97F4A7C15)      (fmix64: MurmurHash3 finaliser)
//     checksum(set of elements) = sum of terms, mod 2^64.
// fmix64 is a bijection, so for a fixed position any change of the value changes the term and
// therefore the sum: a single damaged element is always detected, and unrelated damage collides
// with probability ~2^-64. Because the sum is commutative, each rank sums its own slice and one
// MPI_Allreduce(SUM) gives the exact checksum of the whole.
//
// To verify a part without reading the whole tensor, the leading dimension is cut into chunks of
// `rows_per_chunk` rows (about kChecksumChunkElems elements each) and one sum is stored per chunk;
// the whole-tensor checksum is the sum of the chunk sums.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "checkpoint/types.h"

namespace brt::checkpoint {

inline constexpr int64_t kChecksumChunkElems = int64_t{1} << 20;  // 4 MiB of fp32 per chunk

struct ChunkGrid {
  int64_t rows = 0;            // shape[0]
  int64_t row_elems = 1;       // product of shape[1:]
  int64_t rows_per_chunk = 1;
  int64_t n_chunks = 0;
  int64_t chunk_of_row(int64_t row) const { return row / rows_per_chunk; }
  int64_t first_row(int64_t chunk) const { return chunk * rows_per_chunk; }
  int64_t end_row(int64_t chunk) const {
    int64_t end = (chunk + 1) * rows_per_chunk;
    return end < rows ? end : rows;
  }
};

// The canonical grid for a shape (rows_per_chunk = max(1, kChecksumChunkElems / row_elems)),
// or the grid with a given rows_per_chunk (as stored in a file).
ChunkGrid canonical_chunk_grid(const Shape& shape);
ChunkGrid chunk_grid_with(const Shape& shape, int64_t rows_per_chunk);

inline uint64_t fmix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}
inline constexpr uint64_t kChecksumIndexKey = 0x9E3779B97F4A7C15ULL;
inline uint64_t checksum_term(uint64_t flat_index, uint64_t bits) {
  return fmix64(bits + flat_index * kChecksumIndexKey);
}

// Adds the terms of `slice` (whose elements are `data`, row-major, elem_size 4 or 8 bytes) of a
// tensor of `shape` to chunk_sums[chunk] (size grid.n_chunks).
void accumulate_checksums(const Shape& shape, const ChunkGrid& grid, const Slice& slice,
                          const void* data, size_t elem_size, std::span<uint64_t> chunk_sums);

uint64_t sum_of(std::span<const uint64_t> chunk_sums);

// Attributes (docs/checkpoint-format.md §4b): every root attribute's name, kind ('s' string,
// 'i' int64, 'd' float64, 'u' uint64) and value bytes hashed together, so one changed byte of
// the stored config, the step or the tokenizer hash is caught like damaged tensor data.
//   h = fmix64(len(name) + 0x9E37...); then for each 8-byte little-endian word w of
//   name, kind, value (each zero-padded to 8 bytes): h = fmix64(h ^ w) + 0x9E37...
uint64_t attribute_hash(std::string_view name, char kind, std::span<const unsigned char> bytes);
// "%016llx" of a hash (the form the checksum tables store), and its inverse (nullopt if malformed).
std::string hex64(uint64_t value);
std::optional<uint64_t> parse_hex64(std::string_view text);

}  // namespace brt::checkpoint
