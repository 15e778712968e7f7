#include "data/corpus/corpus.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>

namespace brt::data {

namespace fs = std::filesystem;

BadDocumentPolicy parse_bad_document_policy(std::string_view name) {
  if (name == "skip" || name == "skip_with_warning") return BadDocumentPolicy::skip_with_warning;
  if (name == "fail") return BadDocumentPolicy::fail;
  throw std::runtime_error("unknown bad-document policy '" + std::string(name) +
                           "' (expected skip or fail)");
}

std::vector<CorpusFile> list_pg19_corpus(const fs::path& root) {
  std::vector<CorpusFile> files;
  bool any_split = false;
  for (Split split : {Split::train, Split::validation, Split::test}) {
    const fs::path folder = root / std::string(split_name(split));
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) continue;
    any_split = true;
    for (const auto& entry : fs::directory_iterator(folder)) {
      if (!entry.is_regular_file()) continue;
      if (entry.path().filename().string().starts_with(".")) continue;
      files.push_back({split, entry.path()});
    }
  }
  if (!any_split) {
    throw CorpusError("corpus " + root.string() +
                      ": no train/, validation/ or test/ folder (PG19 layout expected)");
  }
  canonicalise_corpus(files);
  return files;
}

std::vector<CorpusFile> read_file_list(const fs::path& list_file, Split split) {
  std::ifstream in(list_file);
  if (!in) throw CorpusError("cannot open file list " + list_file.string());
  std::vector<CorpusFile> files;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    fs::path path(line);
    if (path.is_relative()) path = list_file.parent_path() / path;
    files.push_back({split, path.lexically_normal()});
  }
  return files;
}

std::string CorpusFile::name() const {
  if (line > 0) return path.string() + ":" + std::to_string(line);
  if (!whole_file()) return path.string() + "@" + std::to_string(begin);
  return path.string();
}

int64_t CorpusFile::size_hint() const {
  if (!whole_file()) return end - begin;
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

void canonicalise_corpus(std::vector<CorpusFile>& files) {
  std::sort(files.begin(), files.end(), [](const CorpusFile& a, const CorpusFile& b) {
    if (a.split != b.split) return a.split < b.split;
    const int by_path = a.path.string().compare(b.path.string());
    return by_path != 0 ? by_path < 0 : a.begin < b.begin;
  });
  for (size_t i = 1; i < files.size(); ++i) {
    // The same file twice, or a file listed whole and as records (the same path in two splits too).
    const bool same_file = files[i].path == files[i - 1].path;
    if (same_file && (files[i].whole_file() || files[i - 1].whole_file() || files[i].begin == files[i - 1].begin)) {
      throw CorpusError("corpus lists " + files[i].path.string() + " twice");
    }
  }
  for (const auto& file : files) {
    const std::string name = file.path.string();
    if (name.find_first_of("\t\n\r") != std::string::npos) {
      throw CorpusError("corpus file name contains a tab or newline: " + name);
    }
  }
}

std::string read_file_bytes(const fs::path& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) throw CorpusError("cannot open " + path.string());
  std::string bytes;
  char buffer[1 << 16];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, file)) > 0) bytes.append(buffer, got);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) throw CorpusError("error reading " + path.string());
  return bytes;
}

std::optional<std::string> load_document(const fs::path& path, BadDocumentPolicy policy) {
  return load_document_with(path.string(), [&] { return read_file_bytes(path); }, policy);
}

std::optional<std::string> load_document_with(const std::string& name, const std::function<std::string()>& read,
                                              BadDocumentPolicy policy) {
  std::string problem;
  std::string text;
  try {
    text = normalise_document_text(read());
    size_t bad_offset = 0;
    if (!is_valid_utf8(text, &bad_offset)) {
      problem = name + ": invalid UTF-8 at byte " + std::to_string(bad_offset) +
                " (after BOM/CRLF normalisation)";
    } else if (text.empty()) {
      problem = name + ": empty document";
    }
  } catch (const CorpusError& error) {
    problem = error.what();
  }
  if (problem.empty()) return text;
  if (policy == BadDocumentPolicy::fail) throw CorpusError(problem);
  std::cerr << "warning: skipping document " << problem << "\n";
  return std::nullopt;
}

}  // namespace brt::data
