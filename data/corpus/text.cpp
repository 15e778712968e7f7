#include "data/corpus/text.h"

#include <stdexcept>

namespace brt::data {

std::string_view split_name(Split split) {
  switch (split) {
    case Split::train: return "train";
    case Split::validation: return "validation";
    case Split::test: return "test";
  }
  throw std::runtime_error("split_name: invalid split value");
}

Split parse_split(std::string_view name) {
  if (name == "train") return Split::train;
  if (name == "validation" || name == "valid") return Split::validation;
  if (name == "test") return Split::test;
  throw std::runtime_error("unknown split '" + std::string(name) +
                           "' (expected train, validation or test)");
}

namespace {

// Decodes one code point starting at text[i]; returns its length in bytes, or 0 when the
// sequence is malformed (RFC 3629: shortest form only, no surrogates, <= U+10FFFF).
size_t decode_utf8(std::string_view text, size_t i, uint32_t* code_point) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) {
    *code_point = b0;
    return 1;
  }
  size_t length = 0;
  uint32_t cp = 0;
  uint32_t min_cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, cp = b0 & 0x1F, min_cp = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, cp = b0 & 0x0F, min_cp = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, cp = b0 & 0x07, min_cp = 0x10000;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    const uint8_t b = byte(i + k);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  *code_point = cp;
  return length;
}

// Python's str.isspace() set (bidi class WS/B/S or category Zs), which PG19's
// `len(text.split())` word count uses.
bool is_unicode_space(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace

bool is_valid_utf8(std::string_view text, size_t* error_offset) {
  size_t i = 0;
  while (i < text.size()) {
    // Fast path over ASCII runs: books are mostly ASCII.
    if (static_cast<uint8_t>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t length = decode_utf8(text, i, &cp);
    if (length == 0) {
      if (error_offset) *error_offset = i;
      return false;
    }
    i += length;
  }
  return true;
}

std::string normalise_document_text(std::string raw) {
  size_t start = 0;
  if (raw.size() >= 3 && raw.compare(0, 3, "\xEF\xBB\xBF") == 0) start = 3;
  std::string out;
  out.reserve(raw.size() - start);
  for (size_t i = start; i < raw.size(); ++i) {
    if (raw[i] == '\r' && i + 1 < raw.size() && raw[i + 1] == '\n') continue;  // CRLF -> LF
    out.push_back(raw[i]);
  }
  return out;
}

TextStats count_text(std::string_view text) {
  TextStats stats;
  stats.bytes = static_cast<int64_t>(text.size());
  bool in_word = false;
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp = 0;
    size_t length = decode_utf8(text, i, &cp);
    if (length == 0) length = 1, cp = 0xFFFD;  // callers validate first; never loop forever
    const bool space = is_unicode_space(cp);
    if (!space && !in_word) ++stats.words;
    in_word = !space;
    i += length;
  }
  return stats;
}

uint64_t fnv1a64(const void* data, size_t size, uint64_t state) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) {
    state ^= bytes[i];
    state *= 1099511628211ull;
  }
  return state;
}

std::string hex64(uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[static_cast<size_t>(i)] = kDigits[value & 0xF];
  return out;
}

bool parse_hex64(std::string_view text, uint64_t* value) {
  if (text.size() != 16) return false;
  uint64_t result = 0;
  for (char c : text) {
    int digit = 0;
    if (c >= '0' && c <= '9') digit = c - '0';
    else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    else return false;
    result = result << 4 | static_cast<uint64_t>(digit);
  }
  *value = result;
  return true;
}

}  // namespace brt::data
