// Shared helpers for the data tests: temporary directories, stream options, a cached KJV corpus
// and tokenizer (built once per test process), and an independent reference for word counts.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "data/corpus/kjv.h"
#include "data/streams.h"
#include "data/tokenizer.h"

namespace brt::data::testing {

namespace fs = std::filesystem;

// A fresh directory removed at scope exit.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static int counter = 0;  // test-only: unique names within one process
    path_ = fs::temp_directory_path() /
            ("brt-data-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Stream options of the stream tests: B streams of N tokens on DP rank `rank` of `ranks`, the
// epoch permutations drawn from `seed`, batches filled on the calling thread (no prefetch).
inline StreamOptions test_stream_options(int B, int N, uint64_t seed, int rank = 0, int ranks = 1) {
  StreamOptions o;
  o.streams_per_rank = B;
  o.seq_len = N;
  o.data_rank = rank;
  o.data_size = ranks;
  o.seed = seed;
  o.prefetch = false;
  return o;
}

inline void write_file(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::string read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline bool bible_available() { return fs::exists("/usr/bin/bible") || std::system("command -v bible >/dev/null 2>&1") == 0; }

// Where the KJV corpus and tokenizer are cached between test processes (ctest runs each test
// in its own process): the build tree's cache folder, or a temporary one.
inline fs::path test_cache_dir() {
#ifdef BRT_DATA_TEST_CACHE
  const fs::path dir = BRT_DATA_TEST_CACHE;
#else
  const fs::path dir = fs::temp_directory_path() / "brt-data-test-cache";
#endif
  fs::create_directories(dir);
  return dir;
}

// The KJV corpus directory (PG19 layout), written once and then reused; empty when the
// `bible` program is missing. Written to a private folder and renamed into place, so parallel
// test processes never see a half-written corpus.
inline fs::path kjv_corpus_dir() {
  if (!bible_available()) return {};
  const fs::path dir = test_cache_dir() / "kjv-corpus";
  std::error_code ec;
  if (fs::exists(dir / "complete", ec)) return dir;
  const fs::path staging = dir.string() + "." + std::to_string(::getpid());
  fs::remove_all(staging, ec);
  write_kjv_corpus(staging);
  write_file(staging / "complete", "");
  fs::rename(staging, dir, ec);  // fails harmlessly if another process got there first
  fs::remove_all(staging, ec);
  return dir;
}

// A small BPE tokenizer trained on the KJV books (vocabulary 1024), trained once and reused.
inline Tokenizer kjv_tokenizer() {
  const fs::path model = test_cache_dir() / "kjv-1024.model";
  std::error_code ec;
  if (fs::exists(model, ec)) return Tokenizer::load(model);
  TokenizerTrainOptions options;
  options.vocab_size = 1024;
  options.max_sentences = 20000;
  Tokenizer tokenizer = Tokenizer::train_on_files(list_pg19_corpus(kjv_corpus_dir()), options,
                                                  BadDocumentPolicy::fail);
  const fs::path staging = model.string() + "." + std::to_string(::getpid());
  tokenizer.save(staging);
  fs::rename(staging, model);
  return tokenizer;
}

// The book corpus in ../shared (via BRT_SHARED_DIR or the path CMake passes in), or empty.
inline fs::path shared_books_dir() {
  if (const char* env = std::getenv("BRT_SHARED_DIR")) return fs::path(env) / "data/books/raw";
#ifdef BRT_DEFAULT_SHARED_DIR
  return fs::path(BRT_DEFAULT_SHARED_DIR) / "data/books/raw";
#else
  return {};
#endif
}

}  // namespace brt::data::testing
