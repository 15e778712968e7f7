// `brt-dist eval`: a checkpoint's model on every document of a split (launch/eval/evaluator.h),
// or with --task on a grid of long-range task documents (launch/eval/task_evaluator.h), on any
// layout (--tp), every wait under train.timeout_s and every error named (docs/reliability.md,
// docs/evaluation.md).
#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>

#include "data/dataset.h"
#include "data/output_file.h"
#include "data/task_eval.h"
#include "launch/cli/checkpoint_model.h"
#include "launch/cli/cli.h"
#include "launch/cli/commands/commands.h"
#include "launch/config/config.h"
#include "launch/eval/evaluator.h"
#include "launch/eval/mqar_evaluator.h"
#include "launch/eval/task_evaluator.h"
#include "launch/eval/tokenizer_match.h"
#include "launch/preflight/preflight.h"
#include "launch/run/run_groups.h"
#include "launch/train/checkpoint/training_checkpoint.h"
#include "parallel/mpi/mpi_session.h"
#include "parallel/process_groups.h"

namespace brt::launch {

namespace {

// Each document is one stream's: streams beyond this rank's share of the documents would only
// compute padding, so there are at most that many (the numbers do not depend on it).
int eval_streams(const RunConfig& cfg, const std::string& split, int data_size) {
  try {
    const int64_t documents = data::TokenDataset::open(cfg.data.path, data::parse_split(split))->num_documents();
    const int64_t share = (documents + data_size - 1) / data_size;
    return int(std::clamp<int64_t>(share, 1, cfg.train.batch));
  } catch (const std::exception&) {
    // Unreadable data: evaluate_split opens it again and reports it, after the checkpoint has
    // been loaded and verified (a damaged checkpoint is the first thing a user must hear of).
    return cfg.train.batch;
  }
}

// Both outputs through a checked .tmp (data/output_file.h): a full disk is an error naming the
// file and the reason, and leaves neither a partial file nor its .tmp.
void write_eval_outputs(const CommandLine& cl, const EvalReport& r) {
  if (const std::string path = flag_or(cl, "token-losses", ""); !path.empty()) {
    data::AtomicOutputFile out(path);  // doc_id, position in the document, nats: one line per target
    out.write("doc_id\tposition\tnats\n");
    char line[96];
    for (const auto& t : r.token_losses) {
      const int n = std::snprintf(line, sizeof line, "%lld\t%lld\t%.17g\n", (long long)t.doc_id,
                                  (long long)t.position, t.nats);
      out.write(std::string_view(line, size_t(n)));
    }
    out.commit();
  }
  if (auto path = flag_or(cl, "json", ""); !path.empty()) data::write_file_atomically(path, r.json() + "\n");
}

// The checkpoint's config with this command's keys, resolved. Eval reads shards; model.seq_len=N2
// evaluates longer segments (docs/evaluation.md, "Longer contexts"; an xl model's window follows
// it unless given: resolve()).
struct EvalConfig {
  std::string checkpoint;
  RunConfig cfg;
  int64_t trained_seq_len = 0;
};
EvalConfig eval_config(parallel::MpiSession& mpi, const CommandLine& cl) {
  EvalConfig e;
  e.checkpoint = resolve_checkpoint_argument(mpi, flag_or(cl, "checkpoint", cl.positional.empty() ? "" : cl.positional[0]), "eval");
  ConfigSources sources;
  e.cfg = checkpoint_command_config(mpi, cl, e.checkpoint, "eval", &sources);
  e.trained_seq_len = config_of_checkpoint(e.checkpoint).model.seq_len;
  e.cfg.data.source = "shards";
  resolve(e.cfg, &sources);
  return e;
}

// What plain and task evaluation share: this rank's share of the documents with the totals
// summed over the dp_cp group (every layout reports the same numbers), progress on the printing
// rank, the trained length, and --ablate.
template <typename Options>
void set_shared_eval_options(Options& o, const parallel::ProcessGroups& groups, const CommandLine& cl, bool root,
                             int64_t trained_seq_len) {
  parallel::Communicator* dp_cp = &groups.dp_cp();  // outlives the evaluation (the command's groups)
  o.data_rank = groups.data_rank();  // under CP the cp ranks of a data rank share its documents
  o.data_size = groups.data_size();
  o.reduce = [dp_cp](std::vector<double>& v) { dp_cp->all_reduce(v); };
  o.progress = root && !cl.flags.count("quiet");
  o.trained_seq_len = trained_seq_len;
  o.ablate = cl.flags.count("ablate") > 0;
}

int run_eval(parallel::MpiSession& mpi, const CommandLine& cl) {
  const EvalConfig e = eval_config(mpi, cl);
  const std::string& ckpt = e.checkpoint;
  const RunConfig& cfg = e.cfg;
  const int64_t trained_seq_len = e.trained_seq_len;
  const std::string split = flag_or(cl, "split", cfg.data.eval_split);
  // --tp T: T consecutive ranks share each model (vocabulary-parallel cross-entropy: every
  // rank of a TP group gets the whole rows' losses); DP = ranks / T.
  const parallel::ProcessGroups groups = make_run_groups(mpi, cfg, CpWork::kEval);
  const int streams = eval_streams(cfg, split, groups.data_size());
  // Where it writes and what it allocates, checked before the model (launch/preflight/preflight.h; exit 2).
  preflight_outputs(groups.world(),
                    {{"--json", flag_or(cl, "json", "")}, {"--token-losses", flag_or(cl, "token-losses", "")}});
  preflight_inference_memory(groups.world(), cfg, streams, "eval");
  const auto run = load_checkpoint_model(mpi, cfg, groups, streams, ckpt, "eval");
  check_data_tokenizer(ckpt, cfg.data.path, cl.flags.count("allow-tokenizer-mismatch") > 0, mpi.world_rank() == 0);
  // Documents are dealt to the streams of all DP ranks; totals are summed over the dp_cp group.
  const bool root = mpi.world_rank() == 0;
  EvalOptions options;
  set_shared_eval_options(options, groups, cl, root, trained_seq_len);
  options.cp = &run->cp();  // --cp: each rank runs its chunk of every segment
  options.layer_stats = true;  // none under TP (core/layer.h)
  options.token_losses = !flag_or(cl, "token-losses", "").empty();
  if (options.token_losses && options.data_size > 1)
    throw UsageError("eval --token-losses writes one process's losses: run it with one data-parallel "
                     "rank (no mpirun, or --tp equal to the ranks), not " + std::to_string(options.data_size));
  const EvalReport r = evaluate_split(run->model(), cfg, split, options);
  if (!root) return 0;
  std::printf("%s", r.text().c_str());  // first: a failed file below still leaves the report
  std::fflush(stdout);
  write_eval_outputs(cl, r);
  return 0;
}

// --task's flags (docs/evaluation.md, "Long-range tasks"): the grid and the documents' shape.
constexpr const char* kTaskFlags[] = {"lengths", "depths", "samples", "digits", "facts", "supporting-facts", "task-seed"};

std::vector<std::string> comma_list(const std::string& flag, const std::string& text) {
  std::vector<std::string> items;
  for (size_t begin = 0; begin <= text.size();) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    items.push_back(text.substr(begin, comma - begin));
    begin = comma + 1;
  }
  if (text.empty()) throw UsageError("--" + flag + " needs a comma-separated list, got ''");
  return items;
}

// The grid from the flags; lengths default to N, 2N, 4N, 8N of the (evaluated) model.seq_len.
data::TaskGrid task_grid(const CommandLine& cl, const RunConfig& cfg) {
  data::TaskGrid grid;
  grid.shape.kind = data::parse_task_kind(flag_or(cl, "task", ""));
  grid.shape.digits = int(int_flag(cl, "digits", 5, 1, 18));
  grid.shape.facts = int(int_flag(cl, "facts", 3, 2, 4));
  grid.shape.supporting_facts = int(int_flag(cl, "supporting-facts", 1, 1, 2));
  grid.shape.seed = uint64_flag(cl, "task-seed", 1);
  grid.samples = int(int_flag(cl, "samples", 8, 1, 1 << 20));
  const int64_t n = cfg.model.seq_len;
  const std::string lengths = std::to_string(n) + "," + std::to_string(2 * n) + "," + std::to_string(4 * n) + "," +
                              std::to_string(8 * n);
  for (const auto& item : comma_list("lengths", flag_or(cl, "lengths", lengths)))
    grid.lengths.push_back(parse_int_flag("lengths", item, 1));
  for (const auto& item : comma_list("depths", flag_or(cl, "depths", "0,0.25,0.5,0.75,1")))
    grid.depths.push_back(parse_double_flag("depths", item, Range{0.0, 1.0}));
  return grid;
}

// Each stream makes its document whole before feeding it (data::TaskDocument: its tokens and
// the filler slices they came from), so the longest length decides what the streams hold at once:
// 8 bytes a token bounds the token vector while it grows (4 bytes each, up to twice that
// capacity) and the slices. A length beyond the host is refused with the memory check's message
// before any model is built, not found by the allocator at the first document.
MemoryNeed task_documents_memory(const data::TaskGrid& grid, int streams) {
  constexpr int64_t kBytesPerToken = 8;
  const int64_t longest = *std::max_element(grid.lengths.begin(), grid.lengths.end());
  const int64_t limit = std::numeric_limits<int64_t>::max() / kBytesPerToken / std::max(1, streams) - 1;
  MemoryNeed need;
  need.host = longest > limit ? std::numeric_limits<int64_t>::max() / 2 : (longest + 1) * kBytesPerToken * streams;
  need.host_parts = std::to_string(streams) + " task document" + (streams == 1 ? "" : "s") + " of up to " +
                    std::to_string(longest) + " tokens (--lengths), each made whole: " + gib_text(need.host);
  return need;
}

// Lengths too short for the kind's fact, question and answer are the command line's error.
void check_task_grid(const CommandLine& cl, const data::TaskGenerator& generator, const data::TaskGrid& grid) {
  try {
    data::task_grid_cells(generator, grid);
  } catch (const std::invalid_argument& e) {
    const bool given = cl.flags.count("lengths") > 0;
    throw UsageError(std::string("--lengths: ") + e.what() +
                     (given ? "" : " (the default N, 2N, 4N, 8N of model.seq_len; give longer --lengths)"));
  }
}

int run_task_eval(parallel::MpiSession& mpi, const CommandLine& cl) {
  const EvalConfig e = eval_config(mpi, cl);
  const std::string& ckpt = e.checkpoint;
  const RunConfig& cfg = e.cfg;
  const int64_t trained_seq_len = e.trained_seq_len;
  TaskEvalOptions options;
  options.grid = task_grid(cl, cfg);  // usage errors before any model
  options.split = flag_or(cl, "split", cfg.data.eval_split);
  options.checkpoint = ckpt;
  const parallel::ProcessGroups groups = make_run_groups(mpi, cfg, CpWork::kTaskEval);
  parallel::Communicator& dp_cp = groups.dp_cp();
  // Each document is one stream's: no more streams than this rank's share of the documents.
  const int64_t documents = int64_t(options.grid.lengths.size() * options.grid.depths.size()) * options.grid.samples;
  const int streams = int(std::clamp<int64_t>((documents + dp_cp.size() - 1) / dp_cp.size(), 1, cfg.train.batch));
  preflight_outputs(groups.world(), {{"--json", flag_or(cl, "json", "")}});
  preflight_inference_memory(groups.world(), cfg, streams, "eval", task_documents_memory(options.grid, streams));
  const auto run = load_checkpoint_model(mpi, cfg, groups, streams, ckpt, "eval");
  check_data_tokenizer(ckpt, cfg.data.path, cl.flags.count("allow-tokenizer-mismatch") > 0, mpi.world_rank() == 0);
  const auto generator = data::TaskGenerator::open(cfg.data.path, data::parse_split(options.split));
  check_task_grid(cl, *generator, options.grid);
  const bool root = mpi.world_rank() == 0;
  set_shared_eval_options(options, groups, cl, root, trained_seq_len);
  const TaskReport r = evaluate_task(run->model(), generator, options);
  if (!root) return 0;
  std::printf("%s", r.text().c_str());  // first: a failed file below still leaves the report
  std::fflush(stdout);
  if (auto path = flag_or(cl, "json", ""); !path.empty()) data::write_file_atomically(path, r.json() + "\n");
  return 0;
}

// --task mqar (launch/eval/mqar_evaluator.h): its documents are their own ids of model.vocab,
// so no corpus is read; --pairs and --gaps (in windows W) span the grid.
int run_mqar_eval(parallel::MpiSession& mpi, const CommandLine& cl) {
  const std::string ckpt = resolve_checkpoint_argument(
      mpi, flag_or(cl, "checkpoint", cl.positional.empty() ? "" : cl.positional[0]), "eval");
  ConfigSources sources;
  RunConfig cfg = checkpoint_command_config(mpi, cl, ckpt, "eval", &sources);
  cfg.data.source = "synthetic";
  resolve(cfg, &sources);
  MqarEvalOptions options;
  options.checkpoint = ckpt;
  options.grid.pairs.clear();
  for (const auto& item : comma_list("pairs", flag_or(cl, "pairs", "4,8,16")))
    options.grid.pairs.push_back(int(parse_int_flag("pairs", item, 1)));
  options.grid.gap_windows.clear();
  for (const auto& item : comma_list("gaps", flag_or(cl, "gaps", "0.5,1,2,4")))
    options.grid.gap_windows.push_back(parse_double_flag("gaps", item, Range{0.0, 1e9}));
  options.grid.samples = int(int_flag(cl, "samples", 8, 1, 1 << 20));
  options.grid.seed = uint64_flag(cl, "task-seed", 1);
  const data::MqarVocabulary vocab = data::MqarVocabulary::of(cfg.model.vocab);
  for (const int p : options.grid.pairs)
    if (p > vocab.keys)
      throw UsageError("--pairs: " + std::to_string(p) + " is more than the " + std::to_string(vocab.keys) +
                       " keys of model.vocab = " + std::to_string(cfg.model.vocab) + " (" + vocab.describe() + ")");
  const parallel::ProcessGroups groups = make_run_groups(mpi, cfg, CpWork::kMqarEval);
  const int64_t documents = int64_t(options.grid.pairs.size() * options.grid.gap_windows.size()) * options.grid.samples;
  const int streams = int(std::clamp<int64_t>((documents + groups.dp_cp().size() - 1) / groups.dp_cp().size(), 1, cfg.train.batch));
  preflight_outputs(groups.world(), {{"--json", flag_or(cl, "json", "")}});
  preflight_inference_memory(groups.world(), cfg, streams, "eval");
  const auto run = load_checkpoint_model(mpi, cfg, groups, streams, ckpt, "eval");
  const bool root = mpi.world_rank() == 0;
  set_shared_eval_options(options, groups, cl, root, config_of_checkpoint(ckpt).model.seq_len);
  const MqarReport r = evaluate_mqar(run->model(), options);
  if (!root) return 0;
  std::printf("%s", r.text().c_str());
  std::fflush(stdout);
  if (auto path = flag_or(cl, "json", ""); !path.empty()) data::write_file_atomically(path, r.json() + "\n");
  return 0;
}

// --task and its flags go together; plain eval's per-token losses are not a task's; the
// passkey / needle / facts grid (lengths x depths) and MQAR's (pairs x gaps) are not each other's.
void check_task_flags(const CommandLine& cl) {
  if (cl.flags.count("task")) {
    const std::string task = choice_flag(cl, "task", "", {"passkey", "needle", "facts", "mqar"});
    if (cl.flags.count("token-losses")) throw UsageError("--token-losses is plain eval's; not with --task");
    for (const char* flag : kTaskFlags)
      if (task == "mqar" && cl.flags.count(flag) && std::string(flag) != "samples" && std::string(flag) != "task-seed")
        throw UsageError(std::string("--") + flag + " is the passkey / needle / facts grid's; --task mqar takes "
                         "--pairs, --gaps, --samples, --task-seed");
    for (const char* flag : {"pairs", "gaps"})
      if (task != "mqar" && cl.flags.count(flag))
        throw UsageError(std::string("--") + flag + " is --task mqar's");
    return;
  }
  for (const char* flag : kTaskFlags)
    if (cl.flags.count(flag)) throw UsageError(std::string("--") + flag + " needs --task passkey|needle|facts|mqar");
  for (const char* flag : {"pairs", "gaps"})
    if (cl.flags.count(flag)) throw UsageError(std::string("--") + flag + " needs --task mqar");
}

}  // namespace

// The command lines are read inside run_mpi_main: a bad flag is reported once per job.
int command_eval(int argc, char** argv) {
  return parallel::run_mpi_main(
      argc, argv,
      [&](parallel::MpiSession& mpi) {
        const CommandLine cl = parse_command_line(
            argc, argv, {{"data", "data.path"}, {"batch", "train.batch"}, {"tp", "train.tp"}, {"cp", "train.cp"},
                         {"device", "train.device"}, {"precision", "train.precision"}},
            {"quiet", "ablate", "allow-tokenizer-mismatch"});
        reject_unknown_flags(cl, {"checkpoint", "split", "json", "quiet", "ablate", "token-losses",
                                  "allow-tokenizer-mismatch", "task", "lengths", "depths", "samples", "digits",
                                  "facts", "supporting-facts", "task-seed", "pairs", "gaps"});
        choice_flag(cl, "split", "", {"train", "validation", "test"});
        check_task_flags(cl);
        reject_extra_arguments(cl, 1);
        if (flag_or(cl, "task", "") == "mqar") return run_mqar_eval(mpi, cl);
        return cl.flags.count("task") ? run_task_eval(mpi, cl) : run_eval(mpi, cl);
      },
      "brt-dist eval");
}

}  // namespace brt::launch
