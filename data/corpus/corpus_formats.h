// The corpus formats `brt-dist prepare` reads besides the PG19 layout (docs/data-format.md,
// "Inputs"): single text files, JSONL (one JSON object per line, the text in a configurable
// field) and either gzip-compressed, or a folder of any mix of them. A JSONL record or a cut of a
// long text is one document: a CorpusFile with a byte range of the (decompressed) file, found by
// streaming through it once at listing time, so no file is ever held in memory whole.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/corpus/corpus.h"

namespace brt::data {

struct InputOptions {
  std::string text_key = "text";  // JSONL: the field holding a record's text
  BadDocumentPolicy bad_records = BadDocumentPolicy::fail;  // malformed JSONL lines
  // A text file longer than this is cut into documents of about this many bytes, at a line end
  // (0: never; `prepare` sets it for a corpus that is a single text file).
  int64_t max_document_bytes = 0;
};

struct InputListing {
  std::vector<CorpusFile> documents;
  int64_t files = 0;              // input files read
  int64_t jsonl_records = 0;      // JSONL lines that became documents
  int64_t malformed_records = 0;  // skipped (bad_records = skip)
  int64_t cut_texts = 0;          // text files cut into several documents
};

// True for names ending .jsonl, .ndjson (optionally .gz).
bool is_jsonl_name(const std::filesystem::path& path);

// Lists `path` into `listing` as train documents: a file by its name (JSONL or text, gzip by
// its .gz), a folder by every regular file under it (hidden ones skipped), in sorted order.
// Throws CorpusError naming the file and line for a malformed record under bad_records = fail.
void list_input(const std::filesystem::path& path, const InputOptions& options, InputListing& listing);

// Reads documents of files in order: keeps the last file open and moves forward in it, so a shard
// of consecutive records of one (compressed) file is read in one pass.
class DocumentReader {
 public:
  DocumentReader() = default;
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;
  // The document's raw bytes: the whole file, its byte range, or a JSONL record's text field.
  // Throws CorpusError naming the file (and line) when it cannot.
  std::string read(const CorpusFile& file);

 private:
  std::string read_range(const CorpusFile& file);
  gzFile open_ = nullptr;        // zlib reads plain files as well as gzip
  std::filesystem::path path_;
  int64_t position_ = 0;         // decompressed bytes consumed from open_
};

// load_document (data/corpus/corpus.h) for any CorpusFile, through `reader`.
inline std::optional<std::string> load_document(const CorpusFile& file, BadDocumentPolicy policy,
                                                DocumentReader& reader) {
  return load_document_with(file.name(), [&] { return reader.read(file); }, policy);
}

struct HoldoutOptions {
  int64_t documents = 0;   // per held-out split; 0: from the fraction
  double fraction = 0.01;  // of all documents, per held-out split (at least one)
};

// A corpus without a validation (and test) split gets them from its train documents: a
// deterministic choice by a hash of each document's name, never by order or rank count. Returns
// what it did as one sentence for the summary ("" when the corpus had its own splits).
std::string hold_out_documents(std::vector<CorpusFile>& files, const HoldoutOptions& options);

}  // namespace brt::data
