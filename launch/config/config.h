// A training run's configuration: typed structs filled from TOML files (toml++) plus
// command-line overrides, validated before anything is allocated.
//
// Files have sections [model] [optim] [train] [data] [log] [checkpoint]; every key is listed
// in config_keys() (launch/config/config_keys.cpp) with its type and range. A file may start with
//   base = "other.toml"          (path relative to this file)
// to inherit every key from another file and change only a few, or
//   base = ["40m.toml", "forms/xl.toml"]   (applied in order: the ladder's size x form files)
// to compose several. Overrides on the command line
// are `section.key=value` for any key, typed by the key. Unknown keys and bad values are errors
// (ConfigError) that name the key and the file, or "command line".
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/model_config.h"
#include "core/optim/optim_config.h"

namespace brt::launch {

struct TrainConfig {
  int64_t seed = 1;                 // initialisation (model.md §10b) and data order
  int batch = 1;                    // B: streams per rank (model.md §8)
  // Gradient accumulation: micro-steps per optimizer step, each over its own `batch` streams
  // per rank (launch/train/grad_accum.h); effective batch = batch x grad_accum x DP streams.
  int grad_accum = 1;
  int64_t steps = 1000;             // optimizer steps in the run
  std::string precision = "fp32";   // "fp32" | "fp64" (CPU: the reference build) | "bf16" (cuda)
  std::string device = "cpu";       // "cpu" | "cuda" (docs/gpu.md): where the model lives and runs
  // cuda: reruns bit-identical (the kernels always are; this also pins NCCL's algorithm and
  // protocol so its sums cannot change between runs).
  bool deterministic = false;
  // cuda: replay each step's forward and backward from a CUDA graph when the step can be
  // captured (launch/train/step_graphs.h; off under TP and under DP > 1 with overlap, and on the CPU).
  bool cuda_graph = true;
  int threads = 0;                  // OpenMP threads; 0 = the runtime's default
  double peak_gflops = 0.0;         // MFU denominator; 0 = measure the sgemm peak at start
  int64_t eval_every = 0;           // steps between evaluations; 0 = none
  int64_t eval_batches = 0;         // batches per evaluation; 0 = the whole eval split
  // Parallel layout (core/data_parallel.h). DP = ranks / tp.
  int tp = 1;                       // tensor-parallel size (--tp); docs/parallelism.md
  int cp = 1;                       // context-parallel size (--cp): chunks of each segment
  bool overlap = true;              // DP: reduce gradient buckets during backward (--no-overlap)
  double bucket_mb = 4.0;           // DP: gradient bucket size in MiB
  int zero = 0;                     // 1: ZeRO-1, optimizer state sharded over the dp_cp group
  // Never lose a run (docs/reliability.md).
  double timeout_s = 600;           // a wait (collective, checkpoint I/O) longer than this ends the job
  int max_skipped_steps = 5;        // consecutive skipped steps (non-finite, spikes) before stopping
  bool rollback = false;            // ... or reload the last good checkpoint and skip those batches
  int max_rollbacks = 3;            // rollbacks per run before it stops anyway
  double skip_loss_z = 0;           // skip a step whose loss z-score exceeds this; 0 = off
  double skip_grad_z = 0;           // same for the gradient norm; 0 = off
  // Refuse to start when the memory a rank will allocate (predicted from the config) exceeds
  // what its host, memory cgroup or GPU has available (launch/preflight/preflight.h).
  bool memory_check = true;
};

struct DataConfig {
  std::string source = "synthetic";   // "synthetic" (generated stream) | "shards" (tokenised corpus)
  std::string path;                   // shard directory (source = "shards")
  std::string tokenizer;              // SentencePiece model file; empty = none needed
  std::string train_split = "train";
  std::string eval_split = "validation";
  // Fewer training documents than global streams: allowed only when asked for, the streams then
  // starting at distinct offsets of the documents they share (launch/feed/shard_source.cpp).
  bool share_documents = false;
  // Long-range task documents mixed into the training streams (data/tasks/task_mixture.h,
  // docs/data-format.md "Task documents"): the `data.tasks.*` keys, TaskMixtureOptions' fields.
  double tasks_rate = 0.0;                            // share of each stream's documents; 0 = off
  std::string tasks_kinds = "passkey,needle,facts";   // drawn uniformly
  int64_t tasks_min_distance = 64, tasks_max_distance = 1024;  // tokens, fact to question
  int64_t tasks_min_prefix = 0, tasks_max_prefix = 256;        // tokens before the fact
  int tasks_digits = 5;            // passkey
  int tasks_facts = 3;             // facts: statements in all
  int tasks_supporting_facts = 0;  // facts: 1 (qa1), 2 (qa2), 0: either
  int64_t tasks_seed = 0;          // 0: derived from train.seed
  // data.tasks.kinds = "mqar" (data/tasks/mqar.h, docs/fidelity.md "MQAR"): every document of the
  // streams is an MQAR document of model.vocab's ids (data.source = synthetic), its gap drawn
  // from [min_distance, max_distance] and its filler prefix from [min_prefix, max_prefix] tokens.
  int tasks_min_pairs = 4, tasks_max_pairs = 16;
  std::string tasks_loss = "all";  // all | answers (MQAR: the loss on the answer tokens only)
};

struct LogConfig {
  int64_t every = 10;                 // steps between progress lines
  std::string metrics_path;           // JSONL metrics file; empty = none
};

// Where a run keeps its files (docs/training.md, "Runs"): with run.dir set, log.metrics_path and
// checkpoint.dir default to run.dir/metrics.jsonl and run.dir/ckpt unless they are set themselves
// (to "" for none), so two runs given two directories never share a file.
// "{config}" in it is the config file's name (name_run_dir below).
struct RunDirConfig {
  std::string dir;
};

struct CheckpointConfig {
  std::string dir;                    // empty = no checkpoints
  int64_t every = 0;                  // steps between checkpoints; 0 = only at the end
  int keep = 3;                       // newest checkpoints kept; 0 = all
  bool resume = true;                 // continue from the newest checkpoint in `dir` if any
  std::string on_error = "stop";      // a failed save: "stop" the run or "continue" training
  // --resume FILE|DIR: must exist; a FILE resumes from exactly that checkpoint.
  std::string resume_from;
  bool overwrite = false;             // allow a start that discards checkpoints already in `dir`
  bool allow_fresh_start = false;     // start from step 0 when every checkpoint in `dir` is damaged
  bool async = true;                  // write in the background while training goes on
  // One run per directory (launch/preflight/run_lock.h): a start that finds `dir` locked by another run
  // waits this long for it to end (a requeued job while the old one saves), then refuses.
  double lock_wait_s = 60;
  // A checkpoint is good only once this many steps have been applied after it (its weights
  // trained on without a non-finite loss): until then it is provisional, not counted toward
  // `keep` and never a rollback target (docs/reliability.md, divergence-safe checkpoints).
  int confirm_steps = 1;
  // A fresh start (nothing resumed) takes its weights from this checkpoint-format file (e.g.
  // python/brt_dist save_weights): parameters only, a fresh optimizer and data cursor.
  std::string init_from;
};

// What `brt-dist launch` (launch/supervise/supervisor.h) reads from the run it starts; the ranks
// ignore it. Its flags override.
struct LaunchConfig {
  // A rank silent this long ends the job (exit 124, naming it); 0 = no heartbeats. Either 0 or
  // at least 1 s (the ranks beat every timeout/6 s, 0.2-5 s: parallel/health/heartbeat.h).
  double heartbeat_timeout_s = 30;
};

struct RunConfig {
  core::ModelConfig model;
  core::OptimConfig optim;
  TrainConfig train;
  DataConfig data;
  LogConfig log;
  CheckpointConfig checkpoint;
  RunDirConfig run;
  LaunchConfig launch;
};

// Every configuration error: a message naming the key and where it was set.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(const std::string& source, const std::string& key, const std::string& what);
  const std::string& source() const { return source_; }  // file path or "command line"
  const std::string& key() const { return key_; }        // "model.d_model"; empty if none
 private:
  std::string source_, key_;
};

// Where each key's value came from (file path, "command line"); keys never set are absent.
using ConfigSources = std::map<std::string, std::string>;

// Loads `path` (following `base =` chains), applies `overrides` ("key=value", in order), and
// resolves (defaults and cross-key checks). Errors are ConfigError.
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides = {},
                          ConfigSources* sources = nullptr);

// The same from TOML text; `source_name` names it in messages and `base =` is resolved against
// `base_dir`.
RunConfig parse_run_config(std::string_view toml_text, const std::string& source_name,
                           const std::vector<std::string>& overrides = {}, const std::string& base_dir = ".",
                           ConfigSources* sources = nullptr);

// Settings that are valid but likely waste a run, one sentence each naming the keys and values
// (the trainer prints them at start): a run shorter than its warmup, an eval_every that never
// fires before the last step's evaluation.
std::vector<std::string> config_warnings(const RunConfig& config);

// run.dir's "{config}" becomes the stem of the config file named on the command line (runs/{config}
// in configs/40m-xl.toml -> runs/40m-xl): one line in a shared base names every config's runs.
// load_run_config does it before resolve().
void name_run_dir(RunConfig& config, const std::string& config_path);

// Lower-level pieces, for tools and tests.
void apply_toml_file(RunConfig& config, const std::string& path, ConfigSources* sources = nullptr);
void apply_toml_text(RunConfig& config, std::string_view toml_text, const std::string& source_name,
                     const std::string& base_dir, ConfigSources* sources = nullptr);
void apply_override(RunConfig& config, const std::string& assignment, ConfigSources* sources = nullptr);
// Fills optim.total_steps from train.steps when 0, resolves model and optim, checks the rest.
// A failing key is reported with its source from `sources` when known. The one rule between
// keys that depends on where they were set: an xl model.seq_len from the command line sets
// model.window to it unless model.window comes from the command line too.
void resolve(RunConfig& config, const ConfigSources* sources = nullptr);

// The whole resolved config as TOML (every key, one section each, with the key's help as a
// comment). parse_run_config(render_toml(c), ...) gives back a config equal to c.
std::string render_toml(const RunConfig& config);
// A config is a path, or a name under configs/ ("tiny" -> configs/tiny.toml); ConfigError
// listing the configs there otherwise.
std::string resolve_config_path(const std::string& arg);

// True when every key of config_keys() has the same value in both.
bool same_values(const RunConfig& a, const RunConfig& b);

}  // namespace brt::launch
