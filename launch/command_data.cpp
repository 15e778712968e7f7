// `brt-dist prepare` (issue 3): corpus -> tokenizer -> token shards, documents split over the
// ranks, every wait under --timeout-s (docs/reliability.md).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "data/kjv.h"
#include "data/prepare.h"
#include "launch/cli.h"
#include "launch/commands.h"
#include "launch/config.h"
#include "launch/fault_injection.h"
#include "launch/progress.h"
#include "parallel/mpi_session.h"

namespace brt::launch {

namespace {

// Rank 0 does `work`; its error, if any, is thrown on every rank (none is left waiting).
void on_rank_zero(parallel::MpiSession& mpi, const std::function<void()>& work) {
  std::string error;
  if (mpi.world_rank() == 0) {
    try {
      work();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  int64_t length = int64_t(error.size());
  MPI_Bcast(&length, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  error.resize(size_t(length));
  if (length > 0) MPI_Bcast(error.data(), int(length), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (!error.empty()) throw std::runtime_error(error);
}

int run_prepare(const CommandLine& cl, parallel::MpiSession& mpi) {
  const double timeout_s = std::stod(flag_or(cl, "timeout-s", "600"));
  if (!(timeout_s >= 1)) throw std::invalid_argument("prepare: --timeout-s must be >= 1");
  parallel::MonitorSettings watch;
  watch.timeout_s = timeout_s;
  watch.timeout_key = "--timeout-s";
  mpi.monitor().configure(watch);
  auto watched = mpi.monitor().guard("prepare");
  const FaultInjection faults = FaultInjection::from_environment();
  data::PrepareOptions opt;
  opt.on_phase = [&](const std::string& phase) {
    watched.phase(phase);
    faults.at_phase("prepare: " + phase, mpi.world_rank());
  };
  opt.on_work = [&](const std::string& what) {
    watched.working(what);
    faults.at_phase("prepare: " + what, mpi.world_rank());
  };
  opt.output_dir = flag_or(cl, "out", "");
  if (opt.output_dir.empty()) throw std::invalid_argument("prepare: --out DIR is required");
  opt.corpus_dir = flag_or(cl, "corpus", "");
  if (cl.flags.count("kjv")) {
    // The bundled default corpus: the King James Bible (Debian's bible-kjv), one document per
    // book, written as a PG19-style corpus next to the shards.
    opt.corpus_dir = opt.output_dir / "corpus";
    watched.phase("world rank 0 writes the King James Bible corpus");
    on_rank_zero(mpi, [&] {
      const auto books = data::write_kjv_corpus(opt.corpus_dir, flag_or(cl, "bible", "bible"));
      std::printf("prepare: wrote the King James Bible (%zu books) to %s\n", books.size(), opt.corpus_dir.c_str());
    });
  }
  if (auto files = flag_or(cl, "files", ""); !files.empty())
    opt.files = data::read_file_list(files, data::Split::train);
  if (opt.corpus_dir.empty() && opt.files.empty())
    throw std::invalid_argument("prepare: give --corpus DIR (train/ validation/ test/), "
                                "--files LIST, or --kjv");
  opt.tokenizer_model = flag_or(cl, "tokenizer", "");
  // The vocabulary size: --vocab, else the model config's (model.vocab), else 4096.
  std::string vocab = flag_or(cl, "vocab", "");
  if (vocab.empty() && cl.flags.count("config"))
    vocab = std::to_string(load_run_config(cl.flags.at("config"), cl.overrides).model.vocab);
  opt.tokenizer.vocab_size = std::stoi(vocab.empty() ? "4096" : vocab);
  opt.tokenizer.model_type = flag_or(cl, "model-type", "bpe");
  opt.bad_documents = data::parse_bad_document_policy(flag_or(cl, "on-bad-document", "fail"));
  opt.shard_target_bytes = int64_t(std::stod(flag_or(cl, "shard-mb", "4")) * (1 << 20));
  opt.show_progress = !cl.flags.count("quiet");
  Progress shown("prepare", opt.show_progress && mpi.world_rank() == 0);
  opt.on_progress = [&shown](const data::PrepareOptions::Progress& p) {
    char detail[200];
    std::snprintf(detail, sizeof detail, "%lld/%lld documents, %s of %s, %s", (long long)p.documents_done,
                  (long long)p.documents_total, Progress::bytes_text(double(p.bytes_done)).c_str(),
                  Progress::bytes_text(double(p.bytes_total)).c_str(),
                  Progress::rate_text(double(p.bytes_done), p.seconds).c_str());
    if (p.documents_done >= p.documents_total) shown.finish(detail);
    else shown.update(p.bytes_total > 0 ? double(p.bytes_done) / double(p.bytes_total) : -1, detail);
  };
  const data::PrepareResult r = data::prepare_corpus(opt, MPI_COMM_WORLD);
  if (mpi.world_rank() == 0)
    std::printf("prepare: %lld documents in %d shards (%d written, %d reused), tokenizer %s%s, "
                "%.2f MB/s\n",
                (long long)r.documents, r.shards_total, r.shards_written, r.shards_reused,
                r.tokenizer_hash.c_str(), r.tokenizer_trained ? " (trained)" : "",
                r.megabytes_per_second);
  return 0;
}

}  // namespace

int command_prepare(int argc, char** argv) {
  return parallel::run_mpi_main(
      argc, argv,
      [&](parallel::MpiSession& mpi) {  // the command line read here: a bad flag is reported once
        const CommandLine cl = parse_command_line(argc, argv, {}, {"kjv", "quiet"});
        reject_unknown_flags(cl, {"corpus", "files", "out", "tokenizer", "vocab", "model-type",
                                  "on-bad-document", "shard-mb", "kjv", "quiet", "bible", "config", "timeout-s"});
        return run_prepare(cl, mpi);
      },
      "brt-dist prepare");
}

}  // namespace brt::launch
