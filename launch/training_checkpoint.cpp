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

}  // namespace

template <typename T>
ck::SaveResult save_training_checkpoint(const RunConfig& config, core::Model<T>& model,
                                        core::Optimizer<T>& optimizer, const BatchSource& data,
                                        const RunPosition& pos,
                                        const std::string& tokenizer_hash) {
  ck::WriterOptions options;
  options.keep_last = config.checkpoint.keep;
  ck::CheckpointWriter writer(config.checkpoint.dir, pos.step, MPI_COMM_SELF, options);
  ck::Metadata meta;
  meta.step = pos.step;
  meta.tokens_seen = pos.tokens_seen;
  meta.config_toml = render_toml(config);
  meta.tokenizer_hash = tokenizer_hash;
  meta.layout = {1, 1, 1};
  writer.set_metadata(meta);
  writer.set_attr_int("optimizer_step", optimizer.step_count());
  writer.set_attr_string("model_variant", model.config().variant);
  writer.set_attr_string("precision", config.train.precision);
  for (const auto& p : model.params().params())
    writer.write_whole<T>(ck::join_path(ck::kModelGroup, p.spec.name), p.spec.shape,
                          view<T>(p.value, p.spec.shape));
  for (const auto& s : optimizer.state())
    writer.write_whole<T>(ck::join_path(ck::kOptimGroup, s.name), s.shape, view<T>(s.data, s.shape));
  for (const auto& ref : model.carried_state())
    writer.write_whole<T>(ck::join_path(ck::kStateGroup, ref.name), ref.shape,
                          view<T>(ref.data, ref.shape));
  const std::vector<int64_t> cursor = data.cursor();
  writer.write_whole<int64_t>(ck::join_path(ck::kDataGroup, "cursor"),
                              {int64_t(cursor.size())}, std::span<const int64_t>(cursor));
  return writer.commit();
}

template <typename T>
RunPosition load_training_checkpoint(const std::filesystem::path& file, const RunConfig& config,
                                     core::Model<T>& model, core::Optimizer<T>& optimizer,
                                     BatchSource* data, const std::string& tokenizer_hash,
                                     ck::IoStats* stats) {
  ck::CheckpointReader reader(file);
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
    reader.read<T>(ck::join_path(ck::kOptimGroup, s.name), ck::Slice::whole(s.shape),
                   std::span<T>(s.data, size_t(s.numel())));
  for (auto& ref : model.carried_state()) {
    const std::string path = ck::join_path(ck::kStateGroup, ref.name);
    if (!reader.has(path) || reader.info(path).shape != ref.shape)
      throw ck::MismatchError(file.string() + ": carried state " + path +
                              " is missing or has another shape (train.batch differs?)");
    reader.read<T>(path, ck::Slice::whole(ref.shape),
                   std::span<T>(ref.data, size_t(ck::shape_numel(ref.shape))));
  }
  const auto opt_step = reader.attr_int("optimizer_step");
  optimizer.set_step_count(opt_step ? *opt_step : meta.step);
  if (data != nullptr) data->restore(reader.read_whole<int64_t>(ck::join_path(ck::kDataGroup, "cursor")));
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
                                                      const RunPosition&, const std::string&); \
  template RunPosition load_training_checkpoint<T>(const std::filesystem::path&,               \
                                                   const RunConfig&, core::Model<T>&,          \
                                                   core::Optimizer<T>&, BatchSource*,          \
                                                   const std::string&, ck::IoStats*);          \
  template void load_model_parameters<T>(const std::filesystem::path&, core::Model<T>&);

BRT_INSTANTIATE_CKPT(float)
BRT_INSTANTIATE_CKPT(double)

}  // namespace brt::launch
