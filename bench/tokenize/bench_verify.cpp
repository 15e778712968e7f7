// What verified reading costs (docs/data-format.md "Verification"): the document
// streams of a prepared corpus read with every document's token ids and checksum checked as
// they are copied out, against the same reads unchecked, alternated in one run. Streams are the
// only per-token cost of verification (opening reads only the small .meta files), and this
// measures them alone, without a model: the upper bound of the overhead training or eval sees.
//   bench_verify [--data PREPARED_DIR] [--corpus BOOKS_DIR] [--rounds R] [--batch B] [--seq N]
// Without --data it prepares the books (vocab 4096) into a scratch folder first.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "data/dataset.h"
#include "data/prepare.h"
#include "data/streams.h"

namespace fs = std::filesystem;
using namespace brt::data;

namespace {

struct Args {
  fs::path data;
  fs::path corpus = BRT_DEFAULT_BOOKS_DIR;
  int rounds = 5, batch = 8, seq = 512;
};

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::runtime_error("missing value after " + flag);
    const std::string value = argv[++i];
    if (flag == "--data") args.data = value;
    else if (flag == "--corpus") args.corpus = value;
    else if (flag == "--rounds") args.rounds = std::stoi(value);
    else if (flag == "--batch") args.batch = std::stoi(value);
    else if (flag == "--seq") args.seq = std::stoi(value);
    else throw std::runtime_error("unknown flag " + flag + " (--data --corpus --rounds --batch --seq)");
  }
  return args;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Every document of the split once, as eval reads it; returns the tokens served.
int64_t read_split(const std::shared_ptr<const TokenDataset>& dataset, const Args& args, bool verify) {
  StreamOptions o;
  o.streams_per_rank = args.batch;
  o.seq_len = args.seq;
  o.single_pass = true;
  o.shuffle = false;
  o.prefetch = false;  // measure the reading itself, on this thread
  o.verify = verify;
  o.bos_id = dataset->bos_id();
  StreamSet streams(dataset, o);
  Batch batch;
  int64_t tokens = 0;
  while (streams.next(batch)) tokens += std::count(batch.mask.begin(), batch.mask.end(), uint8_t(1));
  return tokens;
}

fs::path prepare_books(const Args& args) {
  const fs::path out = fs::temp_directory_path() / ("brt-bench-verify-" + std::to_string(::getpid()));
  PrepareOptions options;
  for (const auto& entry : fs::directory_iterator(args.corpus))
    if (entry.is_regular_file()) options.files.push_back({Split::train, entry.path()});
  options.output_dir = out;
  options.show_progress = false;
  std::fprintf(stderr, "preparing %zu books from %s into %s ...\n", options.files.size(), args.corpus.c_str(),
               out.c_str());
  prepare_corpus(options, MPI_COMM_SELF);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    const Args args = parse_args(argc, argv);
    const bool scratch = args.data.empty();
    const fs::path data = scratch ? prepare_books(args) : args.data;
    auto t0 = std::chrono::steady_clock::now();
    const auto dataset = TokenDataset::open(data, Split::train);
    const double open_s = seconds_since(t0);
    double best[2] = {1e300, 1e300};
    int64_t tokens = 0;
    for (int round = 0; round < args.rounds; ++round) {
      for (int k = 0; k < 2; ++k) {
        const bool verify = (round + k) % 2 == 1;  // alternate which goes first
        t0 = std::chrono::steady_clock::now();
        tokens = read_split(dataset, args, verify);
        best[verify] = std::min(best[verify], seconds_since(t0));
      }
    }
    const double plain = double(tokens) / best[0], checked = double(tokens) / best[1];
    std::printf("verified reading of %s (train split: %lld documents, %lld tokens; B %d x N %d, best of %d)\n",
                data.c_str(), (long long)dataset->num_documents(), (long long)tokens, args.batch, args.seq,
                args.rounds);
    std::printf("  open (manifest, index, %s, tokenizer.model cross-checked): %.3f s\n", "every .meta", open_s);
    std::printf("  unchecked: %.1f M tokens/s   verified: %.1f M tokens/s   ratio verified/unchecked: %.3f\n",
                plain / 1e6, checked / 1e6, checked / plain);
    std::printf("  verification costs %.2f ns per token served\n", (best[1] - best[0]) / double(tokens) * 1e9);
    if (scratch) fs::remove_all(data);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_verify: %s\n", e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
