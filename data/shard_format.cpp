#include "data/shard_format.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/corpus.h"

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

int64_t to_int(const std::string& field, const fs::path& file) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(field, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != field.size() || field.empty()) {
    throw std::runtime_error(file.string() + ": malformed number '" + field + "'");
  }
  return value;
}

// Reads "key\tvalue..." lines into rows; every file of the format is made of such rows.
std::vector<std::vector<std::string>> read_rows(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(split_tabs(line));
  }
  return rows;
}

void expect_fields(const std::vector<std::string>& row, size_t count, const fs::path& file) {
  if (row.size() != count) {
    throw std::runtime_error(file.string() + ": row '" + row[0] + "' has " +
                             std::to_string(row.size()) + " fields, expected " +
                             std::to_string(count));
  }
}

void check_version(const std::vector<std::vector<std::string>>& rows, const std::string& magic,
                   const fs::path& file) {
  if (rows.empty() || rows[0].size() != 2 || rows[0][0] != magic ||
      rows[0][1] != std::to_string(kShardFormatVersion)) {
    throw std::runtime_error(file.string() + ": not a '" + magic + "' file of format version " +
                             std::to_string(kShardFormatVersion));
  }
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
  const fs::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + temporary.string());
  }
  fs::rename(temporary, path);
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
        << "\t" << d.words << "\t" << d.source << "\n";
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
  if (rows.back().size() != 1 || rows.back()[0] != "end") {
    throw std::runtime_error(path.string() + ": truncated (no 'end' line)");
  }
  ShardMeta meta;
  for (size_t r = 1; r + 1 < rows.size(); ++r) {
    const auto& row = rows[r];
    const std::string& key = row[0];
    if (key == "doc") {
      expect_fields(row, 7, path);
      DocumentRecord d;
      d.doc_id = to_int(row[1], path);
      d.split = meta.split;
      d.shard = meta.shard;
      d.token_offset = to_int(row[2], path);
      d.tokens = to_int(row[3], path);
      d.bytes = to_int(row[4], path);
      d.words = to_int(row[5], path);
      d.source = row[6];
      meta.documents.push_back(std::move(d));
      continue;
    }
    if (key == "skipped") {
      expect_fields(row, 3, path);
      meta.skipped.emplace_back(to_int(row[1], path), row[2]);
      continue;
    }
    expect_fields(row, 2, path);
    const std::string& value = row[1];
    if (key == "tokenizer") meta.tokenizer_hash = value;
    else if (key == "token_bytes") meta.token_bytes = static_cast<int>(to_int(value, path));
    else if (key == "split") meta.split = parse_split(value);
    else if (key == "shard") meta.shard = static_cast<int32_t>(to_int(value, path));
    else if (key == "plan") meta.plan_hash = value;
    else if (key == "tokens") meta.tokens = to_int(value, path);
    else if (key == "checksum") meta.checksum = value;
    else throw std::runtime_error(path.string() + ": unknown key '" + key + "'");
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
    const auto& row = rows[r];
    if (row[0] == "split") {
      expect_fields(row, 7, path);
      const auto s = static_cast<size_t>(parse_split(row[1]));
      manifest.shards_per_split[s] = static_cast<int32_t>(to_int(row[2], path));
      manifest.totals[s] = {to_int(row[3], path), to_int(row[4], path), to_int(row[5], path),
                            to_int(row[6], path)};
      continue;
    }
    expect_fields(row, 2, path);
    if (row[0] == "tokenizer") manifest.tokenizer_hash = row[1];
    else if (row[0] == "vocab_size") manifest.vocab_size = static_cast<int>(to_int(row[1], path));
    else if (row[0] == "token_bytes") manifest.token_bytes = static_cast<int>(to_int(row[1], path));
    else throw std::runtime_error(path.string() + ": unknown key '" + row[0] + "'");
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
    const auto& row = rows[r];
    expect_fields(row, 8, path);
    DocumentRecord d;
    d.doc_id = to_int(row[0], path);
    d.split = parse_split(row[1]);
    d.shard = static_cast<int32_t>(to_int(row[2], path));
    d.token_offset = to_int(row[3], path);
    d.tokens = to_int(row[4], path);
    d.bytes = to_int(row[5], path);
    d.words = to_int(row[6], path);
    d.source = row[7];
    documents.push_back(std::move(d));
  }
  return documents;
}

std::string checksum_file(const fs::path& path) {
  const std::string bytes = read_file_bytes(path);
  return hex64(fnv1a64(bytes.data(), bytes.size()));
}

}  // namespace brt::data
