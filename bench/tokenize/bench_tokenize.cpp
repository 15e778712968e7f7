// Tokenization throughput: prepare_corpus (read, normalise, validate, encode, write shards and
// index) against `spm_encode --output_format=id` with the same SentencePiece model on the same
// text, in one run. Under mpirun -np R it also measures prepare on all R ranks. The
// targets: ratio >= 1.0 on one process, >= 1.8 with 2 ranks.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "data/prepare.h"

namespace fs = std::filesystem;
using brt::data::BadDocumentPolicy;

namespace {

struct Args {
  fs::path model;
  fs::path corpus = BRT_DEFAULT_BOOKS_DIR;
  std::string spm_encode = BRT_SPM_ENCODE;
  int vocab = 4096;
  int repeats = 1;
};

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + flag);
      return argv[++i];
    };
    if (flag == "--model") args.model = value();
    else if (flag == "--corpus") args.corpus = value();
    else if (flag == "--spm-encode") args.spm_encode = value();
    else if (flag == "--vocab") args.vocab = std::stoi(value());
    else if (flag == "--repeats") args.repeats = std::stoi(value());
    else throw std::runtime_error("unknown flag " + flag + " (--model --corpus --spm-encode --vocab --repeats)");
  }
  return args;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A barrier that sleeps instead of spinning, so an idle rank leaves the CPU to the one
// measuring (the machine may have as few cores as ranks).
void quiet_barrier(MPI_Comm comm) {
  MPI_Request request;
  MPI_Ibarrier(comm, &request);
  int done = 0;
  while (true) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::string broadcast_string(std::string value, MPI_Comm comm) {
  int length = static_cast<int>(value.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, comm);
  value.resize(static_cast<size_t>(length));
  MPI_Bcast(value.data(), length, MPI_CHAR, 0, comm);
  return value;
}

double best_prepare_seconds(const brt::data::PrepareOptions& base, const fs::path& out, int repeats, MPI_Comm comm) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    if (rank == 0) fs::remove_all(out);
    quiet_barrier(comm);
    brt::data::PrepareOptions options = base;
    options.output_dir = out;
    const auto start = std::chrono::steady_clock::now();
    brt::data::prepare_corpus(options, comm);
    best = std::min(best, seconds_since(start));
  }
  return best;
}

int run(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);

  std::vector<brt::data::CorpusFile> files;
  for (const auto& entry : fs::directory_iterator(args.corpus)) {
    if (entry.is_regular_file()) files.push_back({brt::data::Split::train, entry.path()});
  }
  brt::data::canonicalise_corpus(files);
  const std::string scratch_name = rank == 0 ? (fs::temp_directory_path() / ("brt-bench-tokenize-" + std::to_string(::getpid()))).string() : "";
  const fs::path scratch = broadcast_string(scratch_name, MPI_COMM_WORLD);

  // Rank 0: the model (given or trained) and the concatenated normalised text for spm_encode.
  fs::path model = args.model;
  int64_t bytes = 0;
  double spm_seconds = 1e30;
  if (rank == 0) {
    fs::create_directories(scratch);
    if (model.empty()) {
      brt::data::TokenizerTrainOptions train;
      train.vocab_size = args.vocab;
      const auto start = std::chrono::steady_clock::now();
      model = scratch / "books.model";
      brt::data::Tokenizer::train_on_files(files, train, BadDocumentPolicy::fail).save(model);
      std::printf("trained a %d-piece BPE tokenizer on %zu books in %.1f s\n", args.vocab, files.size(), seconds_since(start));
    }
    {
      std::ofstream all(scratch / "all.txt", std::ios::binary);
      for (const auto& file : files) {
        const auto text = *brt::data::load_document(file.path, BadDocumentPolicy::fail);
        bytes += static_cast<int64_t>(text.size());
        all << text;
      }
    }
    const std::string command = args.spm_encode + " --model " + model.string() + " --output_format=id < " +
                                (scratch / "all.txt").string() + " > /dev/null";
    for (int r = 0; r < args.repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
      spm_seconds = std::min(spm_seconds, seconds_since(start));
    }
  }
  model = broadcast_string(model.string(), MPI_COMM_WORLD);

  brt::data::PrepareOptions options;
  options.files = files;
  options.tokenizer_model = model;
  options.shard_target_bytes = 1 << 20;
  options.show_progress = false;
  double one_process = 0;
  if (rank == 0) one_process = best_prepare_seconds(options, scratch / "one", args.repeats, MPI_COMM_SELF);
  quiet_barrier(MPI_COMM_WORLD);
  const double all_ranks = ranks > 1 ? best_prepare_seconds(options, scratch / "ranks", args.repeats, MPI_COMM_WORLD) : 0;

  if (rank == 0) {
    const double mb = static_cast<double>(bytes) / 1e6;
    std::printf("corpus: %zu documents, %.1f MB, model %s\n", files.size(), mb, model.c_str());
    std::printf("spm_encode            : %7.2f s  %7.2f MB/s\n", spm_seconds, mb / spm_seconds);
    std::printf("prepare, 1 process    : %7.2f s  %7.2f MB/s  ratio %.2f (target >= 1.0)\n", one_process,
                mb / one_process, spm_seconds / one_process);
    if (ranks > 1) {
      std::printf("prepare, %d ranks     : %7.2f s  %7.2f MB/s  ratio %.2f (target >= 1.8 for 2 ranks)\n", ranks,
                  all_ranks, mb / all_ranks, spm_seconds / all_ranks);
    }
    fs::remove_all(scratch);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    status = run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_tokenize: %s\n", error.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
