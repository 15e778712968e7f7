// Host emulation check of tensor parallelism on the CUDA backend (tests/cuda_emulation,
// docs/gpu.md; docs/parallelism.md, "Tensor parallelism on the GPU"). Under mpirun -np 2 every
// rank is one TP rank (TP = 2, sequence parallelism of the recurrent state on) and trains a
// micro model twice: (a) the CPU backend with the tp group's MPI collectives on host buffers,
// (b) the emulated CudaBackend bound the way launch's make_run_tensor_parallel binds it —
// TensorParallel(tp group, the backend's device memory, an NcclCommunicator over the tp group's
// MPI communicator, the backend's stream) — so every layer collective goes through
// parallel/nccl_communicator.cpp (over the NCCL emulation in nccl.h: MPI collectives) enqueued on the backend stream,
// and the vocabulary-parallel embedding / cross-entropy and the row moves of sequence
// parallelism run as emulated kernels. Each rank compares its own shards: the losses
// (≤ 1e-6 relative), every gradient after the first backward and the weights after the last
// optimizer step (AdamW or Adafactor, with TensorParallelStatReducer as the trainer installs).
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compare.h"
#include "training_common.h"
#include "core/model.h"
#include "core/optim/optimizer.h"
#include "core/sharding/tensor_parallel.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/optim/cuda_optimizer_kernels.h"
#include "parallel/mpi/mpi_communicator.h"
#include "parallel/nccl_communicator.h"
#include "parallel/process_groups.h"

using namespace brt;

namespace {

using emu_check::Trace;

constexpr int kTp = 2, kStreams = 2, kSteps = 3;

Trace run(const core::ModelConfig& cfg, kernels::Backend<float>& backend,
          const core::TensorParallel& tp, const core::OptimConfig& optim) {
  core::Model<float> model(cfg, kStreams, backend, tp);
  model.params().initialize(7);
  std::unique_ptr<kernels::OptimizerKernels<float>> device_kernels;
  if (std::string(backend.name()) == "cuda")
    device_kernels = kernels::cuda::make_cuda_optimizer_kernels(backend);
  auto optimizer = core::make_optimizer(optim, model.params(), {}, device_kernels.get());
  core::TensorParallelStatReducer<float> reducer(model.params(), tp);
  optimizer->set_reducer(&reducer);
  return emu_check::record_steps(model, *optimizer, kStreams, kSteps, 2000, 1);
}

void compare(const parallel::ProcessGroups& groups, const std::string& variant,
             const std::string& optimizer) {
  // Every split quantity (H, F, V, S, the BST features) divides by TP = 2.
  const core::ModelConfig cfg = emu_check::micro_model(variant, 16);
  core::OptimConfig optim;
  optim.kind = optimizer == "adamw" ? core::OptimKind::kAdamW : core::OptimKind::kAdafactor;
  optim.lr = optimizer == "adamw" ? 1e-2 : 0.05;
  optim.warmup = 0;
  optim.total_steps = 10;
  optim.min_dim_to_factor = 16;  // factored Adafactor tensors, some factored along a split axis
  const int rank = groups.tp().rank();
  const std::string tag = "[tp rank " + std::to_string(rank) + "] ";
  if (rank == 0) std::printf("%s, %s, TP %d\n", variant.c_str(), optimizer.c_str(), kTp);

  auto cpu = kernels::make_cpu_backend<float>();
  const Trace ref = run(cfg, *cpu, core::TensorParallel(groups.tp()), optim);

  kernels::cuda::CudaOptions options;
  options.workspace_bytes = size_t(16) << 20;
  auto gpu = kernels::cuda::make_cuda_backend(options);
  const auto* mpi_tp = dynamic_cast<const parallel::MpiCommunicator*>(&groups.tp());
  if (mpi_tp == nullptr) throw std::runtime_error("the tp group is not an MPI communicator");
  parallel::NcclCommunicator nccl_tp(mpi_tp->mpi_comm(), "tp-nccl");
  const core::TensorParallel device_tp(groups.tp(), gpu->memory(), &nccl_tp,
                                       {kernels::cuda::stream_handle(*gpu)});
  if (!device_tp.on_device_group())
    throw std::runtime_error("the emulated backend's TensorParallel does not use the NCCL group");
  const Trace emu = run(cfg, *gpu, device_tp, optim);

  auto check = [&](const std::string& what, double err, double tol) {
    emu_check::report("  " + tag + what, err, tol, 58);
  };
  for (int i = 0; i < kSteps; ++i)
    check("loss step " + std::to_string(i + 1) + " (" + std::to_string(ref.losses[size_t(i)]) + ")",
          std::fabs(emu.losses[size_t(i)] - ref.losses[size_t(i)]) / ref.losses[size_t(i)], 1e-6);
  double worst_grad = 0, worst_weight = 0;
  for (size_t p = 0; p < ref.grads.size(); ++p) {
    worst_grad = std::max(worst_grad, emu_check::rel(emu.grads[p], ref.grads[p]));
    worst_weight = std::max(worst_weight, emu_check::rel(emu.weights[p], ref.weights[p]));
  }
  check("worst shard gradient, step 1", worst_grad, 1e-4);
  check("worst shard weight after " + std::to_string(kSteps) + " steps", worst_weight, 1e-5);
  // Evidence that the layers' collectives went through the NCCL communicator.
  std::printf("  %sNCCL (emulated %s) collectives issued: %llu\n", tag.c_str(),
              parallel::nccl_version_string().c_str(),
              static_cast<unsigned long long>(nccl_tp.sequence()));
  if (nccl_tp.sequence() == 0) ++emu_check::failures();
}

int run_checks(int argc, char** argv) {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world != kTp) throw std::runtime_error("run under mpirun -np " + std::to_string(kTp));
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, kTp);
  if (argc == 3) {
    compare(groups, argv[1], argv[2]);
  } else {
    compare(groups, "rec:lstm:dual", "adafactor");
    compare(groups, "bst:mh:s4d", "adamw");
  }
  int failures = emu_check::failures(), total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (groups.tp().rank() == 0)
    std::printf("%s (%d failures over both ranks)\n", total ? "FAILED" : "all TP checks ok", total);
  return total ? 1 : 0;
}

}  // namespace

// No arguments: rec:lstm:dual with Adafactor and bst:mh:s4d with AdamW. Or one case:
// training_tp VARIANT adafactor|adamw.
int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // progress is visible while it runs
  MPI_Init(&argc, &argv);
  int status = 1;
  try {
    status = run_checks(argc, argv);
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);  // the other rank may be waiting in a collective
  }
  MPI_Finalize();
  return status;
}
