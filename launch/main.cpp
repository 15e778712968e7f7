// brt-dist: one binary for training, data preparation, evaluation and checkpoint tools.
#include <cstdio>
#include <exception>
#include <string>

#include "checkpoint/types.h"
#include "kernels/blas_env.h"
#include "launch/commands.h"
#include "launch/version.h"

namespace {

void usage() {
  std::printf(
      "brt-dist %s — Block-Recurrent / Block-State Transformer training\n\n"
      "usage: brt-dist COMMAND [args]\n\n"
      "commands:\n"
      "  train CONFIG [key=value ...]   train a model (e.g. configs/tiny.toml train.steps=100)\n"
      "                                 [--tp T] [--device cpu|cuda] [--precision fp32|bf16|fp64]\n"
      "                                 [--deterministic] [--resume FILE|DIR] [--no-overlap]\n"
      "  prepare ...                    corpus -> tokenizer -> token shards\n"
      "  eval CONFIG --checkpoint F     bits/token, bits/byte, word perplexity of a split [--tp T]\n"
      "                                 [--device cpu|cuda] [--precision fp32|bf16]\n"
      "  ckpt inspect|verify FILE       show or check a checkpoint (diff A B [--rtol R]: compare)\n"
      "  generate --checkpoint F --prompt TEXT [--seed S --temperature T --top-k K --top-p P]\n"
      "                                 sample text, streaming, with unbounded context [--tp T]\n"
      "                                 [--device cpu|cuda] [--precision fp32|bf16]\n"
      "  plan CONFIG --cluster C.toml --global-batch G   layouts with predicted memory and step time\n"
      "  doctor [--checkpoint-dir DIR]  preflight: ranks, hosts, MPI, BLAS, all-reduce, disk (mpirun)\n"
      "  version                        print the version\n\n"
      "Any config key can be overridden as section.key=value or --section.key value.\n",
      brt::launch::version());
}

}  // namespace

int main(int argc, char** argv) {
  brt::kernels::ensure_blas_core_type(argc, argv);
  brt::checkpoint::silence_hdf5_diagnostics();
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  try {
    if (command == "version" || command == "--version") {
      std::printf("brt-dist %s\n", brt::launch::version());
      return 0;
    }
    if (command == "train") return brt::launch::command_train(argc, argv);
    if (command == "prepare") return brt::launch::command_prepare(argc, argv);
    if (command == "eval") return brt::launch::command_eval(argc, argv);
    if (command == "ckpt") return brt::launch::command_ckpt(argc, argv);
    if (command == "generate") return brt::launch::command_generate(argc, argv);
    if (command == "plan") return brt::launch::command_plan(argc, argv);
    if (command == "doctor") return brt::launch::command_doctor(argc, argv);
    std::fprintf(stderr, "brt-dist: unknown command '%s' (see brt-dist --help)\n",
                 command.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brt-dist %s: error: %s\n", command.c_str(), e.what());
    return 1;
  }
}
