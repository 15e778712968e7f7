#include "launch/training_checkpoint.h"

#include <span>
#include <stdexcept>
#include <vector>

namespace brt::launch {

namespace ck = brt::checkpoint;

namespace {

template <typename T>
std::vector<ck::ExpectedTensor> expected_parameters(core::Model<T>& model) {
  std::vector<ck::ExpectedTensor> out;
  for (const auto& p : model.params().params())
    out.push_back({ck::join_path(ck::kModelGroup, p.spec.name), p.spec.shape,
                   ck::DTypeOf<T>::value});
  return out;
}

template <typename T>
std::span<const T> view(const T* data, const std::vector<int64_t>& shape) {
  return {data, size_t(ck::shape_numel(shape))};
}

bool writes_param(const CheckpointRanks& ranks, int param) {
  const int owner = ranks.param_owner.empty() ? 0 : ranks.param_owner[size_t(param)];
  return owner == ranks.dp_rank;
}

// A per-stream tensor [B, ...] of this rank as part of the global [dp_size*B, ...] one.
ck::Shape global_shape(ck::Shape local, int dp_size) {
  local[0] *= dp_size;
  return local;
}

ck::Slice stream_slice(const ck::Shape& local, const CheckpointRanks& ranks) {
  return ck::Slice::along(global_shape(local, ranks.dp_size), 0, int64_t(ranks.dp_rank) * local[0], local[0]);
}

// Every DP rank's data cursor, in rank order, on every rank (they may differ in length).
std::vector<std::vector<int64_t>> gather_cursors(const std::vector<int64_t>& mine, MPI_Comm comm) {
  int ranks = 1;
  MPI_Comm_size(comm, &ranks);
  if (ranks == 1) return {mine};
  const int64_t my_size = int64_t(mine.size());
  std::vector<int64_t> sizes(static_cast<size_t>(ranks), 0);
  MPI_Allgather(&my_size, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, comm);
  std::vector<int> counts(static_cast<size_t>(ranks), 0), displs(static_cast<size_t>(ranks), 0);
  int total = 0;
  for (int r = 0; r < ranks; ++r) {
    counts[size_t(r)] = int(sizes[size_t(r)]);
    displs[size_t(r)] = total;
    total += counts[size_t(r)];
  }
  std::vector<int64_t> all(size_t(total), 0);
  MPI_Allgatherv(mine.data(), int(mine.size()), MPI_INT64_T, all.data(), counts.data(), displs.data(),
                 MPI_INT64_T, comm);
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < ranks; ++r)
    out.emplace_back(all.begin() + displs[size_t(r)], all.begin() + displs[size_t(r)] + counts[size_t(r)]);
  return out;
}

}  // namespace

template <typename T>
ck::SaveResult save_training_checkpoint(const RunConfig& config, core::Model<T>& model,
                                        core::Optimizer<T>& optimizer, const BatchSource& data,
                                        const RunPosition& pos,
                                        const std::string& tokenizer_hash,
                                        const CheckpointRanks& ranks) {
  ck::WriterOptions options;
  options.keep_last = config.checkpoint.keep;
  ck::CheckpointWriter writer(config.checkpoint.dir, pos.step, ranks.comm, options);
  ck::Metadata meta;
  meta.step = pos.step;
  meta.tokens_seen = pos.tokens_seen;
  meta.config_toml = render_toml(config);
  meta.tokenizer_hash = tokenizer_hash;
  meta.layout = {ranks.world, ranks.dp_size, ranks.tp};
  writer.set_metadata(meta);
  writer.set_attr_int("optimizer_step", optimizer.step_count());
  writer.set_attr_string("model_variant", model.config().variant);
  writer.set_attr_string("precision", config.train.precision);
  const auto& params = model.params().params();
  for (size_t p = 0; p < params.size(); ++p)
    writer.write_whole<T>(ck::join_path(ck::kModelGroup, params[p].spec.name), params[p].spec.shape,
                          view<T>(params[p].value, params[p].spec.shape), writes_param(ranks, int(p)));
  for (const auto& s : optimizer.state()) {
    const bool mine = writes_param(ranks, s.param);
    if (mine && s.data == nullptr)
      throw std::logic_error("checkpoint: DP rank " + std::to_string(ranks.dp_rank) + " writes " + s.name +
                             " but holds no optimizer state for it (ZeRO-1 owner mismatch)");
    writer.write_whole<T>(ck::join_path(ck::kOptimGroup, s.name), s.shape,
                          mine ? view<T>(s.data, s.shape) : std::span<const T>(), mine);
  }
  // Per-stream tensors: this rank's streams are its slice along dim 0 (MODEL §8).
  for (const auto& ref : model.carried_state())
    writer.write<T>(ck::join_path(ck::kStateGroup, ref.name), global_shape(ref.shape, ranks.dp_size),
                    stream_slice(ref.shape, ranks), view<T>(ref.data, ref.shape));
  // The data cursor of every global stream, merged from all DP ranks (written by rank 0).
  const std::vector<int64_t> cursor = data.merge_cursors(gather_cursors(data.cursor(), ranks.comm));
  writer.write_whole<int64_t>(ck::join_path(ck::kDataGroup, "cursor"), {int64_t(cursor.size())},
                              std::span<const int64_t>(cursor), ranks.dp_rank == 0);
  return writer.commit();
}

template <typename T>
RunPosition load_training_checkpoint(const std::filesystem::path& file, const RunConfig& config,
                                     core::Model<T>& model, core::Optimizer<T>& optimizer,
                                     BatchSource* data, const std::string& tokenizer_hash,
                                     ck::IoStats* stats, const CheckpointRanks& ranks) {
  ck::CheckpointReader reader(file, ranks.comm);
  const ck::Metadata meta = reader.metadata();
  ck::require_tensors(reader, expected_parameters(model));
  if (!tokenizer_hash.empty() || !meta.tokenizer_hash.empty())
    ck::require_attr_equals(reader, "tokenizer_hash", tokenizer_hash);
  for (auto& p : model.params().params())
    reader.read<T>(ck::join_path(ck::kModelGroup, p.spec.name), ck::Slice::whole(p.spec.shape),
                   std::span<T>(p.value, size_t(p.numel())));
  std::vector<ck::ExpectedTensor> optim_expected;
  for (const auto& s : optimizer.state())
    optim_expected.push_back({ck::join_path(ck::kOptimGroup, s.name), s.shape, ck::DTypeOf<T>::value});
  if (auto problem = ck::find_tensor_mismatch(reader, optim_expected))
    throw ck::MismatchError(file.string() + ": optimizer state does not match optim.kind=" +
                            std::string(core::to_string(config.optim.kind)) + ": " + *problem);
  for (const auto& s : optimizer.state())
    if (s.data != nullptr)  // ZeRO-1: only the state of the parameters this rank owns
      reader.read<T>(ck::join_path(ck::kOptimGroup, s.name), ck::Slice::whole(s.shape),
                     std::span<T>(s.data, size_t(s.numel())));
  for (auto& ref : model.carried_state()) {
    const std::string path = ck::join_path(ck::kStateGroup, ref.name);
    const ck::Shape global = global_shape(ref.shape, ranks.dp_size);
    if (!reader.has(path) || reader.info(path).shape != global)
      throw ck::MismatchError(file.string() + ": carried state " + path + " is missing or is not " +
                              ck::shape_string(global) + " (the global stream count, train.batch x "
                              "data-parallel ranks = " + std::to_string(global[0]) +
                              ", must equal the saving run's)");
    reader.read<T>(path, stream_slice(ref.shape, ranks),
                   std::span<T>(ref.data, size_t(ck::shape_numel(ref.shape))));
  }
  const auto opt_step = reader.attr_int("optimizer_step");
  optimizer.set_step_count(opt_step ? *opt_step : meta.step);
  if (data != nullptr)
    data->restore_global(reader.read_whole<int64_t>(ck::join_path(ck::kDataGroup, "cursor")),
                         ranks.dp_rank, ranks.dp_size);
  if (stats != nullptr) *stats = reader.load_stats();
  return {meta.step, meta.tokens_seen};
}

template <typename T>
void load_model_parameters(const std::filesystem::path& file, core::Model<T>& model) {
  ck::CheckpointReader reader(file);
  ck::require_tensors(reader, expected_parameters(model));
  for (auto& p : model.params().params())
    reader.read<T>(ck::join_path(ck::kModelGroup, p.spec.name), ck::Slice::whole(p.spec.shape),
                   std::span<T>(p.value, size_t(p.numel())));
}

RunConfig config_of_checkpoint(const std::filesystem::path& file) {
  ck::CheckpointReader reader(file);
  return parse_run_config(reader.metadata().config_toml, file.string() + " (stored config)");
}

#define BRT_INSTANTIATE_CKPT(T)                                                                \
  template ck::SaveResult save_training_checkpoint<T>(const RunConfig&, core::Model<T>&,       \
                                                      core::Optimizer<T>&, const BatchSource&, \
                                                      const RunPosition&, const std::string&,  \
                                                      const CheckpointRanks&);                 \
  template RunPosition load_training_checkpoint<T>(const std::filesystem::path&,               \
                                                   const RunConfig&, core::Model<T>&,          \
                                                   core::Optimizer<T>&, BatchSource*,          \
                                                   const std::string&, ck::IoStats*,           \
                                                   const CheckpointRanks&);                    \
  template void load_model_parameters<T>(const std::filesystem::path&, core::Model<T>&);

BRT_INSTANTIATE_CKPT(float)
BRT_INSTANTIATE_CKPT(double)

}  // namespace brt::launch
