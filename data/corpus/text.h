// Text primitives shared by the corpus reader, the tokenizer and the shard writer: UTF-8
// validation, the (minimal) normalisation every document gets, byte/word counts for
// bits-per-byte and word-level perplexity, and a stable 64-bit hash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace brt::data {

// Corpus splits, in the fixed order used for document ids.
enum class Split { train = 0, validation = 1, test = 2 };
inline constexpr int kNumSplits = 3;
std::string_view split_name(Split split);
// Accepts "train", "validation" (or "valid"), "test"; throws std::runtime_error otherwise.
Split parse_split(std::string_view name);

// Returns true when `text` is well-formed UTF-8 (no overlongs, surrogates or code points past
// U+10FFFF). On failure, *error_offset (if given) is the byte offset of the first bad sequence.
bool is_valid_utf8(std::string_view text, size_t* error_offset = nullptr);

// The only normalisation documents receive: drop a leading UTF-8 byte-order mark and turn
// CRLF into LF. Everything else (lone CR, tabs, runs of spaces, non-ASCII) is kept verbatim so
// that byte counts and the tokenizer round trip refer to the same text.
std::string normalise_document_text(std::string raw);

struct TextStats {
  int64_t bytes = 0;  // UTF-8 bytes of the normalised text (denominator of bits/byte)
  // Whitespace-separated words, as Python's str.split() counts them (PG19's word-level
  // perplexity): runs of code points that are not Unicode whitespace.
  int64_t words = 0;
};
// `text` must be valid UTF-8.
TextStats count_text(std::string_view text);

// 64-bit FNV-1a, continuing from `state` (pass the previous result to hash in pieces). Used for
// the tokenizer hash and shard checksums: stable across platforms and runs.
inline constexpr uint64_t kFnvOffsetBasis = 14695981039346656037ull;
uint64_t fnv1a64(const void* data, size_t size, uint64_t state = kFnvOffsetBasis);
// 16 lowercase hex digits.
std::string hex64(uint64_t value);
// The inverse of hex64 (exactly 16 hex digits, either case); false when `text` is not that.
bool parse_hex64(std::string_view text, uint64_t* value);

}  // namespace brt::data
