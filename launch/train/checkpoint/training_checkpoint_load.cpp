// Loading a training run (training_checkpoint.h): verified, refused with the reason when it
// is not this run's, and read into backend memory (docs/checkpoint-format.md).
#include "launch/train/checkpoint/training_checkpoint.h"

#include <algorithm>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "launch/config/config_keys.h"
#include "launch/train/checkpoint/training_checkpoint_layout.h"

namespace brt::launch {

namespace ck = brt::checkpoint;

using namespace training_layout;

namespace {

// What a shape mismatch on resume comes from: the model keys whose values differ between the
// checkpoint's stored config and this run's ("; the model differs: model.window = 8 in the
// checkpoint, 16 in this run"), or "" (none, or a stored config this build cannot read).
std::string model_key_changes(const std::string& stored_toml, const RunConfig& config) {
  RunConfig stored;
  try {
    stored = parse_run_config(stored_toml, "stored config");
  } catch (const std::exception&) {
    return "";
  }
  std::string changes;
  for (const auto& spec : config_keys()) {
    if (spec.key.rfind("model.", 0) != 0 || spec.get(stored) == spec.get(config)) continue;
    changes += (changes.empty() ? "" : ", ") + spec.key + " = " + value_text(spec.get(stored)) +
               " in the checkpoint, " + value_text(spec.get(config)) + " in this run";
  }
  return changes.empty() ? "" : "; the model differs: " + changes + " (resume keeps the saving run's model)";
}

// Reads tensors into backend memory (device memory under CUDA), staged through the host; of a
// sharded tensor the whole (or this rank's streams of it) is read and this rank's slice kept.
template <typename T>
class TensorLoader {
 public:
  TensorLoader(ck::CheckpointReader& reader, kernels::Memory& memory, const CheckpointIo& io)
      : reader_(reader), memory_(memory), io_(io) {}
  ck::CheckpointReader& reader() { return reader_; }

  void read(const std::string& path, const ck::Slice& slice, const core::ParamSpec& spec, T* local) {
    if (io_.on_phase) io_.on_phase("reading " + path);
    host_.resize(size_t(spec.numel()));
    if (!spec.shard.sharded()) {
      reader_.read<T>(path, slice, std::span<T>(host_));
    } else {
      full_.resize(size_t(slice.numel()));
      reader_.read<T>(path, slice, std::span<T>(full_));
      core::extract_shard(spec, full_.data(), host_.data());
    }
    memory_.from_host(local, host_.data(), host_.size() * sizeof(T));
    if (io_.on_bytes) io_.on_bytes(reader_.load_stats().bytes);
  }

 private:
  ck::CheckpointReader& reader_;
  kernels::Memory& memory_;
  const CheckpointIo& io_;
  std::vector<T> full_, host_;
};

// /optim: refused naming optim.kind when its tensors are another optimizer's; ZeRO-1 reads only
// the state of the parameters this rank owns.
template <typename T>
void load_optimizer_state(TensorLoader<T>& loader, const std::filesystem::path& file, const RunConfig& config,
                          core::Model<T>& model, core::Optimizer<T>& optimizer) {
  const auto& params = model.params().params();
  std::vector<ck::ExpectedTensor> expected;
  for (const auto& s : optimizer.state())
    expected.push_back({ck::join_path(ck::kOptimGroup, s.name),
                        optimizer_state_spec(s, params[size_t(s.param)].spec).shape, ck::DTypeOf<T>::value});
  if (auto problem = ck::find_tensor_mismatch(loader.reader(), expected))
    throw ck::MismatchError(file.string() + ": optimizer state does not match optim.kind=" +
                            std::string(core::to_string(config.optim.kind)) + ": " + *problem);
  for (const auto& s : optimizer.state())
    if (s.data != nullptr) {
      const core::ParamSpec spec = optimizer_state_spec(s, params[size_t(s.param)].spec);
      loader.read(ck::join_path(ck::kOptimGroup, s.name), ck::Slice::whole(spec.shape), spec, s.data);
    }
}

// /state: this rank's streams of every carried tensor. A shape that differs is named: by the
// model keys that made it, or by the global stream count that must equal the saving run's.
template <typename T>
void load_carried_state(TensorLoader<T>& loader, const std::filesystem::path& file, const RunConfig& config,
                        const ck::Metadata& meta, const CarriedTensors<T>& carried, const CheckpointRanks& ranks) {
  ck::CheckpointReader& reader = loader.reader();
  for (auto& ref : carried) {
    const std::string path = ck::join_path(ck::kStateGroup, ref.name);
    core::ParamSpec spec = full_spec_of(ref.name, ref.shape, ref.shard);
    const ck::Shape global = global_shape(spec.shape, ranks.data_size());
    if (!reader.has(path) || reader.info(path).shape != global) {
      // The same stream count: another dimension differs, from a model key (model.window...).
      const bool same_streams = reader.has(path) && !reader.info(path).shape.empty() && reader.info(path).shape[0] == global[0];
      if (same_streams)
        throw ck::MismatchError(file.string() + ": carried state " + path + " is " +
                                ck::shape_string(reader.info(path).shape) + " in the checkpoint, this run's is " +
                                ck::shape_string(global) + model_key_changes(meta.config_toml, config));
      throw ck::MismatchError(file.string() + ": carried state " + path + " is missing or is not " +
                              ck::shape_string(global) + " (the global stream count, train.batch x "
                              "train.grad_accum x data-parallel ranks = " + std::to_string(global[0]) +
                              ", must equal the saving run's)");
    }
    // The slice read is [B, ...full...]: this rank's streams, every TP rank's columns.
    const ck::Slice mine = stream_slice(spec.shape, ranks);
    spec.shape = mine.count;
    loader.read(path, mine, spec, ref.data);
  }
}

// The step guard's counters, windows and batches to skip (older checkpoints have none: the guard
// stays fresh).
void restore_guard(ck::CheckpointReader& reader, const std::filesystem::path& file, StepGuard& guard) {
  const std::string guard_path = ck::join_path(ck::kDataGroup, "guard_counters");
  if (!reader.has(guard_path)) return;
  try {
    std::vector<int64_t> skips = reader.read_whole<int64_t>(ck::join_path(ck::kDataGroup, "skip_batches"));
    if (skips.empty() || skips[0] != int64_t(skips.size()) - 1)
      throw std::invalid_argument("/data/skip_batches does not start with its length");
    skips.erase(skips.begin());
    guard.restore(reader.read_whole<int64_t>(guard_path),
                  reader.read_whole<double>(ck::join_path(ck::kDataGroup, "guard_windows")), skips);
  } catch (const std::invalid_argument& e) {
    throw ck::MismatchError(file.string() + ": " + e.what());
  }
}

}  // namespace

template <typename T>
LoadedCheckpoint load_training_checkpoint(const std::filesystem::path& file, const TrainState<T>& state,
                                          const CheckpointRanks& ranks, const CheckpointIo& io) {
  const RunConfig& config = state.config;
  core::Model<T>& model = state.model;
  const std::string& tokenizer_hash = state.tokenizer_hash;
  ck::ReaderOptions reader_options;
  reader_options.on_phase = io.on_phase;
  ck::CheckpointReader reader(file, ranks.comm, reader_options);
  const ck::Metadata meta = reader.metadata();
  try {
    ck::require_tensors(reader, expected_parameters(model));
  } catch (const ck::MismatchError& e) {
    throw ck::MismatchError(e.what() + model_key_changes(meta.config_toml, config));
  }
  if (!tokenizer_hash.empty() || !meta.tokenizer_hash.empty())
    ck::require_attr_equals(reader, "tokenizer_hash", tokenizer_hash);
  TensorLoader<T> loader(reader, model.memory(), io);
  for (auto& p : model.params().params())
    loader.read(ck::join_path(ck::kModelGroup, p.spec.name), ck::Slice::whole(p.spec.shape), p.spec, p.value);
  load_optimizer_state(loader, file, config, model, state.optimizer);
  load_carried_state(loader, file, config, meta, state.carried.empty() ? model.carried_state() : state.carried, ranks);
  const auto opt_step = reader.attr_int("optimizer_step");
  state.optimizer.set_step_count(opt_step ? *opt_step : meta.step);
  state.data.restore_global(reader.read_whole<int64_t>(ck::join_path(ck::kDataGroup, "cursor")),
                            ranks.data_rank(), ranks.data_size());
  restore_guard(reader, file, state.guard);
  return {{meta.step, meta.tokens_seen}, reader.load_stats(), meta.numerics};
}

template <typename T>
void load_model_parameters(const std::filesystem::path& file, core::Model<T>& model,
                           const ck::PhaseCallback& on_phase, const std::string& tokenizer_hash) {
  ck::ReaderOptions reader_options;
  reader_options.on_phase = on_phase;
  ck::CheckpointReader reader(file, MPI_COMM_SELF, reader_options);
  ck::require_tensors(reader, expected_parameters(model));
  if (!tokenizer_hash.empty()) ck::require_attr_equals(reader, "tokenizer_hash", tokenizer_hash);
  std::vector<T> full, host;
  core::ParamStore<T>& store = model.params();
  for (int i = 0; i < store.size(); ++i) {
    const core::Param<T>& p = store[i];
    const std::string path = ck::join_path(ck::kModelGroup, p.spec.name);
    if (on_phase) on_phase("reading " + path);
    host.resize(size_t(p.numel()));
    if (!p.spec.shard.sharded()) {
      reader.read<T>(path, ck::Slice::whole(p.spec.shape), std::span<T>(host));
    } else {
      // A tensor-parallel rank keeps its slice of the whole tensor (layout-independent files).
      full.resize(size_t(p.spec.global_numel()));
      reader.read<T>(path, ck::Slice::whole(p.spec.shape), std::span<T>(full));
      core::extract_shard(p.spec, full.data(), host.data());
    }
    store.value_from_host(i, host);  // backend memory
  }
}

RunConfig config_of_checkpoint(const std::filesystem::path& file) {
  ck::CheckpointReader reader(file);
  return parse_run_config(reader.metadata().config_toml, file.string() + " (stored config)");
}

#define BRT_INSTANTIATE_CKPT_LOAD(T)                                                           \
  template LoadedCheckpoint load_training_checkpoint<T>(const std::filesystem::path&, const TrainState<T>&, \
                                                        const CheckpointRanks&, const CheckpointIo&);       \
  template void load_model_parameters<T>(const std::filesystem::path&, core::Model<T>&,         \
                                         const ck::PhaseCallback&, const std::string&);

BRT_INSTANTIATE_CKPT_LOAD(float)
BRT_INSTANTIATE_CKPT_LOAD(double)

}  // namespace brt::launch
