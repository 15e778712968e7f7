// The JSONL input path of `brt-dist prepare` (data/corpus/corpus_formats.h) on a large file: listing
// (one streaming pass that finds and checks every record) and reading every document back in
// shard order, plain and gzip'd, with the process's peak resident memory after each — which
// must stay far below the file's size (no file is held whole). Ratios are to a plain sequential
// read of the same file (the disk/page-cache bound) measured in the same run.
//   bench_jsonl [--mb MB (1024)] [--dir DIR (a temporary folder)] [--gzip] [--keep]
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "data/corpus/corpus_formats.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // kilobytes on Linux
}

// Records of 2-8 KB of word-like text with newlines, quotes and non-ASCII (JSON escapes).
void write_corpus(const fs::path& path, int64_t bytes, bool gzip) {
  std::mt19937_64 rng(1);
  gzFile gz = gzip ? gzopen(path.c_str(), "wb1") : nullptr;
  std::ofstream plain;
  if (!gzip) plain.open(path, std::ios::binary);
  int64_t written = 0, id = 0;
  std::string text;
  while (written < bytes) {
    text.clear();
    const int64_t size = 2048 + int64_t(rng() % 6144);
    while (int64_t(text.size()) < size) {
      const uint64_t r = rng();
      text += r % 17 == 0 ? "\n" : r % 23 == 0 ? " \"caf\xc3\xa9\" " : "word" + std::to_string(r % 997) + " ";
    }
    const std::string line = nlohmann::json({{"id", id++}, {"text", text}}).dump() + "\n";
    if (gz) gzwrite(gz, line.data(), unsigned(line.size()));
    else plain.write(line.data(), std::streamsize(line.size()));
    written += int64_t(line.size());
  }
  if (gz) gzclose(gz);
}

double plain_read_seconds(const fs::path& path) {
  const auto t0 = Clock::now();
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buffer(1 << 20);
  while (in.read(buffer.data(), std::streamsize(buffer.size())) || in.gcount() > 0) {}
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void measure(const fs::path& path, int64_t decompressed_bytes) {
  using namespace brt::data;
  const double baseline = plain_read_seconds(path);
  auto t0 = Clock::now();
  InputListing listing;
  list_input(path, {}, listing);
  const double list_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double rss_listed = peak_rss_mb();
  t0 = Clock::now();
  DocumentReader reader;
  int64_t text_bytes = 0;
  for (const auto& doc : listing.documents) text_bytes += int64_t(load_document(doc, BadDocumentPolicy::fail, reader)->size());
  const double read_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double mb = double(decompressed_bytes) / 1e6;
  std::printf("%s: %.0f MB (%lld records, %.0f MB of text)\n", path.filename().c_str(), mb,
              (long long)listing.documents.size(), double(text_bytes) / 1e6);
  std::printf("  plain sequential read of the file: %8.1f MB/s (file bytes)\n", double(fs::file_size(path)) / 1e6 / baseline);
  std::printf("  list (find + check every record):  %8.1f MB/s  %.2fx the plain read's time  peak RSS %.0f MB\n",
              mb / list_s, list_s / baseline, rss_listed);
  std::printf("  read every document in order:      %8.1f MB/s  %.2fx the plain read's time  peak RSS %.0f MB\n",
              mb / read_s, read_s / baseline, peak_rss_mb());
  std::printf("  peak RSS / file size: %.3f\n", peak_rss_mb() / mb);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t mb = 1024;
  fs::path dir;
  bool gzip = false, keep = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mb") && i + 1 < argc) mb = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
    else if (!std::strcmp(argv[i], "--gzip")) gzip = true;
    else if (!std::strcmp(argv[i], "--keep")) keep = true;
    else {
      std::fprintf(stderr, "usage: bench_jsonl [--mb MB] [--dir DIR] [--gzip] [--keep]\n");
      return 2;
    }
  }
  if (dir.empty()) dir = fs::temp_directory_path() / ("brt-bench-jsonl-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path path = dir / (gzip ? "corpus.jsonl.gz" : "corpus.jsonl");
  std::printf("writing %lld MB of JSONL to %s ...\n", (long long)mb, path.c_str());
  std::fflush(stdout);
  write_corpus(path, mb << 20, gzip);
  measure(path, mb << 20);
  if (!keep) fs::remove_all(dir);
  return 0;
}
