#include "launch/config/config_keys.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace brt::launch {
namespace {

using core::ModelConfig;
using core::OptimConfig;

// The type as `config keys --json` names it (the Python side maps it to int, float, ...).
const char* json_type_name(ValueType type) {
  switch (type) {
    case ValueType::kInt: return "int";
    case ValueType::kFloat: return "float";
    case ValueType::kString: return "string";
    case ValueType::kBool: return "bool";
    case ValueType::kIntList: return "int_list";
  }
  return "?";
}

constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

std::string text(double v) {
  char buf[64];  // the shortest text that reads back as v
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void check_range(int64_t v, int64_t lo, int64_t hi) {
  if (v < lo) throw std::invalid_argument(std::to_string(v) + " must be >= " + std::to_string(lo));
  if (v > hi) throw std::invalid_argument(std::to_string(v) + " must be <= " + std::to_string(hi));
}

// A field reached through a section of RunConfig: `RunConfig::*section` then `Section::*field`.
template <typename Section, typename Field>
struct Member {
  Section RunConfig::*section;
  Field Section::*field;
  Field& operator()(RunConfig& c) const { return c.*section.*field; }
  const Field& operator()(const RunConfig& c) const { return c.*section.*field; }
};

template <typename S, typename F>
KeySpec int_key(std::string key, Member<S, F> m, int64_t lo, int64_t hi, std::string help) {
  return {std::move(key), ValueType::kInt, std::move(help),
          [m](const RunConfig& c) { return ConfigValue(static_cast<int64_t>(m(c))); },
          [m, lo, hi](RunConfig& c, const ConfigValue& v) {
            const int64_t x = std::get<int64_t>(v);
            check_range(x, lo, hi);
            m(c) = static_cast<F>(x);
          },
          ConfigValue(lo), ConfigValue(hi)};
}

template <typename S>
KeySpec float_key(std::string key, Member<S, double> m, double lo, std::string help) {
  return {std::move(key), ValueType::kFloat, std::move(help),
          [m](const RunConfig& c) { return ConfigValue(m(c)); },
          [m, lo](RunConfig& c, const ConfigValue& v) {
            const double x = std::get<double>(v);
            if (!std::isfinite(x)) throw std::invalid_argument(text(x) + " is not a finite number");
            if (x < lo) throw std::invalid_argument(text(x) + " must be >= " + text(lo));
            m(c) = x;
          },
          // The lowest double is "no bound" (model.gate_bias_mean): published as none.
          lo > -std::numeric_limits<double>::max() ? std::optional<ConfigValue>(lo) : std::nullopt};
}

// A string; `allowed` empty means any text.
template <typename S>
KeySpec string_key(std::string key, Member<S, std::string> m, std::vector<std::string> allowed, std::string help) {
  return {std::move(key), ValueType::kString, std::move(help),
          [m](const RunConfig& c) { return ConfigValue(m(c)); },
          [m, allowed](RunConfig& c, const ConfigValue& v) {
            const std::string& x = std::get<std::string>(v);
            if (!allowed.empty()) {
              bool ok = false;
              std::string list;
              for (const auto& a : allowed) {
                ok |= a == x;
                list += (list.empty() ? "" : " | ") + a;
              }
              if (!ok) throw std::invalid_argument("\"" + x + "\" is not one of " + list);
            }
            m(c) = x;
          },
          std::nullopt, std::nullopt, allowed};
}

template <typename S>
KeySpec bool_key(std::string key, Member<S, bool> m, std::string help) {
  return {std::move(key), ValueType::kBool, std::move(help), [m](const RunConfig& c) { return ConfigValue(m(c)); },
          [m](RunConfig& c, const ConfigValue& v) { m(c) = std::get<bool>(v); }};
}

KeySpec layer_list_key(std::string key, std::vector<int> ModelConfig::*field, std::string help) {
  const Member<ModelConfig, std::vector<int>> m{&RunConfig::model, field};
  return {std::move(key), ValueType::kIntList, std::move(help),
          [m](const RunConfig& c) { return ConfigValue(std::vector<int64_t>(m(c).begin(), m(c).end())); },
          [m](RunConfig& c, const ConfigValue& v) {
            std::vector<int> out;
            for (int64_t x : std::get<std::vector<int64_t>>(v)) {
              check_range(x, 0, kIntMax);
              out.push_back(static_cast<int>(x));
            }
            m(c) = out;
          },
          ConfigValue(int64_t{0}), ConfigValue(kIntMax)};
}

template <typename F>
Member<ModelConfig, F> model(F ModelConfig::*f) { return {&RunConfig::model, f}; }
template <typename F>
Member<OptimConfig, F> optim(F OptimConfig::*f) { return {&RunConfig::optim, f}; }
template <typename F>
Member<TrainConfig, F> train(F TrainConfig::*f) { return {&RunConfig::train, f}; }
template <typename F>
Member<DataConfig, F> data(F DataConfig::*f) { return {&RunConfig::data, f}; }
template <typename F>
Member<LogConfig, F> log(F LogConfig::*f) { return {&RunConfig::log, f}; }
template <typename F>
Member<RunDirConfig, F> run_dir(F RunDirConfig::*f) { return {&RunConfig::run, f}; }
template <typename F>
Member<LaunchConfig, F> launcher(F LaunchConfig::*f) { return {&RunConfig::launch, f}; }
template <typename F>
Member<CheckpointConfig, F> ckpt(F CheckpointConfig::*f) { return {&RunConfig::checkpoint, f}; }

std::vector<KeySpec> build_keys() {
  using core::OptimKind;
  using core::ScheduleKind;
  std::vector<KeySpec> k;
  // [model] — model.md §0, §5, §6, §7, §12.
  k.push_back({"model.variant", ValueType::kString,
               "slide | xl | rec:{fixed|lstm}:{skip|dual} | feedback:{fixed|lstm}:{skip|dual} | "
               "bst:{sh|mh|mf}:{s4d|unstructured}",
               [](const RunConfig& c) { return ConfigValue(c.model.variant); },
               [](RunConfig& c, const ConfigValue& v) { c.model.variant = std::get<std::string>(v); },
               std::nullopt, std::nullopt, core::model_variants()});
  k.push_back(int_key("model.layers", model(&ModelConfig::layers), 1, kIntMax, "L"));
  k.push_back(int_key("model.d_model", model(&ModelConfig::d_model), 1, kIntMax, "D, model width"));
  k.push_back(int_key("model.heads", model(&ModelConfig::heads), 1, kIntMax, "H"));
  k.push_back(int_key("model.head_dim", model(&ModelConfig::head_dim), 1, kIntMax, "dh (A = H*dh)"));
  k.push_back(int_key("model.d_ff", model(&ModelConfig::d_ff), 1, kIntMax, "F, MLP hidden size"));
  k.push_back(int_key("model.vocab", model(&ModelConfig::vocab), 1, kIntMax, "V, embedding rows"));
  k.push_back(int_key("model.seq_len", model(&ModelConfig::seq_len), 1, kIntMax, "N, tokens per stream per step"));
  k.push_back(int_key("model.window", model(&ModelConfig::window), 1, kIntMax, "W, window = block length; N % W == 0"));
  k.push_back(int_key("model.state_size", model(&ModelConfig::state_size), 1, kIntMax, "S, recurrent state vectors"));
  k.push_back(layer_list_key("model.recurrent_layers", &ModelConfig::recurrent_layers,
                             "rec:*: recurrent layer indices; [] = [9, 19] for 24 layers, else [L-3]"));
  k.push_back(layer_list_key("model.bst_layers", &ModelConfig::bst_layers, "bst:*: BST layer indices; [] = [0, 9]"));
  k.push_back(int_key("model.ssm_state", model(&ModelConfig::ssm_state), 1, kIntMax, "N_s, S4D state size"));
  k.push_back(int_key("model.ctx_states", model(&ModelConfig::ctx_states), 1, kIntMax, "S_ctx, BST MF context states"));
  k.push_back(bool_key("model.ssm_carry", model(&ModelConfig::ssm_carry), "BST: carry the SSM across segments"));
  k.push_back(float_key("model.state_init_std", model(&ModelConfig::state_init_std), 0.0,
                        "recurrent: initial state Σ0 ~ N(0, x) (model.md §5: 0.1)"));
  k.push_back(float_key("model.state_id_std", model(&ModelConfig::state_id_std), 0.0,
                        "recurrent: state IDs P ~ N(0, x) (model.md §5: 1)"));
  k.push_back(float_key("model.gate_bias_mean", model(&ModelConfig::gate_bias_mean),
                        -std::numeric_limits<double>::max(),
                        "recurrent fixed gates: bias b ~ N(x, 0.1) (model.md §5.3: 0)"));
  // [optim] — model.md §10c.
  k.push_back({"optim.kind", ValueType::kString, "adafactor | adamw",
               [](const RunConfig& c) { return ConfigValue(std::string(core::to_string(c.optim.kind))); },
               [](RunConfig& c, const ConfigValue& v) {
                 c.optim.kind = core::parse_optim_kind(std::get<std::string>(v), "optim.kind");
               },
               std::nullopt, std::nullopt,
               {core::to_string(OptimKind::kAdafactor), core::to_string(OptimKind::kAdamW)}});
  k.push_back(float_key("optim.lr", optim(&OptimConfig::lr), 0.0, "peak learning rate"));
  k.push_back(int_key("optim.warmup", optim(&OptimConfig::warmup), 0, kI64Max, "linear warmup steps"));
  k.push_back({"optim.schedule", ValueType::kString, "rsqrt | cosine | constant | linear | wsd (after warmup)",
               [](const RunConfig& c) { return ConfigValue(std::string(core::to_string(c.optim.schedule))); },
               [](RunConfig& c, const ConfigValue& v) {
                 c.optim.schedule = core::parse_schedule_kind(std::get<std::string>(v), "optim.schedule");
               },
               std::nullopt, std::nullopt,
               {core::to_string(ScheduleKind::kRsqrt), core::to_string(ScheduleKind::kCosine),
                core::to_string(ScheduleKind::kConstant), core::to_string(ScheduleKind::kLinear),
                core::to_string(ScheduleKind::kWsd)}});
  k.push_back(float_key("optim.min_lr", optim(&OptimConfig::min_lr), 0.0, "cosine, linear, wsd: final learning rate"));
  k.push_back(int_key("optim.total_steps", optim(&OptimConfig::total_steps), 0, kI64Max,
                      "cosine, linear, wsd: step of min_lr; 0 = train.steps"));
  k.push_back(float_key("optim.decay_fraction", optim(&OptimConfig::decay_fraction), 0.0,
                        "wsd: the last fraction of total_steps decaying linearly to min_lr"));
  k.push_back(float_key("optim.clip_norm", optim(&OptimConfig::clip_norm), -1.0,
                        "global gradient-norm clip; 0 = off; -1 = default (1.0 adamw, off adafactor)"));
  k.push_back(float_key("optim.beta1", optim(&OptimConfig::beta1), 0.0, "AdamW beta1 and Adafactor momentum"));
  k.push_back(float_key("optim.beta2", optim(&OptimConfig::beta2), 0.0, "AdamW beta2"));
  k.push_back(float_key("optim.eps", optim(&OptimConfig::eps), 0.0, "AdamW epsilon"));
  k.push_back(float_key("optim.weight_decay", optim(&OptimConfig::weight_decay), 0.0, "AdamW, matrices only"));
  k.push_back(float_key("optim.decay_exponent", optim(&OptimConfig::decay_exponent), 0.0, "Adafactor: rho = (t+1)^-x"));
  k.push_back(float_key("optim.adafactor_eps", optim(&OptimConfig::adafactor_eps), 0.0, "Adafactor: G = g^2 + eps"));
  k.push_back(float_key("optim.update_clip", optim(&OptimConfig::update_clip), 0.0, "Adafactor: max RMS of the update"));
  k.push_back(float_key("optim.min_param_scale", optim(&OptimConfig::min_param_scale), 0.0,
                        "Adafactor: floor of RMS(param)"));
  k.push_back(int_key("optim.min_dim_to_factor", optim(&OptimConfig::min_dim_to_factor), 1, kI64Max,
                      "Adafactor: factor when both largest dims >= this"));
  // [train]
  k.push_back(int_key("train.seed", train(&TrainConfig::seed), 0, kI64Max, "initialisation and data seed"));
  k.push_back(int_key("train.batch", train(&TrainConfig::batch), 1, kIntMax, "B, streams per rank"));
  k.push_back(int_key("train.grad_accum", train(&TrainConfig::grad_accum), 1, kIntMax,
                      "micro-steps per optimizer step, each over its own train.batch streams per rank; "
                      "effective batch = batch x grad_accum x DP"));
  k.push_back(int_key("train.steps", train(&TrainConfig::steps), 0, kI64Max, "optimizer steps"));
  k.push_back(string_key("train.precision", train(&TrainConfig::precision), {"fp32", "fp64", "bf16"},
                         "fp32 | fp64 (cpu) | bf16 (cuda: bf16 matrix products, fp32 master weights)"));
  k.push_back(string_key("train.device", train(&TrainConfig::device), {"cpu", "cuda"},
                         "cpu | cuda (--device); docs/gpu.md"));
  k.push_back(bool_key("train.deterministic", train(&TrainConfig::deterministic),
                       "bit-identical reruns: every rank must have the same numerics (else exit 2); cuda pins NCCL_ALGO/NCCL_PROTO"));
  k.push_back(bool_key("train.cuda_graph", train(&TrainConfig::cuda_graph),
                       "cuda: replay each step's forward and backward from a CUDA graph when capturable"));
  k.push_back(int_key("train.threads", train(&TrainConfig::threads), 0, kIntMax,
                      "OpenMP threads; 0 = the cores' share; above 4 x the cores refused (OMP_NUM_THREADS too)"));
  k.push_back(float_key("train.peak_gflops", train(&TrainConfig::peak_gflops), 0.0,
                        "MFU denominator; 0 = measure sgemm peak"));
  k.push_back(int_key("train.eval_every", train(&TrainConfig::eval_every), 0, kI64Max, "0 = no periodic eval"));
  k.push_back(int_key("train.eval_batches", train(&TrainConfig::eval_batches), 0, kI64Max, "0 = whole eval split"));
  k.push_back(int_key("train.tp", train(&TrainConfig::tp), 1, kIntMax, "tensor-parallel size (--tp); DP = ranks / (tp x cp)"));
  k.push_back(int_key("train.cp", train(&TrainConfig::cp), 1, kIntMax,
                      "context-parallel size (--cp): each segment's N/cp tokens per rank (slide, xl, bst:*:s4d)"));
  k.push_back(bool_key("train.overlap", train(&TrainConfig::overlap), "DP: all-reduce gradient buckets during backward"));
  k.push_back(float_key("train.bucket_mb", train(&TrainConfig::bucket_mb), 0.0, "DP: gradient bucket size, MiB"));
  k.push_back(int_key("train.zero", train(&TrainConfig::zero), 0, 1, "1: ZeRO-1, optimizer state sharded over the dp_cp group (DP x CP ranks)"));
  k.push_back(float_key("train.timeout_s", train(&TrainConfig::timeout_s), 1.0,
                        "a stalled wait (collective, checkpoint I/O) ends the job after this many seconds"));
  k.push_back(int_key("train.max_skipped_steps", train(&TrainConfig::max_skipped_steps), 1, kIntMax,
                      "consecutive skipped steps (non-finite or spike) before the run stops or rolls back"));
  k.push_back(bool_key("train.rollback", train(&TrainConfig::rollback),
                       "after max_skipped_steps: reload the last good checkpoint and skip those batches"));
  k.push_back(int_key("train.max_rollbacks", train(&TrainConfig::max_rollbacks), 0, kIntMax,
                      "rollbacks per run before it stops anyway"));
  k.push_back(float_key("train.skip_loss_z", train(&TrainConfig::skip_loss_z), 0.0,
                        "skip a step whose loss z-score (last 128 steps) exceeds this; 0 = off"));
  k.push_back(float_key("train.skip_grad_z", train(&TrainConfig::skip_grad_z), 0.0,
                        "skip a step whose gradient-norm z-score exceeds this; 0 = off"));
  k.push_back(bool_key("train.memory_check", train(&TrainConfig::memory_check),
                       "refuse to start when the memory per rank predicted from the config exceeds what the "
                       "host, its memory cgroup or the GPU has available; false: start anyway"));
  // [data]
  k.push_back(string_key("data.source", data(&DataConfig::source), {"synthetic", "shards"}, "synthetic | shards"));
  k.push_back(string_key("data.path", data(&DataConfig::path), {}, "shard directory (source = shards)"));
  k.push_back(string_key("data.tokenizer", data(&DataConfig::tokenizer), {}, "SentencePiece model; empty = none"));
  k.push_back(string_key("data.train_split", data(&DataConfig::train_split), {}, "split trained on"));
  k.push_back(string_key("data.eval_split", data(&DataConfig::eval_split), {}, "split evaluated on"));
  k.push_back(bool_key("data.share_documents", data(&DataConfig::share_documents),
                       "fewer training documents than global streams: streams share them at distinct offsets "
                       "(else refused)"));
  // [data] tasks.*: docs/data-format.md, "Task documents" (data/tasks/task_mixture.h).
  k.push_back(float_key("data.tasks.rate", data(&DataConfig::tasks_rate), 0.0,
                        "share of each training stream's documents that are long-range task documents, "
                        "[0, 1]; 0 = off"));
  k.push_back(string_key("data.tasks.kinds", data(&DataConfig::tasks_kinds), {},
                         "comma-separated task kinds drawn uniformly: passkey, needle, facts; or mqar alone"));
  k.push_back(int_key("data.tasks.min_distance", data(&DataConfig::tasks_min_distance), 0, kI64Max,
                      "least tokens between the fact and the question"));
  k.push_back(int_key("data.tasks.max_distance", data(&DataConfig::tasks_max_distance), 0, kI64Max,
                      "most tokens between the fact and the question (>= min_distance)"));
  k.push_back(int_key("data.tasks.min_prefix", data(&DataConfig::tasks_min_prefix), 0, kI64Max,
                      "least tokens of filler before the fact"));
  k.push_back(int_key("data.tasks.max_prefix", data(&DataConfig::tasks_max_prefix), 0, kI64Max,
                      "most tokens of filler before the fact (>= min_prefix)"));
  k.push_back(int_key("data.tasks.digits", data(&DataConfig::tasks_digits), 1, 18, "passkey: digits"));
  k.push_back(int_key("data.tasks.facts", data(&DataConfig::tasks_facts), 2, 4, "facts: statements in all"));
  k.push_back(int_key("data.tasks.supporting_facts", data(&DataConfig::tasks_supporting_facts), 0, 2,
                      "facts: 1 (qa1), 2 (qa2), 0 = either, drawn per document"));
  k.push_back(int_key("data.tasks.min_pairs", data(&DataConfig::tasks_min_pairs), 1, kIntMax,
                      "mqar: fewest key-value pairs of a document"));
  k.push_back(int_key("data.tasks.max_pairs", data(&DataConfig::tasks_max_pairs), 1, kIntMax,
                      "mqar: most key-value pairs of a document (>= min_pairs)"));
  k.push_back(string_key("data.tasks.loss", data(&DataConfig::tasks_loss), {"all", "answers"},
                         "all | answers: mqar's loss on its answer tokens only"));
  k.push_back(int_key("data.tasks.seed", data(&DataConfig::tasks_seed), 0, kI64Max,
                      "the task schedule's and documents' seed; 0 = derived from train.seed"));
  // [log]
  k.push_back(int_key("log.every", log(&LogConfig::every), 1, kI64Max, "steps between progress lines"));
  k.push_back(string_key("log.metrics_path", log(&LogConfig::metrics_path), {}, "JSONL metrics; empty = none"));
  // [run]
  k.push_back(string_key("run.dir", run_dir(&RunDirConfig::dir), {},
                         "the run's folder ({config}: the config file's name): metrics.jsonl and ckpt/ go "
                         "there unless log.metrics_path or checkpoint.dir is set; empty = none"));
  // [checkpoint]
  k.push_back(string_key("checkpoint.dir", ckpt(&CheckpointConfig::dir), {}, "empty = no checkpoints"));
  k.push_back(int_key("checkpoint.every", ckpt(&CheckpointConfig::every), 0, kI64Max, "0 = only at the end"));
  k.push_back(int_key("checkpoint.keep", ckpt(&CheckpointConfig::keep), 0, kIntMax, "newest kept; 0 = all"));
  k.push_back(bool_key("checkpoint.resume", ckpt(&CheckpointConfig::resume), "continue from the newest checkpoint"));
  k.push_back(string_key("checkpoint.on_error", ckpt(&CheckpointConfig::on_error), {"stop", "continue"},
                         "a failed save stops the run, or training continues (a failed final save always fails)"));
  k.push_back(string_key("checkpoint.resume_from", ckpt(&CheckpointConfig::resume_from), {},
                         "--resume: a checkpoint FILE (exactly it) or DIR (its newest good one); must exist"));
  k.push_back(bool_key("checkpoint.overwrite", ckpt(&CheckpointConfig::overwrite),
                       "allow a start that deletes checkpoints of another run (or newer ones) in checkpoint.dir"));
  k.push_back(string_key("checkpoint.init_from", ckpt(&CheckpointConfig::init_from), {},
                         "a fresh start's weights from FILE (fresh optimizer, data from the start); "
                         "ignored when resuming"));
  k.push_back(bool_key("checkpoint.async", ckpt(&CheckpointConfig::async),
                       "copy the state to the host and write it in the background while training goes on"));
  k.push_back(float_key("checkpoint.lock_wait_s", ckpt(&CheckpointConfig::lock_wait_s), 0.0,
                        "checkpoint.dir in use by another run (its lock): wait this long for it to end, "
                        "then refuse (exit 2)"));
  k.push_back(int_key("checkpoint.confirm_steps", ckpt(&CheckpointConfig::confirm_steps), 1, kIntMax,
                      "a checkpoint counts as good (toward keep, for rollback) once this many steps were "
                      "applied after it; until then it is provisional"));
  k.push_back(bool_key("checkpoint.allow_fresh_start", ckpt(&CheckpointConfig::allow_fresh_start),
                       "start from step 0 when every checkpoint in checkpoint.dir is damaged"));
  // [launch]
  k.push_back(float_key("launch.heartbeat_timeout_s", launcher(&LaunchConfig::heartbeat_timeout_s), 0.0,
                        "brt-dist launch: a rank silent this long ends the job (exit 124); 0 = no heartbeats, "
                        "else at least 1; --heartbeat-timeout-s overrides"));
  return k;
}

}  // namespace

const std::vector<KeySpec>& config_keys() {
  static const std::vector<KeySpec> keys = build_keys();  // immutable after first use
  return keys;
}

const KeySpec* find_key(const std::string& key) {
  for (const auto& k : config_keys())
    if (k.key == key) return &k;
  return nullptr;
}

const char* type_name(ValueType type) {
  switch (type) {
    case ValueType::kInt: return "an integer";
    case ValueType::kFloat: return "a number";
    case ValueType::kString: return "a string";
    case ValueType::kBool: return "true or false";
    case ValueType::kIntList: return "a list of integers";
  }
  return "?";
}

std::string config_keys_json() {
  using Json = nlohmann::ordered_json;
  auto json_value = [](const ConfigValue& v) {
    return std::visit([](const auto& x) { return Json(x); }, v);
  };
  const RunConfig defaults;
  // One key per line, so that a changed key is one changed line of the checked-in copy.
  std::string keys;
  for (const auto& spec : config_keys()) {
    const auto dot = spec.key.find('.');
    Json key = {{"key", spec.key},
                {"section", spec.key.substr(0, dot)},
                {"name", spec.key.substr(dot + 1)},
                {"type", json_type_name(spec.type)},
                {"default", json_value(spec.get(defaults))}};
    if (spec.min) key["min"] = json_value(*spec.min);
    if (spec.max) key["max"] = json_value(*spec.max);
    if (!spec.allowed.empty()) key["allowed"] = spec.allowed;
    key["help"] = spec.help;
    keys += (keys.empty() ? "\n  " : ",\n  ") + key.dump();
  }
  const Json about =
      "brt-dist's config keys (launch/config/config_keys.cpp), written by `brt-dist config keys --json`. "
      "default: the value a config that does not set the key starts from, before resolve(); "
      "min/max: bounds of the value (of each element for int_list); allowed: the accepted words.";
  return "{\n \"about\": " + about.dump() + ",\n \"keys\": [" + keys + "\n ]\n}\n";
}

}  // namespace brt::launch
