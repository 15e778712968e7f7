// `brt-dist generate`: text sampled from a checkpoint's model, one block per segment with its
// carried state as the context (launch/eval/generator.h), on --tp ranks, every wait under
// train.timeout_s and every error named (docs/reliability.md).
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

#include "data/tokenizer.h"
#include "launch/cli/checkpoint_model.h"
#include "launch/cli/cli.h"
#include "launch/cli/commands/commands.h"
#include "launch/config/config.h"
#include "launch/eval/generator.h"
#include "launch/eval/tokenizer_match.h"
#include "launch/preflight/preflight.h"
#include "launch/run/run_groups.h"
#include "parallel/mpi/mpi_session.h"
#include "parallel/process_groups.h"

namespace brt::launch {

namespace {

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
  const std::string ckpt =
      resolve_checkpoint_argument(mpi, flag_or(cl, "checkpoint", cl.positional.empty() ? "" : cl.positional[0]), "generate");
  RunConfig cfg = checkpoint_command_config(mpi, cl, ckpt, "generate", nullptr);
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
  const parallel::ProcessGroups groups = make_run_groups(mpi, cfg, CpWork::kGenerate);
  const bool root = mpi.world_rank() == 0;
  preflight_inference_memory(groups.world(), cfg, 1, "generate");  // before the model (launch/preflight/preflight.h)
  const auto run = load_checkpoint_model(mpi, cfg, groups, 1, ckpt, "generate");
  check_model_tokenizer(ckpt, tokenizer_path, tokenizer.hash(), cl.flags.count("allow-tokenizer-mismatch") > 0, root);
  const std::string prompt = flag_or(cl, "prompt", "");
  if (root && !cl.flags.count("quiet")) std::printf("%s", prompt.c_str());
  Generator gen(run->model());
  generate_text(gen, tokenizer, prompt, opt, [root](const std::string& piece) {
    if (!root) return;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  if (root) std::printf("\n");
  return 0;
}

}  // namespace

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
