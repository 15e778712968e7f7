// `brt-dist prepare`: corpus -> tokenizer -> token shards, documents split over the
// ranks, every wait under --timeout-s (docs/reliability.md).
#include <algorithm>
#include <chrono>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "data/corpus/corpus_formats.h"
#include "data/corpus/kjv.h"
#include "data/prepare.h"
#include "launch/cli/cli.h"
#include "launch/cli/commands/commands.h"
#include "launch/config/config.h"
#include "launch/preflight/preflight.h"
#include "launch/process/fault_injection.h"
#include "launch/process/progress.h"
#include "parallel/mpi/mpi_session.h"

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

// What listing the inputs found: files, records, malformed records skipped, cut texts, held out.
void print_corpus_summary(const data::PrepareResult& r) {
  const data::CorpusSummary& c = r.corpus;
  if (c.input_files > 0)
    std::printf("prepare: read %lld input file%s: %lld JSONL records, %lld malformed record%s skipped, %lld long "
                "text%s cut into documents\n", (long long)c.input_files, c.input_files == 1 ? "" : "s",
                (long long)c.jsonl_records, (long long)c.malformed_records, c.malformed_records == 1 ? "" : "s",
                (long long)c.cut_texts, c.cut_texts == 1 ? "" : "s");
  if (!c.held_out.empty()) std::printf("prepare: %s\n", c.held_out.c_str());
  const auto& t = r.manifest.totals;
  std::printf("prepare: splits: train %lld, validation %lld, test %lld documents\n", (long long)t[0].documents,
              (long long)t[1].documents, (long long)t[2].documents);
}

bool is_pg19_folder(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const char* split : {"train", "validation", "test"})
    if (std::filesystem::is_directory(dir / split, ec)) return true;
  return false;
}

// --input, --text-key, --on-bad-record, --holdout(-docs), --no-holdout, --max-document-mb.
void read_input_flags(const CommandLine& cl, data::PrepareOptions& opt) {
  const std::string inputs = flag_or(cl, "input", "");
  for (size_t begin = 0; begin < inputs.size();) {
    const size_t comma = std::min(inputs.find(',', begin), inputs.size());
    if (comma > begin) opt.inputs.push_back(inputs.substr(begin, comma - begin));
    begin = comma + 1;
  }
  opt.input.text_key = flag_or(cl, "text-key", "text");
  if (opt.input.text_key.empty()) throw UsageError("prepare: --text-key needs a field name");
  opt.input.bad_records = data::parse_bad_document_policy(choice_flag(cl, "on-bad-record", "fail", {"fail", "skip"}));
  opt.hold_out = !cl.flags.count("no-holdout");
  opt.holdout.documents = int_flag(cl, "holdout-docs", 0, 0, std::numeric_limits<int>::max());
  opt.holdout.fraction = double_flag(cl, "holdout", 0.01, Range::above(0));
  if (opt.holdout.fraction >= 0.5) throw UsageError("prepare: --holdout is a fraction per held-out split, below 0.5");
  if (cl.flags.count("max-document-mb"))
    opt.input.max_document_bytes =
        std::max<int64_t>(1, int64_t(double_flag(cl, "max-document-mb", 1, Range::above(0)) * (1 << 20)));
}

// --corpus (a PG19 folder, else read as an input) and --files (a list of paths, or a JSONL corpus).
void read_corpus_flags(const CommandLine& cl, data::PrepareOptions& opt) {
  opt.corpus_dir = flag_or(cl, "corpus", "");
  if (!opt.corpus_dir.empty() && !is_pg19_folder(opt.corpus_dir)) {
    opt.inputs.push_back(opt.corpus_dir);
    opt.corpus_dir.clear();
  }
  if (auto files = flag_or(cl, "files", ""); !files.empty()) {
    if (data::is_jsonl_name(files)) {
      std::printf("prepare: %s is a JSONL corpus, read as --input %s\n", files.c_str(), files.c_str());
      opt.inputs.push_back(files);
    } else {
      opt.files = data::read_file_list(files, data::Split::train);
    }
  }
}

int run_prepare(const CommandLine& cl, parallel::MpiSession& mpi) {
  const double timeout_s = double_flag(cl, "timeout-s", 600, Range::at_least(1));
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
  // Every flag is checked before any work (the KJV corpus, the tokenizer) begins.
  opt.output_dir = required_flag(cl, "out", "DIR");
  if (!cl.flags.count("kjv") && flag_or(cl, "corpus", "").empty() && flag_or(cl, "files", "").empty() &&
      flag_or(cl, "input", "").empty())
    throw UsageError("prepare: give --input PATH (text, JSONL or a folder of them), --corpus DIR (train/ validation/ "
                     "test/), --files LIST, or --kjv");
  read_input_flags(cl, opt);
  opt.tokenizer_model = flag_or(cl, "tokenizer", "");
  // The vocabulary size: --vocab, else the model config's (model.vocab), else 4096.
  int64_t vocab = int_flag(cl, "vocab", 0, 1, std::numeric_limits<int>::max());
  if (vocab == 0 && cl.flags.count("config"))
    vocab = with_command_line_config(cl, [&] { return load_run_config(cl.flags.at("config"), cl.overrides); }).model.vocab;
  opt.tokenizer.vocab_size = int(vocab == 0 ? 4096 : vocab);
  opt.tokenizer.model_type = flag_or(cl, "model-type", "bpe");
  opt.retrain = cl.flags.count("retrain") > 0;  // else a stored tokenizer made otherwise is refused
  if (opt.retrain && !opt.tokenizer_model.empty())
    throw UsageError("prepare: --retrain trains a new tokenizer and --tokenizer gives one: use one of them");
  opt.bad_documents = data::parse_bad_document_policy(
      choice_flag(cl, "on-bad-document", "fail", {"fail", "skip", "skip_with_warning"}));
  // At least one byte: a tiny --shard-mb means one document per shard, never an empty target.
  opt.shard_target_bytes = std::max<int64_t>(1, int64_t(double_flag(cl, "shard-mb", 4, Range::above(0)) * (1 << 20)));
  // The flags are good: --out created and proven writable by every rank (each writes shards
  // there), exit 2 naming the path and errno, before the corpus or tokenizer (launch/preflight/preflight.h).
  refuse_unusable_directory(opt.output_dir, "prepare --out");
  read_corpus_flags(cl, opt);
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
  if (mpi.world_rank() == 0) print_corpus_summary(r);
  if (mpi.world_rank() == 0)
    std::printf("prepare: %lld documents%s in %d shards (%d written, %d reused, %d stale files removed), "
                "tokenizer %s%s, %.2f MB/s\n",
                (long long)r.documents,
                r.skipped_documents > 0 ? (" (" + std::to_string(r.skipped_documents) + " skipped)").c_str() : "",
                r.shards_total, r.shards_written, r.shards_reused, r.stale_files_removed,
                r.tokenizer_hash.c_str(), r.tokenizer_trained ? " (trained)" : "", r.megabytes_per_second);
  return 0;
}

}  // namespace

int command_prepare(int argc, char** argv) {
  return parallel::run_mpi_main(
      argc, argv,
      [&](parallel::MpiSession& mpi) {  // the command line read here: a bad flag is reported once
        const CommandLine cl = parse_command_line(argc, argv, {}, {"kjv", "quiet", "retrain", "no-holdout"});
        reject_unknown_flags(cl, {"corpus", "files", "out", "tokenizer", "vocab", "model-type",
                                  "on-bad-document", "shard-mb", "kjv", "quiet", "bible", "config", "timeout-s",
                                  "retrain", "input", "text-key", "on-bad-record", "holdout", "holdout-docs",
                                  "no-holdout", "max-document-mb"});
        reject_extra_arguments(cl, 0);
        return run_prepare(cl, mpi);
      },
      "brt-dist prepare");
}

}  // namespace brt::launch
