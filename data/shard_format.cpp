#include "data/shard_format.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/corpus/corpus.h"
#include "data/output_file.h"

namespace brt::data {

namespace fs = std::filesystem;

namespace {

std::string shard_stem(Split split, int32_t shard) {
  char name[64];
  std::snprintf(name, sizeof name, "%s-%05d", std::string(split_name(split)).c_str(), shard);
  return name;
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return fields;
    start = tab + 1;
  }
}

// One non-empty line of a format file, split at tabs, with its line number for messages.
struct Row {
  size_t line = 0;
  std::vector<std::string> fields;
  const std::string& key() const { return fields[0]; }
};

std::string at_line(const fs::path& file, const Row& row) {
  return file.string() + " line " + std::to_string(row.line);
}

int64_t to_int(const std::string& field, const fs::path& file, const Row& row) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(field, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != field.size() || field.empty()) {
    throw std::runtime_error(at_line(file, row) + ": malformed number '" + field + "'");
  }
  return value;
}

Split to_split(const std::string& field, const fs::path& file, const Row& row) {
  try {
    return parse_split(field);
  } catch (const std::exception& e) {
    throw std::runtime_error(at_line(file, row) + ": " + e.what());
  }
}

// Reads "key\tvalue..." lines into rows; every file of the format is made of such rows.
std::vector<Row> read_rows(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::vector<Row> rows;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty()) rows.push_back({number, split_tabs(line)});
  }
  return rows;
}

void expect_fields(const Row& row, size_t count, const fs::path& file) {
  if (row.fields.size() != count) {
    throw std::runtime_error(at_line(file, row) + ": row '" + row.key() + "' has " +
                             std::to_string(row.fields.size()) + " fields, expected " +
                             std::to_string(count));
  }
}

void check_version(const std::vector<Row>& rows, const std::string& magic, const fs::path& file) {
  if (rows.empty() || rows[0].fields.size() != 2 || rows[0].key() != magic ||
      rows[0].fields[1] != std::to_string(kShardFormatVersion)) {
    throw std::runtime_error(file.string() + ": not a '" + magic + "' file of format version " +
                             std::to_string(kShardFormatVersion));
  }
}

// A "doc" row of a .meta: id, offset, tokens, bytes, words, [checksum,] source. Rows written
// before per-document checksums existed have 7 fields.
DocumentRecord parse_meta_document(const Row& row, const ShardMeta& meta, const fs::path& path) {
  if (row.fields.size() != 7 && row.fields.size() != 8) expect_fields(row, 8, path);
  const auto& f = row.fields;
  DocumentRecord d;
  d.doc_id = to_int(f[1], path, row);
  d.split = meta.split;
  d.shard = meta.shard;
  d.token_offset = to_int(f[2], path, row);
  d.tokens = to_int(f[3], path, row);
  d.bytes = to_int(f[4], path, row);
  d.words = to_int(f[5], path, row);
  if (f.size() == 8) d.checksum = f[6];
  d.source = f.back();
  return d;
}

}  // namespace

fs::path shard_tokens_path(const fs::path& dir, Split split, int32_t shard) {
  return dir / "shards" / (shard_stem(split, shard) + ".bin");
}
fs::path shard_meta_path(const fs::path& dir, Split split, int32_t shard) {
  return dir / "shards" / (shard_stem(split, shard) + ".meta");
}
fs::path manifest_path(const fs::path& dir) { return dir / "manifest.tsv"; }
fs::path index_path(const fs::path& dir) { return dir / "index.tsv"; }
fs::path tokenizer_path(const fs::path& dir) { return dir / "tokenizer.model"; }

void write_text_file_atomically(const fs::path& path, const std::string& text) {
  write_file_atomically(path, text);  // every write and the close checked (data/output_file.h)
}

void write_shard_meta(const fs::path& path, const ShardMeta& meta) {
  std::ostringstream out;
  out << "brt-shard\t" << kShardFormatVersion << "\n"
      << "tokenizer\t" << meta.tokenizer_hash << "\n"
      << "token_bytes\t" << meta.token_bytes << "\n"
      << "split\t" << split_name(meta.split) << "\n"
      << "shard\t" << meta.shard << "\n"
      << "plan\t" << meta.plan_hash << "\n"
      << "tokens\t" << meta.tokens << "\n"
      << "checksum\t" << meta.checksum << "\n";
  for (const auto& d : meta.documents) {
    out << "doc\t" << d.doc_id << "\t" << d.token_offset << "\t" << d.tokens << "\t" << d.bytes
        << "\t" << d.words << "\t" << d.checksum << "\t" << d.source << "\n";
  }
  for (const auto& [doc_id, source] : meta.skipped) out << "skipped\t" << doc_id << "\t" << source << "\n";
  out << "end\n";
  write_text_file_atomically(path, out.str());
}

std::optional<ShardMeta> read_shard_meta(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  const auto rows = read_rows(path);
  check_version(rows, "brt-shard", path);
  if (rows.back().fields.size() != 1 || rows.back().key() != "end") {
    throw std::runtime_error(path.string() + ": truncated (no 'end' line)");
  }
  ShardMeta meta;
  for (size_t r = 1; r + 1 < rows.size(); ++r) {
    const Row& row = rows[r];
    const std::string& key = row.key();
    if (key == "doc") {
      meta.documents.push_back(parse_meta_document(row, meta, path));
      continue;
    }
    if (key == "skipped") {
      expect_fields(row, 3, path);
      meta.skipped.emplace_back(to_int(row.fields[1], path, row), row.fields[2]);
      continue;
    }
    expect_fields(row, 2, path);
    const std::string& value = row.fields[1];
    if (key == "tokenizer") meta.tokenizer_hash = value;
    else if (key == "token_bytes") meta.token_bytes = static_cast<int>(to_int(value, path, row));
    else if (key == "split") meta.split = to_split(value, path, row);
    else if (key == "shard") meta.shard = static_cast<int32_t>(to_int(value, path, row));
    else if (key == "plan") meta.plan_hash = value;
    else if (key == "tokens") meta.tokens = to_int(value, path, row);
    else if (key == "checksum") meta.checksum = value;
    else throw std::runtime_error(at_line(path, row) + ": unknown key '" + key + "'");
  }
  return meta;
}

void write_manifest(const fs::path& dir, const Manifest& manifest) {
  std::ostringstream out;
  out << "brt-prepared\t" << kShardFormatVersion << "\n"
      << "tokenizer\t" << manifest.tokenizer_hash << "\n"
      << "vocab_size\t" << manifest.vocab_size << "\n"
      << "token_bytes\t" << manifest.token_bytes << "\n";
  for (int s = 0; s < kNumSplits; ++s) {
    const auto& t = manifest.totals[static_cast<size_t>(s)];
    out << "split\t" << split_name(static_cast<Split>(s)) << "\t"
        << manifest.shards_per_split[static_cast<size_t>(s)] << "\t" << t.documents << "\t"
        << t.tokens << "\t" << t.bytes << "\t" << t.words << "\n";
  }
  write_text_file_atomically(manifest_path(dir), out.str());
}

Manifest read_manifest(const fs::path& dir) {
  const fs::path path = manifest_path(dir);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw std::runtime_error(dir.string() + " is not a prepared corpus (no manifest.tsv; run prepare)");
  }
  const auto rows = read_rows(path);
  check_version(rows, "brt-prepared", path);
  Manifest manifest;
  for (size_t r = 1; r < rows.size(); ++r) {
    const Row& row = rows[r];
    const auto& f = row.fields;
    if (row.key() == "split") {
      expect_fields(row, 7, path);
      const auto s = static_cast<size_t>(to_split(f[1], path, row));
      manifest.shards_per_split[s] = static_cast<int32_t>(to_int(f[2], path, row));
      manifest.totals[s] = {to_int(f[3], path, row), to_int(f[4], path, row), to_int(f[5], path, row),
                            to_int(f[6], path, row)};
      continue;
    }
    expect_fields(row, 2, path);
    if (row.key() == "tokenizer") manifest.tokenizer_hash = f[1];
    else if (row.key() == "vocab_size") manifest.vocab_size = static_cast<int>(to_int(f[1], path, row));
    else if (row.key() == "token_bytes") manifest.token_bytes = static_cast<int>(to_int(f[1], path, row));
    else throw std::runtime_error(at_line(path, row) + ": unknown key '" + row.key() + "'");
  }
  return manifest;
}

void write_index(const fs::path& dir, const std::vector<DocumentRecord>& documents) {
  std::ostringstream out;
  out << "brt-index\t" << kShardFormatVersion << "\n";
  for (const auto& d : documents) {
    out << d.doc_id << "\t" << split_name(d.split) << "\t" << d.shard << "\t" << d.token_offset
        << "\t" << d.tokens << "\t" << d.bytes << "\t" << d.words << "\t" << d.source << "\n";
  }
  write_text_file_atomically(index_path(dir), out.str());
}

std::vector<DocumentRecord> read_index(const fs::path& dir) {
  const fs::path path = index_path(dir);
  const auto rows = read_rows(path);
  check_version(rows, "brt-index", path);
  std::vector<DocumentRecord> documents;
  documents.reserve(rows.size());
  for (size_t r = 1; r < rows.size(); ++r) {
    const Row& row = rows[r];
    const auto& f = row.fields;
    try {
      expect_fields(row, 8, path);
      DocumentRecord d;
      d.doc_id = to_int(f[0], path, row);
      d.split = to_split(f[1], path, row);
      d.shard = static_cast<int32_t>(to_int(f[2], path, row));
      d.token_offset = to_int(f[3], path, row);
      d.tokens = to_int(f[4], path, row);
      d.bytes = to_int(f[5], path, row);
      d.words = to_int(f[6], path, row);
      d.source = f[7];
      if (!documents.empty() && d.doc_id <= documents.back().doc_id)
        throw std::runtime_error(at_line(path, row) + ": document ids are not increasing");
      documents.push_back(std::move(d));
    } catch (const std::exception& e) {
      // Name the document the row is about, as far as it can be read.
      throw std::runtime_error(std::string(e.what()) + " (the row of document " + f[0] +
                               (f.size() == 8 ? ", " + f.back() : std::string()) +
                               "; index.tsv is damaged: rerun `brt-dist prepare` with the same flags)");
    }
  }
  return documents;
}

std::string checksum_file(const fs::path& path) {
  const std::string bytes = read_file_bytes(path);
  return hex64(fnv1a64(bytes.data(), bytes.size()));
}

}  // namespace brt::data
