#include "data/tokenizer_record.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "data/shard_format.h"

namespace brt::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMagic = "brt-tokenizer";

std::vector<std::string> fields_of(const std::string& line) {
  std::vector<std::string> fields;
  std::istringstream in(line);
  for (std::string field; std::getline(in, field, '\t');) fields.push_back(field);
  return fields;
}

int64_t number(const std::string& text, const fs::path& file, const std::string& key) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size())
    throw std::runtime_error(file.string() + ": malformed number '" + text + "' for " + key);
  return value;
}

std::string size_text(int64_t bytes) {
  char text[32];
  if (bytes >= 1 << 20) std::snprintf(text, sizeof text, "%.1f MB", double(bytes) / 1e6);
  else std::snprintf(text, sizeof text, "%.1f kB", double(bytes) / 1e3);
  return text;
}

}  // namespace

std::string corpus_identity(const std::vector<CorpusFile>& files, int64_t* documents, int64_t* bytes) {
  uint64_t h = kFnvOffsetBasis;
  *documents = 0;
  *bytes = 0;
  for (const auto& file : files) {
    std::error_code ec;
    const auto size = fs::file_size(file.path, ec);
    const int64_t length = ec ? -1 : file.whole_file() ? static_cast<int64_t>(size) : file.size_hint();
    // A document inside a file (a JSONL record, a cut of a text) by its place and field too; a
    // whole file's line as it always was, so earlier records still match.
    const std::string place = file.whole_file() ? "" : "@" + std::to_string(file.begin) + "#" + file.json_key;
    const std::string line = std::string(split_name(file.split)) + "\t" + file.path.filename().string() + place +
                             "\t" + std::to_string(length) + "\n";
    h = fnv1a64(line.data(), line.size(), h);
    ++*documents;
    *bytes += std::max<int64_t>(0, length);
  }
  return hex64(h);
}

TokenizerRecord trained_record(const TokenizerTrainOptions& options, const std::vector<CorpusFile>& training_files) {
  TokenizerRecord r;
  r.source = "trained";
  r.model_type = options.model_type;
  r.vocab = options.vocab_size;
  r.max_sentences = options.max_sentences;
  r.max_training_bytes = options.max_training_bytes;
  r.seed = options.seed;
  r.corpus_hash = corpus_identity(training_files, &r.corpus_documents, &r.corpus_bytes);
  return r;
}

std::vector<std::string> record_differences(const TokenizerRecord& a, const TokenizerRecord& b) {
  std::vector<std::string> out;
  const auto differ = [&](const std::string& what, const std::string& x, const std::string& y) {
    if (x != y) out.push_back(what + " " + x + " -> " + y);
  };
  differ("source", a.source, b.source);
  if (a.source == "given" && b.source == "given") {
    differ("--tokenizer", a.given_path, b.given_path);
    return out;
  }
  if (a.source != b.source) return out;
  differ("--model-type", a.model_type, b.model_type);
  differ("--vocab", std::to_string(a.vocab), std::to_string(b.vocab));
  if (a.corpus_hash != b.corpus_hash) {
    out.push_back("corpus " + std::to_string(a.corpus_documents) + " documents (" + size_text(a.corpus_bytes) +
                  ", identity " + a.corpus_hash + ") -> " + std::to_string(b.corpus_documents) + " documents (" +
                  size_text(b.corpus_bytes) + ", identity " + b.corpus_hash + ")");
  }
  differ("sampling", std::to_string(a.max_sentences) + " sentences of " + std::to_string(a.max_training_bytes) +
                         " bytes, seed " + std::to_string(a.seed),
         std::to_string(b.max_sentences) + " sentences of " + std::to_string(b.max_training_bytes) + " bytes, seed " +
             std::to_string(b.seed));
  return out;
}

std::string describe_record(const TokenizerRecord& r) {
  if (r.source == "given") return "the tokenizer given as --tokenizer " + r.given_path;
  return "a " + r.model_type + " tokenizer of --vocab " + std::to_string(r.vocab) + " trained on " +
         std::to_string(r.corpus_documents) + " documents (" + size_text(r.corpus_bytes) + ")";
}

namespace {

// The tokenizer is trained on the train split (all documents when there is none).
std::vector<CorpusFile> training_files(const std::vector<CorpusFile>& files) {
  std::vector<CorpusFile> training;
  for (const auto& file : files) {
    if (file.split == Split::train) training.push_back(file);
  }
  return training.empty() ? files : training;
}

void forget_prepared(const fs::path& dir) {
  std::error_code ec;
  fs::remove(manifest_path(dir), ec);
  fs::remove(index_path(dir), ec);
  fs::remove(tokenizer_record_path(dir), ec);
}

std::string keep_or_retrain(const fs::path& stored) {
  return "Nothing was changed. Rerun with --retrain to train a new tokenizer (every shard is redone, and "
         "shards no longer planned are removed), or with --tokenizer " + stored.string() + " to keep this one";
}

// A stored model without a retrain: reused if its record matches, else refused.
void check_stored(const TokenizerRequest& request, const TokenizerRecord& wanted) {
  const fs::path stored = tokenizer_path(request.dir);
  const std::string hash = Tokenizer::load(stored).hash();
  const auto record = read_tokenizer_record(request.dir);
  if (!record || record->hash != hash) {
    throw std::runtime_error(stored.string() + " has no record of how it was made (" +
                             tokenizer_record_path(request.dir).string() +
                             " is missing or describes another model: an older brt-dist prepare made it, or one "
                             "stopped while saving it), so this run cannot tell whether it is " +
                             describe_record(wanted) + ". " + keep_or_retrain(stored));
  }
  const auto changes = record_differences(*record, wanted);
  if (changes.empty()) return;
  std::string changed;
  for (const auto& c : changes) changed += (changed.empty() ? "" : "; ") + c;
  throw std::runtime_error(stored.string() + " is " + describe_record(*record) + ", but this run asks for " +
                           describe_record(wanted) + " (changed: " + changed + "). " + keep_or_retrain(stored));
}

}  // namespace

bool settle_tokenizer(const TokenizerRequest& request, const std::vector<CorpusFile>& files) {
  const fs::path stored = tokenizer_path(request.dir);
  std::error_code ec;
  const bool exists = fs::exists(stored, ec);
  if (!request.given.empty()) {
    if (request.retrain)
      throw std::invalid_argument("prepare: --retrain trains a new tokenizer and --tokenizer gives one: "
                                  "use one of them");
    const Tokenizer given = Tokenizer::load(request.given);
    // The stored model's hash from its bytes (the same FNV-1a): a damaged one is replaced too.
    if (!exists || checksum_file(stored) != given.hash()) {
      forget_prepared(request.dir);
      given.save(stored);
    }
    TokenizerRecord record;
    record.hash = given.hash();
    record.source = "given";
    record.given_path = request.given.string();
    write_tokenizer_record(request.dir, record);
    return false;
  }
  const std::vector<CorpusFile> training = training_files(files);
  TokenizerRecord wanted = trained_record(request.train, training);
  if (exists && !request.retrain) {
    check_stored(request, wanted);
    return false;
  }
  if (request.show_progress) {
    std::cerr << "prepare: training a " << request.train.model_type << " tokenizer (vocab " << request.train.vocab_size
              << ") on " << training.size() << " documents\n";
  }
  Tokenizer trained = Tokenizer::train_on_files(training, request.train, request.bad_documents);
  forget_prepared(request.dir);  // only now: a failed training leaves the directory as it was
  trained.save(stored);
  wanted.hash = trained.hash();
  write_tokenizer_record(request.dir, wanted);
  return true;
}

fs::path tokenizer_record_path(const fs::path& dir) { return dir / "tokenizer.tsv"; }

void write_tokenizer_record(const fs::path& dir, const TokenizerRecord& r) {
  std::ostringstream out;
  out << kMagic << "\t" << kShardFormatVersion << "\n"
      << "hash\t" << r.hash << "\n"
      << "source\t" << r.source << "\n";
  if (r.source == "given") {
    out << "given\t" << r.given_path << "\n";
  } else {
    out << "model_type\t" << r.model_type << "\n"
        << "vocab\t" << r.vocab << "\n"
        << "sampling\t" << r.max_sentences << "\t" << r.max_training_bytes << "\t" << r.seed << "\n"
        << "corpus\t" << r.corpus_hash << "\t" << r.corpus_documents << "\t" << r.corpus_bytes << "\n";
  }
  write_text_file_atomically(tokenizer_record_path(dir), out.str());
}

std::optional<TokenizerRecord> read_tokenizer_record(const fs::path& dir) {
  const fs::path path = tokenizer_record_path(dir);
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line) || line != std::string(kMagic) + "\t" + std::to_string(kShardFormatVersion))
    throw std::runtime_error(path.string() + ": not a '" + kMagic + "' file of format version " +
                             std::to_string(kShardFormatVersion));
  TokenizerRecord r;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto f = fields_of(line);
    const auto expect = [&](size_t n) {
      if (f.size() != n) throw std::runtime_error(path.string() + ": row '" + f[0] + "' has " +
                                                  std::to_string(f.size()) + " fields, expected " + std::to_string(n));
    };
    if (f[0] == "corpus") {
      expect(4);
      r.corpus_hash = f[1];
      r.corpus_documents = number(f[2], path, f[0]);
      r.corpus_bytes = number(f[3], path, f[0]);
    } else if (f[0] == "sampling") {
      expect(4);
      r.max_sentences = static_cast<uint64_t>(number(f[1], path, f[0]));
      r.max_training_bytes = number(f[2], path, f[0]);
      r.seed = static_cast<uint32_t>(number(f[3], path, f[0]));
    } else {
      expect(2);
      if (f[0] == "hash") r.hash = f[1];
      else if (f[0] == "source") r.source = f[1];
      else if (f[0] == "given") r.given_path = f[1];
      else if (f[0] == "model_type") r.model_type = f[1];
      else if (f[0] == "vocab") r.vocab = static_cast<int>(number(f[1], path, f[0]));
      else throw std::runtime_error(path.string() + ": unknown key '" + f[0] + "'");
    }
  }
  if (r.source != "trained" && r.source != "given")
    throw std::runtime_error(path.string() + ": source must be 'trained' or 'given'");
  return r;
}

}  // namespace brt::data
