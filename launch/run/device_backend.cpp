#include "launch/run/device_backend.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include <omp.h>
#include <unistd.h>

#include "parallel/mpi/launch_env.h"
#include "parallel/mpi/mpi_communicator.h"

#ifdef BRT_WITH_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/optim/cuda_optimizer_kernels.h"
#endif
#ifdef BRT_WITH_NCCL
#include "parallel/nccl_communicator.h"
#endif

namespace brt::launch {

bool cuda_backend_built() {
#ifdef BRT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

double run_device_memory_gb(const TrainConfig& train, int gpu_device) {
#ifdef BRT_WITH_CUDA
  if (train.device == "cuda") return double(kernels::cuda::cuda_device_memory_bytes(gpu_device)) / 1e9;
#else
  (void)gpu_device;
#endif
  (void)train;
  return double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE)) / 1e9;
}

std::string run_device_description(const TrainConfig& train, int gpu_device) {
#ifdef BRT_WITH_CUDA
  if (train.device == "cuda") return kernels::cuda::cuda_device_description(gpu_device);
#else
  (void)gpu_device;
#endif
  return "cpu (" + std::to_string(omp_get_max_threads()) + " threads, " + train.precision + ")";
}

// A setting this build or machine cannot run is a usage error (exit 2, never started), as every
// other bad command-line value is.
void validate_device_settings(const TrainConfig& train, int gpu_device, int world_rank) {
  const std::string where = " (rank " + std::to_string(world_rank) + ")";
  if (train.device == "cpu") {
    if (train.precision != "fp32" && train.precision != "fp64")
      throw parallel::UsageError("train.precision = '" + train.precision +
                                  "' needs train.device = \"cuda\"; the CPU backend computes in "
                                  "fp32 or fp64");  // a config value, the same on every rank
    return;
  }
  if (train.device != "cuda")
    throw parallel::UsageError("train.device: '" + train.device + "' is not cpu or cuda");
  if (!cuda_backend_built())
    throw parallel::UsageError("train.device = \"cuda\": this brt-dist was built without the CUDA "
                                "backend (configure with -DBRT_CUDA=ON on a machine with the CUDA "
                                "toolkit)" + where);
  if (gpu_device < 0)
    throw parallel::UsageError("train.device = \"cuda\": no CUDA device is visible to this process" +
                                where + "; run on a GPU node or use --device cpu");
  if (train.precision != "fp32" && train.precision != "bf16")
    throw parallel::UsageError("train.precision = '" + train.precision +
                                "' is not available on the CUDA backend (use fp32 or bf16)" + where);
  if (train.deterministic) {
    // NCCL chooses its algorithm and protocol by message size and topology; pinning them
    // keeps its reduction order fixed between runs (the kernels are deterministic anyway).
    setenv("NCCL_ALGO", "Ring", 0);
    setenv("NCCL_PROTO", "Simple", 0);
  }
}

template <typename T>
std::unique_ptr<kernels::Backend<T>> make_run_backend(const TrainConfig& train, int gpu_device,
                                                      const core::ModelConfig& model, int streams) {
  if (train.device != "cuda") return kernels::make_cpu_backend<T>();
#ifdef BRT_WITH_CUDA
  if constexpr (std::is_same_v<T, float>) {
    kernels::cuda::CudaOptions options;
    options.device = gpu_device;
    options.precision = kernels::cuda::parse_precision(train.precision);
    options.workspace_bytes = cuda_workspace_bytes(model, streams, train.precision == "bf16");
    return kernels::cuda::make_cuda_backend(options);
  }
#endif
  (void)gpu_device, (void)model, (void)streams;
  throw std::invalid_argument("train.device = \"cuda\" runs in fp32 or bf16 only, in a CUDA build");
}

template <typename T>
std::unique_ptr<kernels::OptimizerKernels<T>> make_run_optimizer_kernels(kernels::Backend<T>& backend) {
#ifdef BRT_WITH_CUDA
  if constexpr (std::is_same_v<T, float>)
    if (std::string(backend.name()) == "cuda") return kernels::cuda::make_cuda_optimizer_kernels(backend);
#endif
  (void)backend;
  return nullptr;
}

parallel::Stream backend_stream(kernels::Backend<float>& backend) {
#ifdef BRT_WITH_CUDA
  if (std::string(backend.name()) == "cuda") return {kernels::cuda::stream_handle(backend)};
#else
  (void)backend;
#endif
  return {};
}

std::unique_ptr<parallel::Communicator> make_device_group(MPI_Comm group, const std::string& name,
                                                          const parallel::CommOptions& options) {
#ifdef BRT_WITH_NCCL
  return std::make_unique<parallel::NcclCommunicator>(group, name + "-nccl", options);
#else
  (void)group;
  (void)options;
  throw std::invalid_argument("data and tensor parallelism on the CUDA backend need NCCL, and "
                              "this build has none (group " + name + ")");
#endif
}

template <typename T>
core::TensorParallel make_run_tensor_parallel(parallel::Communicator& tp_group,
                                              kernels::Backend<T>& backend,
                                              std::unique_ptr<parallel::Communicator>& device_tp) {
  device_tp.reset();
  if (!backend.memory().host_accessible() && tp_group.size() > 1) {
    const auto* mpi_tp = dynamic_cast<const parallel::MpiCommunicator*>(&tp_group);
    if (mpi_tp == nullptr)
      throw std::logic_error("tensor parallelism on the GPU needs the MPI backend's tp group");
    device_tp = make_device_group(mpi_tp->mpi_comm(), "tp", mpi_tp->options());
  }
  return core::TensorParallel(tp_group, backend.memory(), device_tp.get(), backend_stream(backend));
}

template <typename T>
core::ContextParallel make_run_context_parallel(parallel::Communicator& cp_group,
                                                kernels::Backend<T>& backend,
                                                std::unique_ptr<parallel::Communicator>& device_cp) {
  device_cp.reset();
  if (cp_group.size() == 1) return {};
  if (!backend.memory().host_accessible()) {
    const auto* mpi_cp = dynamic_cast<const parallel::MpiCommunicator*>(&cp_group);
    if (mpi_cp == nullptr)
      throw std::logic_error("context parallelism on the GPU needs the MPI backend's cp group");
    device_cp = make_device_group(mpi_cp->mpi_comm(), "cp", mpi_cp->options());
  }
  return core::ContextParallel(cp_group, backend.memory(), device_cp.get(), backend_stream(backend));
}

void DeviceWaitWatch::install(kernels::Backend<float>& backend,
                              std::vector<parallel::Communicator*> comms) {
#ifdef BRT_WITH_NCCL
  std::vector<parallel::NcclCommunicator*> nccl;
  for (parallel::Communicator* c : comms)
    if (auto* n = dynamic_cast<parallel::NcclCommunicator*>(c)) nccl.push_back(n);
  if (nccl.empty() || std::string(backend.name()) != "cuda") return;
  kernels::cuda::set_wait_watch(backend, [nccl](double) {
    for (parallel::NcclCommunicator* c : nccl) c->check_health("the GPU's stream (a device wait)");
  });
  backend_ = &backend;
#else
  (void)backend;
  (void)comms;
#endif
}

DeviceWaitWatch::~DeviceWaitWatch() {
#ifdef BRT_WITH_CUDA
  if (backend_ != nullptr) kernels::cuda::set_wait_watch(*backend_, nullptr);
#endif
}

double measure_gpu_bf16_peak_gflops() {
#ifdef BRT_WITH_CUDA
  return kernels::cuda::measure_gemm_peak_tflops(kernels::cuda::Precision::kBf16, 8192) * 1e3;
#else
  throw std::logic_error("measure_gpu_bf16_peak_gflops: built without CUDA");
#endif
}

template std::unique_ptr<kernels::Backend<float>> make_run_backend(const TrainConfig&, int,
                                                                   const core::ModelConfig&, int);
template std::unique_ptr<kernels::Backend<double>> make_run_backend(const TrainConfig&, int,
                                                                    const core::ModelConfig&, int);
template core::TensorParallel make_run_tensor_parallel(parallel::Communicator&, kernels::Backend<float>&,
                                                       std::unique_ptr<parallel::Communicator>&);
template core::TensorParallel make_run_tensor_parallel(parallel::Communicator&, kernels::Backend<double>&,
                                                       std::unique_ptr<parallel::Communicator>&);
template core::ContextParallel make_run_context_parallel(parallel::Communicator&, kernels::Backend<float>&,
                                                         std::unique_ptr<parallel::Communicator>&);
template core::ContextParallel make_run_context_parallel(parallel::Communicator&, kernels::Backend<double>&,
                                                         std::unique_ptr<parallel::Communicator>&);
template std::unique_ptr<kernels::OptimizerKernels<float>> make_run_optimizer_kernels(kernels::Backend<float>&);
template std::unique_ptr<kernels::OptimizerKernels<double>> make_run_optimizer_kernels(kernels::Backend<double>&);

}  // namespace brt::launch
