#include "launch/cli/help.h"

#include <cstring>
#include <stdexcept>
#include <vector>

#include "launch/cli/version.h"
#include "launch/config/config_keys.h"

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
        {"--tp T", "tensor-parallel size (train.tp); DP = ranks / (T x C)"},
        {"--cp C", "context-parallel size (train.cp): each segment's N/C tokens per rank (slide, xl, bst:*:s4d)"},
        {"--device cpu|cuda", "where the model lives and runs (train.device)"},
        {"--precision fp32|bf16|fp64", "train.precision"},
        {"--steps N", "train.steps"},
        {"--seed S", "train.seed"},
        {"--threads N", "train.threads (0: fit the cores of this rank's share of the node; at most 4 x its cores)"},
        {"--peak-gflops G", "train.peak_gflops (the MFU denominator)"},
        {"--checkpoint-dir DIR", "checkpoint.dir"},
        {"--deterministic", "bit-identical reruns: the same numerics on every rank (exit 2 otherwise); cuda: NCCL pinned"},
        {"--no-overlap", "reduce gradients after backward, not during it"},
        {"--section.key VALUE", "any config key, like section.key=VALUE"}},
       {"brt-dist train configs/tiny.toml train.steps=200 optim.lr=0.01",
        "brt-dist train configs/40m.toml checkpoint.dir=runs/40m/ckpt      # resumes when it can",
        "mpirun -np 4 brt-dist train configs/tiny.toml --tp 2",
        "mpirun -np 4 brt-dist train configs/tiny.toml model.variant=bst:sh:s4d --cp 4  # one segment, 4 ranks",
        "brt-dist config show configs/tiny.toml train.steps=200            # the resolved config"},
       true,
       "Ctrl-C, SIGTERM, SIGUSR1: stop after this step, saving a checkpoint first (checkpoint.dir). A\n"
       "second Ctrl-C exits at once: the save in progress is abandoned and its .tmp removed."},
      {"eval", "bits/token, bits/byte and word perplexity of a checkpoint on a split; long-range tasks",
       "brt-dist eval --checkpoint FILE [--split NAME] [--json FILE] [--ablate] [key=value ...] [flags]\n"
       "       brt-dist eval --checkpoint FILE --task passkey|needle|facts [--lengths L,...] [--depths D,...] [flags]\n"
       "       brt-dist eval --checkpoint FILE --task mqar [--pairs P,...] [--gaps G,...] [flags]",
       {{"--checkpoint FILE", "the checkpoint (its stored config is the base; keys override it); a run's checkpoint.dir: its newest checkpoint"},
        {"--split NAME", "train|validation|test (default: data.eval_split)"},
        {"--json FILE", "also write the report as JSON (checked: a full disk is an error, no partial file)"},
        {"--data DIR", "data.path (shards moved since training)"},
        {"--batch B", "train.batch: streams per rank"},
        {"--tp T", "tensor-parallel size; DP = ranks / (T x C)"},
        {"--cp C", "context-parallel size: each segment's N/C tokens per rank (not with --task)"},
        {"--device cpu|cuda", "train.device (default cpu)"},
        {"--precision fp32|bf16", "train.precision (default fp32)"},
        {"--ablate", "two more passes with the carried state reset at every segment / block"},
        {"--token-losses FILE", "every predicted target's loss: doc_id, position, nats (TSV; one DP rank)"},
        {"--allow-tokenizer-mismatch", "evaluate data of another tokenizer than the checkpoint's (a warning)"},
        {"--quiet", "no progress output"},
        {"--task passkey|needle|facts", "long-range task documents built from the split's books, scored on the answer"},
        {"--lengths L1,L2,...", "--task: document lengths in tokens (default N,2N,4N,8N of model.seq_len)"},
        {"--depths d1,d2,...", "--task: where the fact sits, 0 (first) .. 1 (right before the question) "
                               "(default 0,0.25,0.5,0.75,1)"},
        {"--samples N", "--task: documents per length x depth cell (8)"},
        {"--digits K", "--task passkey: digits of the pass key, 1..18 (5)"},
        {"--facts F", "--task facts: statements in all, 2..4 (3)"},
        {"--supporting-facts S", "--task facts: 1 (qa1) or 2 (qa2) (1)"},
        {"--task-seed S", "--task: the grid's seed (1)"},
        {"--task mqar", "multi-query associative recall on model.vocab's own ids (no corpus): accuracy per answer"},
        {"--pairs P1,P2,...", "--task mqar: key-value pairs per document (default 4,8,16)"},
        {"--gaps G1,G2,...", "--task mqar: filler between the pairs and the queries, in windows W (default 0.5,1,2,4)"}},
       {"brt-dist eval --checkpoint runs/tiny/ckpt/ckpt-00000600.h5 --split test",
        "brt-dist eval --checkpoint FILE --ablate --json eval.json   # long-range diagnostics",
        "mpirun -np 2 brt-dist eval --checkpoint FILE --json eval.json train.timeout_s=300",
        "brt-dist eval --checkpoint FILE --task passkey --lengths 1024,4096 --json passkey.json --ablate",
        "brt-dist eval --checkpoint FILE --task mqar --pairs 4,16 --gaps 0.5,2,8 --json mqar.json --ablate"},
       true,
       "--task: docs/evaluation.md, \"Long-range tasks\" (the grid, the scoring, the JSON); with --ablate the grid\n"
       "again with the carried state reset; tools/task_heatmap.py draws the JSON. --task mqar: docs/fidelity.md, \"MQAR\"."},
      {"generate", "sample text from a checkpoint, streaming, with unbounded context",
       "brt-dist generate --checkpoint FILE --prompt TEXT [flags] [key=value ...]",
       {{"--checkpoint FILE", "the checkpoint; a run's checkpoint.dir: its newest checkpoint"},
        {"--prompt TEXT", "the text to continue"},
        {"--tokenizer FILE.model", "SentencePiece model (default: data.path/tokenizer.model)"},
        {"--max-tokens N", "tokens to sample, >= 1 (200)"},
        {"--temperature T", ">= 0, 0: greedy (0.8)"},
        {"--top-k K", ">= 0, 0: off (0)"},
        {"--top-p P", "in (0, 1], 1: off (0.95)"},
        {"--seed S", "a whole number in [0, 2^64) (1)"},
        {"--tp T", "run on exactly T ranks under mpirun"},
        {"--device cpu|cuda", "train.device (default cpu)"},
        {"--precision fp32|bf16", "train.precision (default fp32)"},
        {"--allow-tokenizer-mismatch", "decode with another tokenizer than the checkpoint's (a warning)"},
        {"--quiet", "do not echo the prompt"}},
       {"brt-dist generate --checkpoint FILE --prompt \"In the beginning\" --seed 1"},
       true, nullptr},
      {"prepare", "corpus -> tokenizer -> token shards (documents split over the ranks)",
       "brt-dist prepare (--input PATH | --corpus DIR | --files LIST | --kjv) --out DIR [flags]",
       {{"--input PATH[,PATH]", "text files, JSONL / JSONL.gz records, or folders of any mix (docs/data-format.md)"},
        {"--text-key K", "JSONL: the field holding a record's text (text)"},
        {"--on-bad-record fail|skip", "a malformed JSONL record: stop naming file:line, or skip and count it (fail)"},
        {"--holdout F", "no validation/test in the corpus: hold out this fraction of documents for each (0.01)"},
        {"--holdout-docs N", "... or N documents for each"},
        {"--no-holdout", "keep every document in train"},
        {"--max-document-mb M", "cut text files longer than this into documents at line ends (a single text: 0.25)"},
        {"--corpus DIR", "a PG19-style corpus: DIR/train, DIR/validation, DIR/test, one document per file (another folder: as --input)"},
        {"--files LIST", "a text file naming one document per line (train split); a .jsonl: as --input"},
        {"--kjv", "the bundled default corpus: the King James Bible (Debian's bible-kjv)"},
        {"--out DIR", "where the tokenizer, shards, index and manifest go (restartable)"},
        {"--tokenizer FILE.model", "use this SentencePiece model instead of training one (OUT/tokenizer.model: keep it)"},
        {"--retrain", "train a new tokenizer though OUT has one (needed to change --vocab, --model-type or the corpus)"},
        {"--vocab N", "tokenizer size, >= 1 (default: model.vocab of --config, else 4096)"},
        {"--config FILE", "read model.vocab from this config"},
        {"--model-type bpe|unigram", "SentencePiece model type (bpe)"},
        {"--on-bad-document fail|skip", "a document that is not UTF-8 text: stop naming it, or skip it"},
        {"--shard-mb MB", "input megabytes per shard, > 0 (4)"},
        {"--timeout-s S", "a wait for another rank longer than this ends the job, >= 1 (600)"},
        {"--quiet", "no progress output"}},
       {"brt-dist prepare --kjv --out runs/kjv/data",
        "brt-dist prepare --input corpus.jsonl.gz --text-key content --out runs/mine/data --vocab 8192",
        "mpirun -np 4 brt-dist prepare --corpus /data/pg19 --out runs/pg19/data --config configs/150m.toml"},
       false, nullptr},
      {"ckpt", "inspect, verify or compare checkpoints",
       "brt-dist ckpt inspect FILE | verify FILE|DIR | diff FILE_A FILE_B [--rtol R]",
       {{"inspect FILE", "format, step, layout, config, every tensor and its checksum status"},
        {"verify FILE", "read everything and check every checksum; exit 1 on damage, naming it"},
        {"verify DIR", "the same for every checkpoint in a checkpoint.dir, newest first; exit 1 if any is damaged or none is there"},
        {"diff A B", "compare every tensor bit for bit"},
        {"--rtol R", "diff: float tensors within relative difference R (>= 0) count as equal"}},
       {"brt-dist ckpt verify runs/tiny/ckpt/ckpt-00000600.h5", "brt-dist ckpt diff A.h5 B.h5 --rtol 1e-5"},
       false, nullptr},
      {"export", "a checkpoint as a Hugging Face folder (transformers, lm-eval-harness)",
       "brt-dist export --hf DIR CHECKPOINT [--tokenizer FILE.model] [--force] [--quiet]",
       {{"--hf DIR", "write config.json, model.safetensors, the modeling code and the tokenizer into DIR"},
        {"CHECKPOINT", "a checkpoint file, or a run's checkpoint.dir: its newest checkpoint (or --checkpoint)"},
        {"--tokenizer FILE.model", "SentencePiece model (default: the run's data.path/tokenizer.model, if there)"},
        {"--force", "write into DIR though it is not empty, replacing the export's files"},
        {"--allow-tokenizer-mismatch", "export another tokenizer than the checkpoint's (a warning)"},
        {"--quiet", "no summary line"}},
       {"brt-dist export --hf runs/tiny/hf runs/tiny/ckpt",
        "python3 -c 'from transformers import AutoModelForCausalLM as M; "
        "M.from_pretrained(\"runs/tiny/hf\", trust_remote_code=True)'"},
       false,
       "Loading, carried state and lm-eval-harness: docs/huggingface.md. DIR not empty without --force: exit 2."},
      {"config", "show the fully resolved config a run would use, or list every key",
       "brt-dist config show CONFIG [key=value ...] | brt-dist config keys [--json]",
       {{"show CONFIG", "the resolved TOML: every key, inheritance (base = ... or a list of bases) and "
                        "overrides applied"},
        {"keys", "every config key with its type, default and meaning"},
        {"keys --json", "the same as JSON, with bounds and allowed words: the schema python/brt_dist and "
                        "bench/peer read (python/brt_dist/config_keys.json)"}},
       {"brt-dist config show configs/40m.toml train.batch=8", "brt-dist config keys",
        "brt-dist config keys --json > python/brt_dist/config_keys.json"},
       false, nullptr},
      {"plan", "feasible (DP, TP, ZeRO, CP) layouts with predicted memory and step time",
       "brt-dist plan CONFIG --cluster CLUSTER.toml|--device h100|h200 --global-batch G [--dp N] [--tp N] [--cp N] "
       "[--measured M.jsonl] "
       "[key=value ...] | brt-dist plan CONFIG --measure-rates OUT.toml [--device D] [--precision P]",
       {{"--cluster FILE", "the cluster description (configs/clusters/)"},
        {"--device h100|h200", "the step counted per component against that GPU's rates: on one node of 8 "
                               "without --cluster, else the file's device replaced"},
        {"--global-batch G", "streams in the global batch, >= 1"},
        {"--dp N, --tp N, --cp N", ">= 1: exit 3 unless a layout with these degrees fits"},
        {"--measured M.jsonl", "print the layout's predicted step time next to this run's measured one"},
        {"--measure-rates OUT", "time this device's GEMM, attention and memory rates at CONFIG's shapes "
                                "and write a one-device cluster file with them"},
        {"--device D, --precision P", "--measure-rates: cpu|cuda, fp32|bf16 (as train); planning: bf16 or fp32"},
        {"--seconds S", "--measure-rates: time per kernel class, > 0 (default 1)"}},
       {"brt-dist plan configs/1.3b.toml --cluster configs/clusters/h200-8x8.toml --global-batch 64",
        "brt-dist plan configs/150m.toml --device h100 --global-batch 32",
        "brt-dist plan configs/150m.toml --measure-rates gpu.toml --device cuda --precision bf16 train.batch=4",
        "brt-dist plan configs/150m.toml --cluster gpu.toml --global-batch 4 --measured runs/150m/metrics.jsonl"},
       false, nullptr},
      {"doctor", "preflight checks: ranks, MPI, BLAS, all-reduce, checkpoint disk; across hosts the same build, "
                 "one shared checkpoint dir, every host pair's links",
       "brt-dist doctor [--checkpoint-dir DIR] [--data-dir DIR] [--min-free-gb GB] [--cluster-file F.toml] "
       "(under mpirun or srun, one or more ranks per host)",
       {{"--checkpoint-dir DIR", "where checkpoints will go: one writable directory seen by every host, and its space"},
        {"--data-dir DIR", "the data: the same files (names, sizes) on every host"},
        {"--min-free-gb GB", "free space below this is a problem, >= 0"},
        {"--min-link-gbps G", "a host pair below this bandwidth is a problem, >= 0 (default 0: off)"},
        {"--slow-link-ratio R", "a host pair slower than the fastest / R is a problem, > 1 (default 4)"},
        {"--cluster-file F.toml", "write the measured inter-host bandwidth and latency into F for brt-dist plan"},
        {"--timeout-s S", "deadline of every wait, > 0 (default 60)"}},
       {"mpirun -np 4 brt-dist doctor --checkpoint-dir runs/x/ckpt",
        "mpirun --host h1,h2,h3 brt-dist doctor --checkpoint-dir /shared/runs/x/ckpt --cluster-file cluster.toml"},
       false, nullptr},
      {"launch", "run the job's launcher (mpirun, srun) under a supervisor that ends it after an abort or when "
                 "a rank falls silent, and turns Ctrl-C into a clean stop",
       "brt-dist launch [--grace-s S] [--kill-after-s S] [--heartbeat-timeout-s S] [--] mpirun|srun|brt-dist ARGS...",
       {{"--grace-s S", "after a rank's abort report, how long the launcher may take to end the job before its "
                        "process group is ended (default 20)"},
        {"--kill-after-s S", "after SIGTERM to the launcher's group, the wait before SIGKILL (default 5)"},
        {"--heartbeat-timeout-s S", "every rank beats on stderr every S/6 s (0.2-5 s); one silent for S seconds (a "
                                    "stopped process, a dead host, a cut link) ends the job, exit 124; 0: off, "
                                    "else >= 1 (default: the run's launch.heartbeat_timeout_s, 30)"},
        {"--restarts N", "after a fault, check the hosts and relaunch (resuming from the newest good checkpoint) "
                         "up to N times, then exit 75 (default 0: no restart)"},
        {"--spare-hosts H[:S],...", "with --restarts: hosts that take the place of one a fault was on or that "
                                    "fails its check (mpirun --host lists; srun excludes the node instead)"},
        {"--min-dp M", "with --restarts: without a spare, leave the host out and relaunch on fewer ranks, down to M "
                       "data-parallel ranks, train.grad_accum raised to keep the global batch (refused, named, "
                       "when it cannot)"},
        {"--no-progress-restarts K", "with --restarts: K restarts in a row without a newer checkpoint exit 93, "
                                     "do not requeue (default 3)"},
        {"--restart-log FILE", "with --restarts: one JSONL record per restart (the fault, its host, the seconds of "
                               "each phase to the first new step)"}},
       {"brt-dist launch mpirun --host a,b -np 16 brt-dist train configs/150m.toml   # from a login node",
        "brt-dist launch srun brt-dist train configs/150m.toml                      # in an sbatch script",
        "brt-dist launch --restarts 3 --spare-hosts n9 mpirun --host n1:8,n2:8 -np 16 brt-dist train c.toml"},
       false,
       "Ctrl-C, SIGTERM or SIGHUP: SIGUSR1 to the launcher, which forwards it to every rank (they save and exit "
       "75); a second: SIGTERM to the launcher's process group; a third: SIGKILL. The exit status is the "
       "launcher's, or the abort report's when the supervisor ended the launcher (docs/reliability.md)."},
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

// The exit statuses, the same for every command, plus each command's own (docs/reliability.md).
std::string exit_status_text(const std::string& command) {
  std::string out = "exit status:\n  0      success\n";
  if (command == "train")
    out += "  75     stopped by a signal after its checkpoint (a batch script requeues it)\n"
           "  130    a second Ctrl-C: the save in progress abandoned\n";
  if (command == "plan") out += "  3      no layout fits\n";
  if (command == "launch")
    out += "  N      the launcher's status (mpirun's: its ranks' first non-zero), or the aborting rank's when the\n"
           "         supervisor ended the launcher; 75: the ranks stopped cleanly after a signal and saved;\n"
           "         124: a rank sent no heartbeat for --heartbeat-timeout-s; with --restarts, 75: no restart\n"
           "         left (a requeue continues), 93: K restarts without a newer checkpoint (do not requeue)\n";
  if (command == "train" || command == "eval" || command == "generate" || command == "prepare")
    out += std::string("  124    a stalled wait (") + (command == "prepare" ? "--timeout-s" : "train.timeout_s") + ")\n";
  out += "  2      a usage error: an unknown or missing flag, a value outside the range stated above,\n"
         "         a bad key=value, an unexpected argument, a layout that does not fit the ranks\n"
         "  1      any other error, printed once naming the file, key or rank";
  out += command == "ckpt" ? "; verify: damage found; diff: a difference\n" : "\n";
  out += "  128+N  a crash by signal N (134 abort, 139 segfault), after the rank, host and stack\n";
  return out;
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
  if (std::strcmp(c->name, "version") != 0 && std::strcmp(c->name, "help") != 0) {
    out += "\n";  // appended apart: GCC 12 warns falsely (-Wrestrict) on "literal" + string&&
    out += exit_status_text(c->name);
  }
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
  // launch: only its own first word; the rest is the launcher's command line (brt-dist train --help...).
  if (argc >= 2 && std::strcmp(argv[1], "launch") == 0)
    return argc > 2 && (std::strcmp(argv[2], "--help") == 0 || std::strcmp(argv[2], "-h") == 0);
  for (int i = 2; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return true;
  return false;
}

}  // namespace brt::launch
