#include "data/corpus/corpus_formats.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

namespace brt::data {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

gzFile open_input(const fs::path& path) {
  gzFile file = gzopen(path.c_str(), "rb");  // a file that is not gzip is read as it is
  if (file == nullptr) throw CorpusError("cannot open " + path.string());
  gzbuffer(file, 1 << 20);
  return file;
}

// Calls on_line(begin, end, line_number, text) for every line of the decompressed file, holding
// one line at a time.
struct GzCloser {
  gzFile file;
  ~GzCloser() { gzclose(file); }
};

template <typename OnLine>
void for_each_line(const fs::path& path, OnLine on_line) {
  gzFile file = open_input(path);
  GzCloser closer{file};  // also when on_line throws
  std::vector<char> buffer(1 << 20);
  std::string line;
  int64_t offset = 0, line_start = 0, number = 0;
  while (true) {
    const int got = gzread(file, buffer.data(), static_cast<unsigned>(buffer.size()));
    if (got < 0) {
      int code = 0;
      const std::string why = gzerror(file, &code);
      throw CorpusError(path.string() + ": read error at byte " + std::to_string(offset) + ": " + why);
    }
    if (got == 0) break;
    int seg_start = 0;  // the part of this buffer not yet in `line`
    for (int i = 0; i < got; ++i) {
      if (buffer[static_cast<size_t>(i)] != '\n') continue;
      line.append(buffer.data() + seg_start, buffer.data() + i + 1);
      on_line(line_start, offset + i + 1, ++number, line);
      line.clear();
      seg_start = i + 1;
      line_start = offset + seg_start;
    }
    line.append(buffer.data() + seg_start, buffer.data() + got);
    offset += got;
  }
  if (!line.empty()) on_line(line_start, offset, ++number, line);  // a last line without '\n'
}

// The record's text, or the reason it has none.
std::string record_text(const std::string& line, const std::string& key, std::string* problem) {
  const auto record = nlohmann::json::parse(line, nullptr, false);
  if (record.is_discarded()) {
    *problem = "not valid JSON (or not UTF-8)";
  } else if (!record.is_object()) {
    *problem = "not a JSON object";
  } else if (!record.contains(key)) {
    *problem = "no \"" + key + "\" field (--text-key names the text's field)";
  } else if (!record[key].is_string()) {
    *problem = "\"" + key + "\" is not a string";
  } else {
    std::string text = record[key].get<std::string>();
    if (text.empty()) *problem = "\"" + key + "\" is empty";
    return text;
  }
  return "";
}

// Checks a record without building it (listing reads every record of a file that may be larger
// than memory): an object whose top-level field `key` is a non-empty string.
class RecordCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit RecordCheck(const std::string& key) : key_(key) {}
  std::string problem() const {
    if (!valid_) return "not valid JSON (or not UTF-8)";
    if (!object_) return "not a JSON object";
    if (state_ == State::absent) return "no \"" + key_ + "\" field (--text-key names the text's field)";
    if (state_ == State::not_string) return "\"" + key_ + "\" is not a string";
    if (state_ == State::empty) return "\"" + key_ + "\" is empty";
    return "";
  }
  bool null() override { return value(false, false); }
  bool boolean(bool) override { return value(false, false); }
  bool number_integer(number_integer_t) override { return value(false, false); }
  bool number_unsigned(number_unsigned_t) override { return value(false, false); }
  bool number_float(number_float_t, const string_t&) override { return value(false, false); }
  bool string(string_t& s) override { return value(true, s.empty()); }
  bool binary(binary_t&) override { return value(false, false); }
  bool start_object(std::size_t) override {
    if (depth_ == 0) object_ = true;
    return open();
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    at_key_ = depth_ == 1 && k == key_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    valid_ = false;
    return false;
  }

 private:
  enum class State { absent, not_string, empty, good };
  bool open() {
    if (at_key_) state_ = State::not_string, at_key_ = false;
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }
  bool value(bool is_string, bool is_empty) {
    if (at_key_) state_ = !is_string ? State::not_string : is_empty ? State::empty : State::good;
    at_key_ = false;
    return true;
  }
  const std::string& key_;
  bool valid_ = true, object_ = false, at_key_ = false;
  int depth_ = 0;
  State state_ = State::absent;
};

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n") == std::string::npos;
}

void list_jsonl(const fs::path& path, const InputOptions& options, InputListing& listing) {
  for_each_line(path, [&](int64_t begin, int64_t end, int64_t number, const std::string& line) {
    if (blank(line)) return;
    RecordCheck check(options.text_key);
    nlohmann::json::sax_parse(line, &check);
    const std::string problem = check.problem();
    if (!problem.empty()) {
      const std::string where = path.string() + ":" + std::to_string(number) + ": " + problem;
      if (options.bad_records == BadDocumentPolicy::fail)
        throw CorpusError(where + " (--on-bad-record skip skips such records)");
      std::cerr << "warning: skipping record " << where << "\n";
      ++listing.malformed_records;
      return;
    }
    CorpusFile doc{Split::train, path};
    doc.begin = begin, doc.end = end, doc.line = number, doc.json_key = options.text_key;
    listing.documents.push_back(std::move(doc));
    ++listing.jsonl_records;
  });
}

// A text longer than max_document_bytes: documents of about that size, each ending at a line end.
void list_text(const fs::path& path, const InputOptions& options, InputListing& listing) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  const bool gz = ends_with(path.string(), ".gz");
  if (options.max_document_bytes <= 0 || (!gz && !ec && int64_t(size) <= options.max_document_bytes)) {
    listing.documents.push_back({Split::train, path});
    return;
  }
  std::vector<std::pair<int64_t, int64_t>> pieces;
  int64_t start = 0, last_end = 0;
  for_each_line(path, [&](int64_t, int64_t end, int64_t, const std::string&) {
    last_end = end;
    if (end - start < options.max_document_bytes) return;
    pieces.emplace_back(start, end);
    start = end;
  });
  if (last_end > start) pieces.emplace_back(start, last_end);
  if (pieces.size() <= 1 && !gz) {
    listing.documents.push_back({Split::train, path});
    return;
  }
  for (const auto& [begin, end] : pieces) {
    CorpusFile doc{Split::train, path};
    doc.begin = begin, doc.end = end;
    listing.documents.push_back(std::move(doc));
  }
  if (pieces.size() > 1) ++listing.cut_texts;
}

void list_file(const fs::path& path, const InputOptions& options, InputListing& listing) {
  ++listing.files;
  if (is_jsonl_name(path)) list_jsonl(path, options, listing);
  else list_text(path, options, listing);
}

}  // namespace

bool is_jsonl_name(const fs::path& path) {
  std::string name = path.filename().string();
  if (ends_with(name, ".gz")) name.resize(name.size() - 3);
  return ends_with(name, ".jsonl") || ends_with(name, ".ndjson");
}

void list_input(const fs::path& path, const InputOptions& options, InputListing& listing) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    list_file(path, options, listing);
    return;
  }
  if (!fs::is_directory(path, ec)) throw CorpusError(path.string() + ": no such file or folder");
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(path); it != fs::recursive_directory_iterator(); ++it) {
    if (it->path().filename().string().starts_with(".")) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw CorpusError(path.string() + ": the folder holds no files");
  for (const auto& file : files) list_file(file, options, listing);
}

// ---- DocumentReader ----

DocumentReader::~DocumentReader() {
  if (open_ != nullptr) gzclose(open_);
}

std::string DocumentReader::read_range(const CorpusFile& file) {
  if (open_ == nullptr || path_ != file.path || file.begin < position_) {
    if (open_ != nullptr) gzclose(open_);
    open_ = nullptr;
    open_ = open_input(file.path);
    path_ = file.path;
    position_ = 0;
  }
  if (file.begin > position_ && gzseek(open_, static_cast<z_off_t>(file.begin), SEEK_SET) < 0)
    throw CorpusError(file.name() + ": cannot reach byte " + std::to_string(file.begin) + " (file changed?)");
  position_ = file.begin;
  std::string bytes;
  while (file.end < 0 || position_ < file.end) {  // straight into the string, 1 MiB at a time at most
    const int64_t want = file.end < 0 ? int64_t(1) << 20 : std::min<int64_t>(int64_t(1) << 20, file.end - position_);
    const size_t at = bytes.size();
    bytes.resize(at + static_cast<size_t>(want));
    const int got = gzread(open_, bytes.data() + at, static_cast<unsigned>(want));
    if (got < 0) throw CorpusError(file.name() + ": read error");
    bytes.resize(at + static_cast<size_t>(got));
    if (got == 0) break;
    position_ += got;
  }
  if (file.end >= 0 && position_ < file.end)
    throw CorpusError(file.name() + ": the file ends at byte " + std::to_string(position_) + " (it changed since listing)");
  return bytes;
}

std::string DocumentReader::read(const CorpusFile& file) {
  if (file.whole_file() && !ends_with(file.path.string(), ".gz")) return read_file_bytes(file.path);
  std::string bytes = read_range(file);
  if (file.line == 0) return bytes;
  std::string problem;
  std::string text = record_text(bytes, file.json_key, &problem);
  if (!problem.empty()) throw CorpusError(file.name() + ": " + problem);
  return text;
}

// ---- held-out splits ----

std::string hold_out_documents(std::vector<CorpusFile>& files, const HoldoutOptions& options) {
  for (const auto& f : files)
    if (f.split != Split::train) return "";
  const auto n = static_cast<int64_t>(files.size());
  const int64_t k = options.documents > 0 ? options.documents
                                          : std::max<int64_t>(1, int64_t(std::ceil(options.fraction * double(n))));
  if (n < k + 1)
    return "no held-out split: " + std::to_string(n) + " document" + (n == 1 ? "" : "s") +
           " (a long text becomes several with --max-document-mb)";
  const bool with_test = n >= 2 * k + 1;
  std::vector<std::pair<uint64_t, size_t>> order;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string name = files[i].name();
    order.emplace_back(fnv1a64(name.data(), name.size()), i);
  }
  std::sort(order.begin(), order.end());
  for (int64_t j = 0; j < k * (with_test ? 2 : 1); ++j)
    files[order[size_t(j)].second].split = j < k ? Split::validation : Split::test;
  return "held out " + std::to_string(k) + " of " + std::to_string(n) + " documents for validation" +
         (with_test ? " and " + std::to_string(k) + " for test" : " (too few for a test split)") +
         ", chosen by a hash of their names (--holdout-docs / --holdout)";
}

}  // namespace brt::data
