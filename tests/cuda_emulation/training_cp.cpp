// Host emulation check of context parallelism on the CUDA backend (tests/cuda_emulation,
// docs/gpu.md; docs/parallelism.md, "Context parallelism"). Under mpirun -np 2 every rank is one
// chunk of each segment (CP = 2) and runs a micro model's steps twice: (a) the CPU backend with
// the cp group's MPI exchanges on host buffers, (b) the emulated CudaBackend bound the way
// launch's make_run_context_parallel binds it — ContextParallel(cp group, the backend's device
// memory, an NcclCommunicator over the cp group's MPI communicator, the backend's stream) — so
// the window halos go through parallel/nccl_communicator.cpp's shift (grouped ncclSend/ncclRecv
// over the NCCL emulation in nccl.h) and the S4D summaries through its all-gather, enqueued on
// the backend stream, and the S4D state-passing ops run as the CUDA backend runs them. Three
// carried segments (every stream starting a document, then one) with the parameters held: each
// rank compares its chunk's loss (≤ 1e-6 relative) and its partial gradients of every step
// (≤ 1e-4).
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "compare.h"
#include "training_common.h"
#include "core/sharding/context_parallel.h"
#include "core/model.h"
#include "kernels/cuda/cuda_backend.h"
#include "parallel/mpi/mpi_communicator.h"
#include "parallel/nccl_communicator.h"

using namespace brt;

namespace {

constexpr int kCp = 2, kStreams = 2, kSteps = 3;

struct CpTrace {
  std::vector<double> losses;
  std::vector<std::vector<float>> grads;  // every step's, parameters in store order
};

CpTrace run(const core::ModelConfig& cfg, kernels::Backend<float>& backend, const core::ContextParallel& cp) {
  core::Model<float> model(cfg, kStreams, backend, {}, cp);
  model.params().initialize(7);
  const int N = cfg.seq_len, L = model.chunk_len();
  CpTrace t;
  for (int i = 0; i < kSteps; ++i) {
    const emu_check::Step s = emu_check::make_step(cfg, kStreams, i, 2000, 1);
    std::vector<int32_t> in, tg;
    std::vector<uint8_t> mask;
    for (int b = 0; b < kStreams; ++b)
      for (int j = 0; j < L; ++j) {
        const size_t at = size_t(b) * N + size_t(cp.rank()) * L + j;
        in.push_back(s.inputs[at]);
        tg.push_back(s.targets[at]);
        mask.push_back(s.mask[at]);
      }
    model.params().zero_grads();
    const core::LossSums sums =
        model.forward({in.data(), tg.data(), mask.data(), s.doc_start.data()}, 1.0f / float(kStreams * N));
    model.backward();
    t.losses.push_back(sums.nats);
    for (int p = 0; p < model.params().size(); ++p) t.grads.push_back(model.params().grad_to_host(p));
  }
  return t;
}

void compare(parallel::MpiCommunicator& group, const std::string& variant) {
  const core::ModelConfig cfg = emu_check::micro_model(variant, 8);  // chunks of 16 tokens: two blocks each
  const int rank = group.rank();
  const std::string tag = "[cp rank " + std::to_string(rank) + "] ";
  if (rank == 0) std::printf("%s, CP %d\n", variant.c_str(), kCp);

  auto cpu = kernels::make_cpu_backend<float>();
  const CpTrace ref = run(cfg, *cpu, core::ContextParallel(group));

  kernels::cuda::CudaOptions options;
  options.workspace_bytes = size_t(16) << 20;
  auto gpu = kernels::cuda::make_cuda_backend(options);
  parallel::NcclCommunicator nccl_cp(group.mpi_comm(), "cp-nccl");
  const core::ContextParallel device_cp(group, gpu->memory(), &nccl_cp, {kernels::cuda::stream_handle(*gpu)});
  const CpTrace emu = run(cfg, *gpu, device_cp);

  auto check = [&](const std::string& what, double err, double tol) {
    emu_check::report("  " + tag + what, err, tol, 58);
  };
  for (int i = 0; i < kSteps; ++i)
    check("chunk loss step " + std::to_string(i + 1), std::fabs(emu.losses[size_t(i)] - ref.losses[size_t(i)]) /
                                                          std::fabs(ref.losses[size_t(i)]), 1e-6);
  double worst = 0;
  for (size_t p = 0; p < ref.grads.size(); ++p) worst = std::max(worst, emu_check::rel(emu.grads[p], ref.grads[p]));
  check("worst partial gradient over " + std::to_string(kSteps) + " steps", worst, 1e-4);
  // Evidence that the exchanges went through the NCCL communicator.
  std::printf("  %sNCCL (emulated) exchanges issued: %llu\n", tag.c_str(),
              static_cast<unsigned long long>(nccl_cp.sequence()));
  if (nccl_cp.sequence() == 0) ++emu_check::failures();
}

int run_checks(int argc, char** argv) {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world != kCp) throw std::runtime_error("run under mpirun -np " + std::to_string(kCp));
  parallel::MpiCommunicator group(MPI_COMM_WORLD, "cp");
  if (argc == 2) {
    compare(group, argv[1]);
  } else {
    compare(group, "bst:sh:s4d");
    compare(group, "slide");
  }
  int failures = emu_check::failures(), total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (group.rank() == 0) std::printf("%s (%d failures over both ranks)\n", total ? "FAILED" : "all CP checks ok", total);
  return total ? 1 : 0;
}

}  // namespace

// No arguments: bst:sh:s4d and slide. Or one case: training_cp VARIANT.
int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  MPI_Init(&argc, &argv);
  int status = 1;
  try {
    status = run_checks(argc, argv);
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
