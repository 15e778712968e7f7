#include "launch/help.h"

#include <cstring>
#include <stdexcept>
#include <vector>

#include "launch/config_keys.h"
#include "launch/version.h"

namespace brt::launch {

namespace {

struct Flag {
  const char* name;
  const char* meaning;
};

struct CommandHelp {
  const char* name;
  const char* summary;  // one line for the overview
  const char* usage;
  std::vector<Flag> flags;
  std::vector<const char*> examples;
  bool takes_config_keys;
  const char* notes;
};

const std::vector<CommandHelp>& commands() {
  static const std::vector<CommandHelp> table = {
      {"train", "train a model from a config",
       "brt-dist train CONFIG [key=value ...] [flags]",
       {{"--resume FILE|DIR", "continue from exactly FILE, or DIR's newest good checkpoint (must exist)"},
        {"--tp T", "tensor-parallel size (train.tp); DP = ranks / T"},
        {"--device cpu|cuda", "where the model lives and runs (train.device)"},
        {"--precision fp32|bf16|fp64", "train.precision"},
        {"--steps N", "train.steps"},
        {"--seed S", "train.seed"},
        {"--threads N", "train.threads (0: fit the cores of this rank's share of the node)"},
        {"--peak-gflops G", "train.peak_gflops (the MFU denominator)"},
        {"--checkpoint-dir DIR", "checkpoint.dir"},
        {"--deterministic", "cuda: bit-identical reruns"},
        {"--no-overlap", "reduce gradients after backward, not during it"},
        {"--section.key VALUE", "any config key, like section.key=VALUE"}},
       {"brt-dist train configs/tiny.toml train.steps=200 optim.lr=0.01",
        "brt-dist train configs/40m.toml checkpoint.dir=runs/40m/ckpt      # resumes when it can",
        "mpirun -np 4 brt-dist train configs/tiny.toml --tp 2",
        "brt-dist config show configs/tiny.toml train.steps=200            # the resolved config"},
       true,
       "Exit status: 0 finished, 75 stopped by a signal after a checkpoint (requeue), 124 a stalled\n"
       "wait (train.timeout_s), 1 any other error (printed). docs/reliability.md."},
      {"eval", "bits/token, bits/byte and word perplexity of a checkpoint on a split",
       "brt-dist eval --checkpoint FILE [--split NAME] [--json FILE] [--ablate] [key=value ...] [flags]",
       {{"--checkpoint FILE", "the checkpoint (its stored config is the base; keys override it)"},
        {"--split NAME", "the split (default: data.eval_split)"},
        {"--json FILE", "also write the report as JSON"},
        {"--data DIR", "data.path (shards moved since training)"},
        {"--batch B", "train.batch: streams per rank"},
        {"--tp T", "tensor-parallel size; DP = ranks / T"},
        {"--device cpu|cuda", "train.device (default cpu)"},
        {"--precision fp32|bf16", "train.precision (default fp32)"},
        {"--ablate", "two more passes with the carried state reset at every segment / block"},
        {"--token-losses FILE", "every predicted target's loss: doc_id, position, nats (TSV; one DP rank)"},
        {"--quiet", "no progress output"}},
       {"brt-dist eval --checkpoint runs/tiny/ckpt/ckpt-00000600.h5 --split test",
        "brt-dist eval --checkpoint FILE --ablate --json eval.json   # long-range diagnostics",
        "mpirun -np 2 brt-dist eval --checkpoint FILE --json eval.json train.timeout_s=300"},
       true, nullptr},
      {"generate", "sample text from a checkpoint, streaming, with unbounded context",
       "brt-dist generate --checkpoint FILE --prompt TEXT [flags] [key=value ...]",
       {{"--checkpoint FILE", "the checkpoint"},
        {"--prompt TEXT", "the text to continue"},
        {"--tokenizer FILE.model", "SentencePiece model (default: data.path/tokenizer.model)"},
        {"--max-tokens N", "tokens to sample (200)"},
        {"--temperature T", "0.8"},
        {"--top-k K", "0: off"},
        {"--top-p P", "0.95"},
        {"--seed S", "1"},
        {"--tp T", "run on exactly T ranks under mpirun"},
        {"--device cpu|cuda", "train.device (default cpu)"},
        {"--precision fp32|bf16", "train.precision (default fp32)"},
        {"--quiet", "do not echo the prompt"}},
       {"brt-dist generate --checkpoint FILE --prompt \"In the beginning\" --seed 1"},
       true, nullptr},
      {"prepare", "corpus -> tokenizer -> token shards (documents split over the ranks)",
       "brt-dist prepare (--corpus DIR | --files LIST | --kjv) --out DIR [flags]",
       {{"--corpus DIR", "a PG19-style corpus: DIR/train, DIR/validation, DIR/test, one document per file"},
        {"--files LIST", "a text file naming one document per line (train split)"},
        {"--kjv", "the bundled default corpus: the King James Bible (Debian's bible-kjv)"},
        {"--out DIR", "where the tokenizer, shards, index and manifest go (restartable)"},
        {"--tokenizer FILE.model", "use this SentencePiece model instead of training one"},
        {"--vocab N", "tokenizer size (default: model.vocab of --config, else 4096)"},
        {"--config FILE", "read model.vocab from this config"},
        {"--model-type bpe|unigram", "SentencePiece model type (bpe)"},
        {"--on-bad-document fail|skip", "a document that is not UTF-8 text: stop naming it, or skip it"},
        {"--shard-mb MB", "input megabytes per shard (4)"},
        {"--timeout-s S", "a wait for another rank longer than this ends the job (600)"},
        {"--quiet", "no progress output"}},
       {"brt-dist prepare --kjv --out runs/kjv/data",
        "mpirun -np 4 brt-dist prepare --corpus /data/pg19 --out runs/pg19/data --config configs/150m.toml"},
       false, nullptr},
      {"ckpt", "inspect, verify or compare checkpoints",
       "brt-dist ckpt inspect FILE | verify FILE | diff FILE_A FILE_B [--rtol R]",
       {{"inspect FILE", "format, step, layout, config, every tensor and its checksum status"},
        {"verify FILE", "read everything and check every checksum; exit 1 on damage, naming it"},
        {"diff A B", "compare every tensor bit for bit"},
        {"--rtol R", "diff: float tensors within relative difference R count as equal"}},
       {"brt-dist ckpt verify runs/tiny/ckpt/ckpt-00000600.h5", "brt-dist ckpt diff A.h5 B.h5 --rtol 1e-5"},
       false, nullptr},
      {"config", "show the fully resolved config a run would use, or list every key",
       "brt-dist config show CONFIG [key=value ...] | brt-dist config keys",
       {{"show CONFIG", "the resolved TOML: every key, inheritance (base = ...) and overrides applied"},
        {"keys", "every config key with its type, default and meaning"}},
       {"brt-dist config show configs/40m.toml train.batch=8", "brt-dist config keys"},
       false, nullptr},
      {"plan", "feasible (DP, TP, ZeRO) layouts with predicted memory and step time",
       "brt-dist plan CONFIG --cluster CLUSTER.toml --global-batch G [--dp N] [--tp N] [--measured M.jsonl] "
       "[key=value ...] | brt-dist plan CONFIG --measure-rates OUT.toml [--device D] [--precision P]",
       {{"--cluster FILE", "the cluster description (configs/clusters/)"},
        {"--global-batch G", "streams in the global batch"},
        {"--dp N, --tp N", "exit 3 unless a layout with these degrees fits"},
        {"--measured M.jsonl", "print the layout's predicted step time next to this run's measured one"},
        {"--measure-rates OUT", "time this device's GEMM, attention and memory rates at CONFIG's shapes "
                                "and write a one-device cluster file with them"},
        {"--device D, --precision P", "--measure-rates: cpu|cuda, fp32|bf16 (as train)"},
        {"--seconds S", "--measure-rates: time per kernel class (default 1)"}},
       {"brt-dist plan configs/1.3b.toml --cluster configs/clusters/h200-8x8.toml --global-batch 64",
        "brt-dist plan configs/150m.toml --measure-rates gpu.toml --device cuda --precision bf16 train.batch=4",
        "brt-dist plan configs/150m.toml --cluster gpu.toml --global-batch 4 --measured runs/150m/metrics.jsonl"},
       false, nullptr},
      {"doctor", "preflight checks: ranks, MPI, BLAS, all-reduce, checkpoint disk",
       "brt-dist doctor [--checkpoint-dir DIR] [--min-free-gb GB]   (under mpirun -np N for N ranks)",
       {{"--checkpoint-dir DIR", "where checkpoints will go (checked for writability and space)"},
        {"--min-free-gb GB", "free space below this is a problem"}},
       {"mpirun -np 4 brt-dist doctor --checkpoint-dir runs/x/ckpt"},
       false, nullptr},
      {"version", "print the version", "brt-dist version", {}, {}, false, nullptr},
      {"help", "this help, or one command's", "brt-dist help [COMMAND]", {}, {"brt-dist help train"}, false, nullptr},
  };
  return table;
}

const CommandHelp* find_command(const std::string& name) {
  for (const auto& c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

std::string padded(std::string text, size_t width) {
  if (text.size() < width) text.resize(width, ' ');
  return text;
}

}  // namespace

std::string overview_text() {
  std::string out = std::string("brt-dist ") + version() +
                    " — Block-Recurrent / Block-State Transformer training\n\nusage: brt-dist COMMAND [args]\n\n"
                    "commands:\n";
  for (const auto& c : commands()) out += "  " + padded(c.name, 10) + c.summary + "\n";
  out += "\n`brt-dist help COMMAND` or `brt-dist COMMAND --help` shows a command's flags and examples;\n"
         "`brt-dist config keys` lists every config key (section.key=value on any command line).\n";
  return out;
}

std::string help_text(const std::string& command) {
  const CommandHelp* c = find_command(command);
  if (c == nullptr) throw std::invalid_argument("unknown command '" + command + "' (see brt-dist help)");
  std::string out = std::string("brt-dist ") + c->name + ": " + c->summary + "\n\nusage: " + c->usage + "\n";
  if (!c->flags.empty()) {
    out += "\nflags:\n";
    for (const auto& f : c->flags) out += "  " + padded(f.name, 28) + " " + f.meaning + "\n";
  }
  if (!c->examples.empty()) {
    out += "\nexamples:\n";
    for (const char* e : c->examples) out += std::string("  ") + e + "\n";
  }
  if (c->notes != nullptr) out += std::string("\n") + c->notes + "\n";
  if (c->takes_config_keys) out += "\nconfig keys (section.key=value, or --section.key value):\n" + config_keys_text();
  return out;
}

std::string config_keys_text() {
  const RunConfig defaults;
  std::string out, section;
  for (const auto& spec : config_keys()) {
    const std::string sec = spec.key.substr(0, spec.key.find('.'));
    if (sec != section) {
      out += "  [" + sec + "]\n";
      section = sec;
    }
    std::string type = type_name(spec.type);
    std::string line = "    " + padded(spec.key, 30) + " " + padded(type, 20) + " default " +
                       padded(value_text(spec.get(defaults)), 14) + " " + spec.help + "\n";
    out += line;
  }
  return out;
}

bool wants_help(int argc, char** argv) {
  for (int i = 2; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return true;
  return false;
}

}  // namespace brt::launch
