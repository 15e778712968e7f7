// Which backend a run computes on (train.device, train.precision; docs/gpu.md): the CPU
// backend in fp32/fp64, or the CUDA backend in fp32 or bf16 on the GPU this rank is bound to.
// The model, optimizer and checkpoints only see kernels::Backend<T> and its Memory, so this is
// the one place in launch/ that names CUDA.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <mpi.h>

#include "core/sharding/context_parallel.h"
#include "core/sharding/tensor_parallel.h"
#include "kernels/backend.h"
#include "kernels/optimizer_kernels.h"
#include "launch/config/config.h"
#include "launch/plan/backend_workspace.h"
#include "parallel/communicator.h"

namespace brt::launch {

// True when this binary was built with the CUDA backend (BRT_CUDA found a toolkit).
bool cuda_backend_built();

// Memory of the device a run on train.device uses, GB (1e9 bytes): the GPU's (gpu_device)
// or the host's physical memory.
double run_device_memory_gb(const TrainConfig& train, int gpu_device);
// A one-line description of that device ("cpu: 2 threads" or the GPU's name and memory).
std::string run_device_description(const TrainConfig& train, int gpu_device);

// Checks train.device / train.precision before any work: cuda needs a CUDA build and a bound
// GPU (gpu_device >= 0) and takes fp32 or bf16; cpu takes fp32 or fp64. Throws
// std::invalid_argument naming the key, value and (world) rank.
void validate_device_settings(const TrainConfig& train, int gpu_device, int world_rank);

// The backend for train.device: CPU (any T) or CUDA on `gpu_device` (T = float only), with
// the scratch `model` at `streams` streams needs.
template <typename T>
std::unique_ptr<kernels::Backend<T>> make_run_backend(const TrainConfig& train, int gpu_device,
                                                      const core::ModelConfig& model, int streams);

// The optimizer's kernels for `backend`'s memory: the CUDA ones (fused AdamW / Adafactor on
// its stream) for the CUDA backend, null for the CPU (make_optimizer then uses the CPU ones).
template <typename T>
std::unique_ptr<kernels::OptimizerKernels<T>> make_run_optimizer_kernels(kernels::Backend<T>& backend);

// The backend's stream as a communicator Stream (NCCL orders collectives after the kernels
// that produced their buffers); the host Stream for the CPU backend.
parallel::Stream backend_stream(kernels::Backend<float>& backend);
template <typename T>
parallel::Stream backend_stream(kernels::Backend<T>&) { return {}; }

// The device communicator (NCCL) over the same ranks as `group` (an MPI communicator): the
// data-parallel gradient reductions and the tensor-parallel collectives of a model in GPU
// memory. Collective over `group`.
// The same ranks on the device's communicator (NCCL), with the MPI group's timeout and monitor.
std::unique_ptr<parallel::Communicator> make_device_group(MPI_Comm group, const std::string& name,
                                                          const parallel::CommOptions& options = {});

// The tensor-parallel context of a model on `backend` over `tp_group` (an MPI communicator;
// docs/parallelism.md): on the CUDA backend with TP > 1 its collectives run on an NCCL
// communicator over the same ranks, made here and kept in `device_tp` (which must outlive the
// model), ordered on the backend's stream (core/sharding/tensor_parallel.h). Collective over tp_group.
template <typename T>
core::TensorParallel make_run_tensor_parallel(parallel::Communicator& tp_group,
                                              kernels::Backend<T>& backend,
                                              std::unique_ptr<parallel::Communicator>& device_tp);
// The same for context parallelism's cp group (core/sharding/context_parallel.h): CP = 1 for a group of
// one rank; on the GPU its exchanges run on NCCL over the same ranks (device_cp).
template <typename T>
core::ContextParallel make_run_context_parallel(parallel::Communicator& cp_group,
                                                kernels::Backend<T>& backend,
                                                std::unique_ptr<parallel::Communicator>& device_cp);

// While alive, the CUDA backend's host waits (synchronize, copies to the host) poll its stream
// and check the device communicators among `comms` between polls (NCCL's asynchronous errors and
// the collectives' deadline, parallel/nccl_communicator.h check_health): a peer that died
// mid-collective ends the job with the timeout report instead of hanging the host in
// cudaStreamSynchronize. Declare it after the communicators (it must go first). Does nothing on
// the CPU backend or without device communicators.
class DeviceWaitWatch {
 public:
  template <typename T>
  DeviceWaitWatch(kernels::Backend<T>& backend, std::vector<parallel::Communicator*> comms) {
    if constexpr (std::is_same_v<T, float>) install(backend, std::move(comms));
  }
  ~DeviceWaitWatch();
  DeviceWaitWatch(const DeviceWaitWatch&) = delete;
  DeviceWaitWatch& operator=(const DeviceWaitWatch&) = delete;

 private:
  void install(kernels::Backend<float>& backend, std::vector<parallel::Communicator*> comms);
  kernels::Backend<float>* backend_ = nullptr;  // watched (CUDA with device communicators)
};

// MFU denominator for the CUDA backend: the bf16 dense matrix peak, GFLOP/s, measured now
// with a large cuBLAS bf16 GEMM on the current GPU (docs/gpu.md). Throws without CUDA.
double measure_gpu_bf16_peak_gflops();

}  // namespace brt::launch
