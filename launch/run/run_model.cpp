#include "launch/run/run_model.h"

#include <stdexcept>
#include <string>

#include "core/param_count.h"
#include "launch/run/device_backend.h"
#include "parallel/mpi/mpi_communicator.h"
#include "parallel/process_groups.h"

namespace brt::launch {

int RunPlace::world_rank() const { return groups ? groups->world_rank() : 0; }

RunModelOptions RunModelOptions::train(const RunConfig& cfg) {
  return {cfg.train.batch, true, true, uint64_t(cfg.train.seed)};
}

RunModelOptions RunModelOptions::inference(int streams) { return {streams, false, false, 1}; }

template <typename T>
RunModel<T>::RunModel(const RunConfig& cfg, const RunPlace& place, const RunModelOptions& options)
    : on_gpu_(cfg.train.device == "cuda") {
  validate_device_settings(cfg.train, place.gpu_device, place.world_rank());
  // The backend decides where every buffer lives (host or device memory, docs/gpu.md).
  backend_ = make_run_backend<T>(cfg.train, place.gpu_device, cfg.model, options.streams);
  // Tensor parallelism (docs/parallelism.md): the tp group splits heads, hidden units and the
  // vocabulary; every rank of a TP group reads the same streams (its DP rank's). On the GPU its
  // collectives run on an NCCL communicator over the same ranks, ordered on the backend's
  // stream (core/sharding/tensor_parallel.h).
  if (place.groups) tp_ = make_run_tensor_parallel(place.groups->tp(), *backend_, device_tp_);
  // Context parallelism (core/sharding/context_parallel.h): this rank runs chunk cp_rank of each segment
  // of its data rank's streams; NCCL over the cp group on the GPU.
  if (place.groups) {
    cp_ = make_run_context_parallel(place.groups->cp(), *backend_, device_cp_);
    data_rank_ = place.groups->data_rank();
    data_size_ = place.groups->data_size();
  }
  model_ = std::make_unique<core::Model<T>>(cfg.model, options.streams, *backend_, tp_, cp_);
  if (options.initialize) model_->params().initialize(options.seed);
  check_parameters();
  if (options.training && place.groups) build_data_parallel(cfg, *place.groups);
  // Host waits on the GPU check the NCCL collectives' errors and deadline (no hang on a dead peer).
  device_waits_ = std::make_unique<DeviceWaitWatch>(*backend_, std::vector<parallel::Communicator*>{
                                                                   device_tp_.get(), device_dp_cp_.get(), device_cp_.get()});
  if (options.training) {
    build_optimizer(cfg);
  } else {
    const core::MemoryReport m = model_->memory_report();
    memory_ = {m.parameters, m.gradients, 0, m.activations, m.carried_state, m.backward_scratch};
  }
}

template <typename T>
RunModel<T>::~RunModel() = default;

// The parameter count must equal model.md §9's shapes, counted independently (full logical shapes:
// under TP each rank stores only its slices).
template <typename T>
void RunModel<T>::check_parameters() {
  parameters_ = 0;
  for (const auto& p : model_->params().params()) parameters_ += p.spec.global_numel();
  const int64_t expected = core::count_parameters(model_->config());
  if (parameters_ != expected)
    throw std::logic_error("model declares " + std::to_string(parameters_) +
                           " parameters but model.md §9 shapes give " + std::to_string(expected));
}

// Data parallelism (core/data_parallel.h) over the dp_cp group; on the GPU its gradient buckets and
// ZeRO-1 broadcasts run on NCCL over the same ranks.
template <typename T>
void RunModel<T>::build_data_parallel(const RunConfig& cfg, const parallel::ProcessGroups& groups) {
  const auto* mpi_dp_cp = dynamic_cast<const parallel::MpiCommunicator*>(&groups.dp_cp());
  if (mpi_dp_cp == nullptr) throw std::logic_error("checkpoints need the MPI backend's dp_cp group");
  if (on_gpu_ && groups.dp_cp().size() > 1) device_dp_cp_ = make_device_group(mpi_dp_cp->mpi_comm(), "dp_cp", mpi_dp_cp->options());
  // Gradient buckets run on NCCL's stream after the backend's kernels that produced them; under
  // TP on the backend's stream itself, so a rank's DP and TP collectives keep one program order
  // (two NCCL communicators unordered on one GPU can deadlock across ranks).
  parallel::Stream grads_stream = backend_stream(*backend_);
  grads_stream.overlap = groups.tp().size() == 1;
  data_parallel_ = std::make_unique<core::DataParallel<T>>(
      groups.dp_cp(), *model_, core::DpSettings{cfg.train.overlap, cfg.train.bucket_mb, cfg.train.zero == 1},
      device_dp_cp_.get(), device_dp_cp_ ? grads_stream : parallel::Stream{});
}

// The optimizer runs where the parameters live (fused CUDA kernels on the GPU). The global
// gradient norm for clipping, Adafactor's RMS and its factored sums along a split axis:
// sharded parameters' partial sums summed over TP (each shard once), replicated ones counted
// once (model.md §10c).
template <typename T>
void RunModel<T>::build_optimizer(const RunConfig& cfg) {
  optimizer_kernels_ = make_run_optimizer_kernels(*backend_);
  optimizer_ = core::make_optimizer(cfg.optim, model_->params(), owned_mask(), optimizer_kernels_.get());
  tp_reducer_ = std::make_unique<core::TensorParallelStatReducer<T>>(model_->params(), tp_);
  if (tp_.active()) optimizer_->set_reducer(tp_reducer_.get());
  memory_ = core::rank_memory_report(*model_, *optimizer_, owned_mask());
}

template <typename T>
core::Optimizer<T>& RunModel<T>::optimizer() {
  if (!optimizer_) throw std::logic_error("RunModel: built without an optimizer (RunModelOptions::training)");
  return *optimizer_;
}

template <typename T>
const std::vector<bool>& RunModel<T>::owned_mask() const {
  static const std::vector<bool> all;
  return data_parallel_ ? data_parallel_->owned_mask() : all;
}

template class RunModel<float>;
template class RunModel<double>;

}  // namespace brt::launch
