// Corpus input: a PG19-style directory (train/, validation/, test/, one
// UTF-8 text file per document) or plain lists of files, read and normalised one document at
// a time.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/corpus/text.h"

namespace brt::data {

// What to do with a document that cannot be used (unreadable, invalid UTF-8, empty).
enum class BadDocumentPolicy { skip_with_warning, fail };
// "skip" / "skip_with_warning" or "fail".
BadDocumentPolicy parse_bad_document_policy(std::string_view name);

// Thrown for corpus problems under BadDocumentPolicy::fail; the message names the file.
class CorpusError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CorpusFile {
  Split split = Split::train;
  std::filesystem::path path;
  // A document inside the file (data/corpus/corpus_formats.h): bytes [begin, end) of the decompressed
  // file (end = -1: the whole file); line > 0: a JSONL record, its text in the field json_key.
  int64_t begin = 0, end = -1, line = 0;
  std::string json_key{};

  bool whole_file() const { return end < 0; }
  // The document's name in messages and the index: the path, path:LINE for a JSONL record,
  // path@BYTE for a cut of a long text.
  std::string name() const;
  // Bytes to read (the file's size for a whole file; 0 if it cannot be read): for planning.
  int64_t size_hint() const;
};

// Lists a PG19-style corpus: every regular file directly inside root/train, root/validation
// and root/test (hidden files ignored), sorted by split then file name. A missing split folder
// is allowed (e.g. no test split); a root with none of the three is an error.
std::vector<CorpusFile> list_pg19_corpus(const std::filesystem::path& root);

// Reads a plain file list: one path per line (blank lines and lines starting with '#'
// ignored); relative paths are taken relative to the list file's folder. All files get `split`.
std::vector<CorpusFile> read_file_list(const std::filesystem::path& list_file, Split split);

// Sorts by (split, path, begin) and rejects duplicates: this order defines document ids, so it must
// not depend on how the list was given or on the number of ranks.
void canonicalise_corpus(std::vector<CorpusFile>& files);

// Reads one document, strips a BOM, normalises CRLF -> LF and validates it. Returns the text,
// or std::nullopt after printing a warning (skip_with_warning); throws CorpusError naming the
// file (fail) for an unreadable file, invalid UTF-8 (with the byte offset) or an empty document.
std::optional<std::string> load_document(const std::filesystem::path& path,
                                         BadDocumentPolicy policy);

// The same for a document whose raw bytes `read` returns (data/corpus/corpus_formats.h), `name` naming it.
std::optional<std::string> load_document_with(const std::string& name, const std::function<std::string()>& read,
                                              BadDocumentPolicy policy);

// Reads a whole file as bytes; throws CorpusError naming the file if it cannot.
std::string read_file_bytes(const std::filesystem::path& path);

}  // namespace brt::data
