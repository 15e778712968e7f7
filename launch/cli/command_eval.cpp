// `brt-dist eval` and `brt-dist generate`: a checkpoint's model on a split or a prompt, on any
// layout (--tp), every wait under train.timeout_s and every error named (docs/reliability.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>

#include "data/dataset.h"
#include "data/output_file.h"
#include "data/text.h"
#include "launch/cli.h"
#include "launch/commands.h"
#include "launch/config.h"
#include "launch/device_backend.h"
#include "launch/evaluator.h"
#include "launch/fault_injection.h"
#include "launch/generator.h"
#include "launch/gpu_binding.h"
#include "launch/preflight.h"
#include "launch/threads.h"
#include "launch/tokenizer_match.h"
#include "launch/training_checkpoint.h"
#include "parallel/core_share.h"
#include "parallel/launch_env.h"
#include "parallel/layout.h"
#include "parallel/mpi_session.h"
#include "parallel/process_groups.h"

namespace brt::launch {

namespace {

// The checkpoint's run may have trained elsewhere (a GPU, fp64): where eval and generate
// compute is this command's --device / --precision (default cpu, fp32), like its --tp.
void reset_device_settings(RunConfig& cfg) {
  cfg.train.device = "cpu";
  cfg.train.precision = "fp32";
}

// The backend eval and generate compute on (docs/gpu.md): the CPU, or (--device cuda) the GPU
// of this rank's local rank in fp32 or bf16. Throws naming the key and rank on a bad setting.
std::unique_ptr<kernels::Backend<float>> command_backend(const RunConfig& cfg, int streams,
                                                         int world_rank, const char* command) {
  if (cfg.train.precision == "fp64")
    throw std::invalid_argument(std::string(command) + ": train.precision = \"fp64\" is not "
                                "supported here (it computes in fp32, or bf16 on the GPU)");
  int gpu_device = -1;
  if (cfg.train.device == "cuda") {
    const parallel::LaunchInfo where =
        parallel::query_launch_info(MPI_COMM_WORLD, parallel::process_env());
    gpu_device = bind_gpu_for_local_rank(where.local_rank).device;
  }
  validate_device_settings(cfg.train, gpu_device, world_rank);
  return make_run_backend<float>(cfg.train, gpu_device, cfg.model, streams);
}

// The checkpoint's config (its attributes verified: checkpoint/reader.h) with this command's
// overrides, and the monitor's deadline set from train.timeout_s.
RunConfig command_config(parallel::MpiSession& mpi, const CommandLine& cl, const std::string& ckpt,
                         const char* command) {
  if (ckpt.empty())
    throw UsageError(std::string("--checkpoint FILE is required (see brt-dist ") + command + " --help)");
  RunConfig cfg;
  {
    auto watched = mpi.monitor().guard("checkpoint open");
    cfg = config_of_checkpoint(ckpt);
  }
  cfg.train.tp = 1;  // the layout is this command's (--tp), not the saving run's
  reset_device_settings(cfg);
  with_command_line_config(cl, [&] {
    for (const auto& o : cl.overrides) apply_override(cfg, o);
  });
  parallel::MonitorSettings watch;
  watch.timeout_s = cfg.train.timeout_s;
  mpi.monitor().configure(watch);
  // Refused (exit 2) above 4 x the cores, before OpenMP starts a thread (launch/preflight.h).
  apply_threads(preflight_threads(cfg.train.threads, parallel::query_core_share(MPI_COMM_WORLD)));
  return cfg;
}

// The process groups of `--tp` over the world, after the layout check names any model key that
// does not split (docs/parallelism.md, "Tensor parallelism"); collectives under the deadline.
parallel::ProcessGroups tensor_parallel_groups(parallel::MpiSession& mpi, const RunConfig& cfg) {
  const core::ModelConfig& m = cfg.model;
  std::vector<parallel::SplitByTp> split = {
      {"model.heads", m.heads}, {"model.d_ff", m.d_ff}, {"model.vocab", m.vocab}};
  if (m.variant.rfind("rec", 0) == 0) split.push_back({"model.state_size", m.state_size});
  parallel::validate_layout(mpi.world_size(), cfg.train.tp, split);
  parallel::CommOptions comm;
  comm.timeout = std::chrono::milliseconds(int64_t(cfg.train.timeout_s * 1000));
  comm.monitor = &mpi.monitor();
  return parallel::make_mpi_process_groups(MPI_COMM_WORLD, cfg.train.tp, comm);
}

bool overrides_key(const CommandLine& cl, const std::string& key) {
  for (const auto& o : cl.overrides)
    if (o.rfind(key + "=", 0) == 0) return true;
  return false;
}

// The model's tensors, under the deadline phase by phase (and the fault suite's injection points).
void load_watched(parallel::MpiSession& mpi, const std::string& ckpt, core::Model<float>& model) {
  const FaultInjection faults = FaultInjection::from_environment();
  auto watched = mpi.monitor().guard("checkpoint load");
  load_model_parameters(ckpt, model, [&](const std::string& phase) {
    watched.phase(phase);
    faults.at_phase("checkpoint load: " + phase, mpi.world_rank());
  });
}

int run_eval(parallel::MpiSession& mpi, const CommandLine& cl) {
  const std::string ckpt = flag_or(cl, "checkpoint", cl.positional.empty() ? "" : cl.positional[0]);
  RunConfig cfg = command_config(mpi, cl, ckpt, "eval");
  const int64_t trained_seq_len = config_of_checkpoint(ckpt).model.seq_len;
  // Longer contexts (docs/evaluation.md): model.seq_len=N2 evaluates on longer segments. XL
  // attends over the whole segment, so its window follows unless given.
  if (cfg.model.variant == "xl" && !overrides_key(cl, "model.window")) cfg.model.window = cfg.model.seq_len;
  cfg.data.source = "shards";
  resolve(cfg);
  const std::string split = flag_or(cl, "split", cfg.data.eval_split);
  // --tp T: T consecutive ranks share each model (vocabulary-parallel cross-entropy: every
  // rank of a TP group gets the whole rows' losses); DP = ranks / T.
  const parallel::ProcessGroups groups = tensor_parallel_groups(mpi, cfg);
  // Each document is one stream's: streams beyond this rank's share of the documents would
  // only compute padding, so there are at most that many (the numbers do not depend on it).
  int streams = cfg.train.batch;
  try {
    const int64_t documents = data::TokenDataset::open(cfg.data.path, data::parse_split(split))->num_documents();
    const int64_t share = (documents + groups.dp().size() - 1) / groups.dp().size();
    streams = int(std::clamp<int64_t>(share, 1, cfg.train.batch));
  } catch (const std::exception&) {
    // Unreadable data: evaluate_split opens it again and reports it, after the checkpoint has
    // been loaded and verified (a damaged checkpoint is the first thing a user must hear of).
  }
  // Where it writes and what it allocates, checked before the model (launch/preflight.h; exit 2).
  preflight_outputs(groups.world(),
                    {{"--json", flag_or(cl, "json", "")}, {"--token-losses", flag_or(cl, "token-losses", "")}});
  preflight_inference_memory(groups.world(), cfg, streams, "eval");
  auto backend = command_backend(cfg, streams, mpi.world_rank(), "eval");
  std::unique_ptr<parallel::Communicator> device_tp;
  core::Model<float> model(cfg.model, streams, *backend,
                           make_run_tensor_parallel(groups.tp(), *backend, device_tp));
  const DeviceWaitWatch device_waits(*backend, {device_tp.get()});
  load_watched(mpi, ckpt, model);
  check_data_tokenizer(ckpt, cfg.data.path, cl.flags.count("allow-tokenizer-mismatch") > 0, mpi.world_rank() == 0);
  // Documents are dealt to the streams of all DP ranks; totals are summed over the dp group.
  parallel::Communicator& dp = groups.dp();
  const SumReducer sum_over_ranks = [&dp](std::vector<double>& v) { dp.all_reduce(v); };
  const bool root = mpi.world_rank() == 0;
  EvalOptions options;
  options.dp_rank = groups.dp_rank();
  options.dp_size = dp.size();
  options.reduce = sum_over_ranks;
  options.progress = root && !cl.flags.count("quiet");
  options.trained_seq_len = trained_seq_len;
  options.ablate = cl.flags.count("ablate") > 0;
  options.layer_stats = true;  // none under TP (core/layer.h)
  const std::string token_losses_path = flag_or(cl, "token-losses", "");
  options.token_losses = !token_losses_path.empty();
  if (options.token_losses && dp.size() > 1)
    throw UsageError("eval --token-losses writes one process's losses: run it with one data-parallel "
                     "rank (no mpirun, or --tp equal to the ranks), not " + std::to_string(dp.size()));
  const EvalReport r = evaluate_split(model, cfg, split, options);
  if (!root) return 0;
  std::printf("%s", r.text().c_str());  // first: a failed file below still leaves the report
  std::fflush(stdout);
  // Both outputs through a checked .tmp (data/output_file.h): a full disk is an error naming the
  // file and the reason, and leaves neither a partial file nor its .tmp.
  if (options.token_losses) {  // doc_id, position in the document, nats: one line per target
    data::AtomicOutputFile out(token_losses_path);
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
  return 0;
}

// The sampling flags, checked before anything is loaded: ranges as `brt-dist help generate` states.
SamplingOptions sampling_options(const CommandLine& cl) {
  SamplingOptions opt;
  opt.max_tokens = int(int_flag(cl, "max-tokens", 200, 1, std::numeric_limits<int>::max()));
  opt.temperature = double_flag(cl, "temperature", 0.8, Range::at_least(0));
  opt.top_k = int(int_flag(cl, "top-k", 0, 0, std::numeric_limits<int>::max()));
  opt.top_p = double_flag(cl, "top-p", 0.95, {0, 1, true, false});
  opt.seed = uint64_flag(cl, "seed", 1);
  return opt;
}

int run_generate(parallel::MpiSession& mpi, const CommandLine& cl) {
  const SamplingOptions opt = sampling_options(cl);
  const std::string ckpt = flag_or(cl, "checkpoint", cl.positional.empty() ? "" : cl.positional[0]);
  RunConfig cfg = command_config(mpi, cl, ckpt, "generate");
  // One block per segment: the carried state is the whole context before the current block.
  cfg.model.seq_len = cfg.model.window;
  std::string tokenizer_path = flag_or(cl, "tokenizer", "");
  if (tokenizer_path.empty() && !cfg.data.path.empty())
    tokenizer_path = (std::filesystem::path(cfg.data.path) / "tokenizer.model").string();
  if (tokenizer_path.empty())
    throw UsageError("generate: the checkpoint's run had no tokenizer (synthetic data); "
                     "give --tokenizer FILE.model");
  const data::Tokenizer tokenizer = data::Tokenizer::load(tokenizer_path);
  // --tp T under mpirun -np T: the ranks share one model; logits are gathered over the
  // vocabulary slices, every rank draws the same tokens, world rank 0 prints.
  if (mpi.world_size() != cfg.train.tp)
    throw UsageError("generate: runs on exactly --tp ranks (" + std::to_string(cfg.train.tp) + "), not " +
                     std::to_string(mpi.world_size()));
  const parallel::ProcessGroups groups = tensor_parallel_groups(mpi, cfg);
  const bool root = mpi.world_rank() == 0;
  preflight_inference_memory(groups.world(), cfg, 1, "generate");  // before the model (launch/preflight.h)
  auto backend = command_backend(cfg, 1, mpi.world_rank(), "generate");
  std::unique_ptr<parallel::Communicator> device_tp;
  core::Model<float> model(cfg.model, 1, *backend,
                           make_run_tensor_parallel(groups.tp(), *backend, device_tp));
  const DeviceWaitWatch device_waits(*backend, {device_tp.get()});
  load_watched(mpi, ckpt, model);
  check_model_tokenizer(ckpt, tokenizer_path, tokenizer.hash(), cl.flags.count("allow-tokenizer-mismatch") > 0, root);
  const std::string prompt = flag_or(cl, "prompt", "");
  if (root && !cl.flags.count("quiet")) std::printf("%s", prompt.c_str());
  Generator gen(model);
  generate_text(gen, tokenizer, prompt, opt, [root](const std::string& piece) {
    if (!root) return;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  if (root) std::printf("\n");
  return 0;
}

}  // namespace

// The command lines are read inside run_mpi_main: a bad flag is reported once per job.
int command_eval(int argc, char** argv) {
  return parallel::run_mpi_main(
      argc, argv,
      [&](parallel::MpiSession& mpi) {
        const CommandLine cl = parse_command_line(
            argc, argv, {{"data", "data.path"}, {"batch", "train.batch"}, {"tp", "train.tp"},
                         {"device", "train.device"}, {"precision", "train.precision"}},
            {"quiet", "ablate", "allow-tokenizer-mismatch"});
        reject_unknown_flags(cl, {"checkpoint", "split", "json", "quiet", "ablate", "token-losses",
                                  "allow-tokenizer-mismatch"});
        choice_flag(cl, "split", "", {"train", "validation", "test"});
        reject_extra_arguments(cl, 1);
        return run_eval(mpi, cl);
      },
      "brt-dist eval");
}

int command_generate(int argc, char** argv) {
  return parallel::run_mpi_main(
      argc, argv,
      [&](parallel::MpiSession& mpi) {
        const CommandLine cl = parse_command_line(
            argc, argv, {{"tp", "train.tp"}, {"device", "train.device"}, {"precision", "train.precision"}},
            {"quiet", "allow-tokenizer-mismatch"});
        reject_unknown_flags(cl, {"checkpoint", "prompt", "tokenizer", "max-tokens", "temperature",
                                  "top-k", "top-p", "seed", "quiet", "allow-tokenizer-mismatch"});
        reject_extra_arguments(cl, 1);
        return run_generate(mpi, cl);
      },
      "brt-dist generate");
}

}  // namespace brt::launch
