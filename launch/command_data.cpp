// `brt-dist prepare` and `brt-dist eval` (issue 3).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "data/kjv.h"
#include "data/prepare.h"
#include "launch/cli.h"
#include "launch/commands.h"
#include "launch/config.h"
#include "launch/device_backend.h"
#include "launch/evaluator.h"
#include "launch/generator.h"
#include "launch/gpu_binding.h"
#include "launch/training_checkpoint.h"
#include "parallel/launch_env.h"
#include "parallel/layout.h"
#include "parallel/mpi_session.h"
#include "parallel/process_groups.h"

namespace brt::launch {

namespace {

std::string flag_or(const CommandLine& cl, const std::string& name, const std::string& fallback) {
  auto it = cl.flags.find(name);
  return it == cl.flags.end() ? fallback : it->second;
}

void reject_unknown_flags(const CommandLine& cl, std::initializer_list<const char*> known) {
  for (const auto& [flag, value] : cl.flags) {
    bool ok = false;
    for (const char* k : known) ok = ok || flag == k;
    if (!ok) throw std::invalid_argument("command line: unknown flag --" + flag);
  }
}

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

}  // namespace

int command_prepare(int argc, char** argv) {
  const CommandLine cl = parse_command_line(argc, argv, {}, {"kjv", "quiet"});
  reject_unknown_flags(cl, {"corpus", "files", "out", "tokenizer", "vocab", "model-type",
                            "on-bad-document", "shard-mb", "kjv", "quiet", "bible", "config"});
  parallel::MpiSession mpi(&argc, &argv);
  data::PrepareOptions opt;
  opt.output_dir = flag_or(cl, "out", "");
  if (opt.output_dir.empty()) throw std::invalid_argument("prepare: --out DIR is required");
  opt.corpus_dir = flag_or(cl, "corpus", "");
  if (cl.flags.count("kjv")) {
    // The bundled default corpus: the King James Bible (Debian's bible-kjv), one document per
    // book, written as a PG19-style corpus next to the shards.
    opt.corpus_dir = opt.output_dir / "corpus";
    if (mpi.world_rank() == 0) {
      const auto books = data::write_kjv_corpus(opt.corpus_dir, flag_or(cl, "bible", "bible"));
      std::printf("prepare: wrote the King James Bible (%zu books) to %s\n", books.size(),
                  opt.corpus_dir.c_str());
    }
    MPI_Barrier(MPI_COMM_WORLD);
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
  const data::PrepareResult r = data::prepare_corpus(opt, MPI_COMM_WORLD);
  if (mpi.world_rank() == 0)
    std::printf("prepare: %lld documents in %d shards (%d written, %d reused), tokenizer %s%s, "
                "%.2f MB/s\n",
                (long long)r.documents, r.shards_total, r.shards_written, r.shards_reused,
                r.tokenizer_hash.c_str(), r.tokenizer_trained ? " (trained)" : "",
                r.megabytes_per_second);
  return 0;
}

namespace {

// The process groups of `--tp` over the world, after the layout check names any model key that
// does not split (docs/parallelism.md, "Tensor parallelism").
parallel::ProcessGroups tensor_parallel_groups(const core::ModelConfig& m, int world, int tp) {
  std::vector<parallel::SplitByTp> split = {
      {"model.heads", m.heads}, {"model.d_ff", m.d_ff}, {"model.vocab", m.vocab}};
  if (m.variant.rfind("rec", 0) == 0) split.push_back({"model.state_size", m.state_size});
  parallel::validate_layout(world, tp, split);
  return parallel::make_mpi_process_groups(MPI_COMM_WORLD, tp);
}

}  // namespace

int command_eval(int argc, char** argv) {
  const CommandLine cl = parse_command_line(
      argc, argv, {{"data", "data.path"}, {"batch", "train.batch"}, {"tp", "train.tp"},
                   {"device", "train.device"}, {"precision", "train.precision"}}, {"quiet"});
  reject_unknown_flags(cl, {"checkpoint", "split", "json", "quiet"});
  parallel::MpiSession mpi(&argc, &argv);
  const std::string ckpt = flag_or(cl, "checkpoint", cl.positional.empty() ? "" : cl.positional[0]);
  if (ckpt.empty()) throw std::invalid_argument("eval: --checkpoint FILE is required");
  RunConfig cfg = config_of_checkpoint(ckpt);
  cfg.train.tp = 1;  // the layout is this command's (--tp), not the saving run's
  reset_device_settings(cfg);
  for (const auto& o : cl.overrides) apply_override(cfg, o);
  cfg.data.source = "shards";
  resolve(cfg);
  const std::string split = flag_or(cl, "split", cfg.data.eval_split);
  // --tp T: T consecutive ranks share each model (vocabulary-parallel cross-entropy: every
  // rank of a TP group gets the whole rows' losses); DP = ranks / T.
  const parallel::ProcessGroups groups = tensor_parallel_groups(cfg.model, mpi.world_size(), cfg.train.tp);
  auto backend = command_backend(cfg, cfg.train.batch, mpi.world_rank(), "eval");
  std::unique_ptr<parallel::Communicator> device_tp;
  core::Model<float> model(cfg.model, cfg.train.batch, *backend,
                           make_run_tensor_parallel(groups.tp(), *backend, device_tp));
  load_model_parameters(ckpt, model);
  // Documents are dealt to the streams of all DP ranks; totals are summed over the dp group.
  parallel::Communicator& dp = groups.dp();
  const SumReducer sum_over_ranks = [&dp](std::vector<double>& v) { dp.all_reduce(v); };
  const bool root = mpi.world_rank() == 0;
  const EvalReport r = evaluate_split(model, cfg, split, groups.dp_rank(), dp.size(),
                                      sum_over_ranks, root && !cl.flags.count("quiet"));
  if (!root) return 0;
  std::printf("%s", r.text().c_str());
  if (auto path = flag_or(cl, "json", ""); !path.empty()) {
    std::ofstream out(path);
    if (!out) throw std::runtime_error("eval: cannot write " + path);
    out << r.json() << "\n";
  }
  return 0;
}

int command_generate(int argc, char** argv) {
  const CommandLine cl = parse_command_line(
      argc, argv, {{"tp", "train.tp"}, {"device", "train.device"}, {"precision", "train.precision"}},
      {"quiet"});
  reject_unknown_flags(cl, {"checkpoint", "prompt", "tokenizer", "max-tokens", "temperature",
                            "top-k", "top-p", "seed", "quiet"});
  parallel::MpiSession mpi(&argc, &argv);
  const std::string ckpt = flag_or(cl, "checkpoint", cl.positional.empty() ? "" : cl.positional[0]);
  if (ckpt.empty()) throw std::invalid_argument("generate: --checkpoint FILE is required");
  RunConfig cfg = config_of_checkpoint(ckpt);
  cfg.train.tp = 1;  // the layout is this command's (--tp), not the saving run's
  reset_device_settings(cfg);
  for (const auto& o : cl.overrides) apply_override(cfg, o);
  // One block per segment: the carried state is the whole context before the current block.
  cfg.model.seq_len = cfg.model.window;
  std::string tokenizer_path = flag_or(cl, "tokenizer", "");
  if (tokenizer_path.empty() && !cfg.data.path.empty())
    tokenizer_path = (std::filesystem::path(cfg.data.path) / "tokenizer.model").string();
  if (tokenizer_path.empty())
    throw std::invalid_argument("generate: the checkpoint's run had no tokenizer (synthetic data); "
                                "give --tokenizer FILE.model");
  const data::Tokenizer tokenizer = data::Tokenizer::load(tokenizer_path);
  // --tp T under mpirun -np T: the ranks share one model; logits are gathered over the
  // vocabulary slices, every rank draws the same tokens, world rank 0 prints.
  if (mpi.world_size() != cfg.train.tp)
    throw std::invalid_argument("generate: runs on exactly --tp ranks (" + std::to_string(cfg.train.tp) +
                                "), not " + std::to_string(mpi.world_size()));
  const parallel::ProcessGroups groups = tensor_parallel_groups(cfg.model, mpi.world_size(), cfg.train.tp);
  const bool root = mpi.world_rank() == 0;
  auto backend = command_backend(cfg, 1, mpi.world_rank(), "generate");
  std::unique_ptr<parallel::Communicator> device_tp;
  core::Model<float> model(cfg.model, 1, *backend,
                           make_run_tensor_parallel(groups.tp(), *backend, device_tp));
  load_model_parameters(ckpt, model);
  SamplingOptions opt;
  opt.max_tokens = std::stoi(flag_or(cl, "max-tokens", "200"));
  opt.temperature = std::stod(flag_or(cl, "temperature", "0.8"));
  opt.top_k = std::stoi(flag_or(cl, "top-k", "0"));
  opt.top_p = std::stod(flag_or(cl, "top-p", "0.95"));
  opt.seed = std::stoull(flag_or(cl, "seed", "1"));
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

}  // namespace brt::launch
