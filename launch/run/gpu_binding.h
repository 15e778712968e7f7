// Rank -> GPU binding (issue "operating at scale"; docs/gpu.md): every rank takes the GPU
// numbered local_rank % (GPUs on its node), so `mpirun -np 64` over 8 nodes of 8 GPUs, or
// `srun --mpi=pmix --ntasks-per-node=8`, gives each rank its own device. Safe to call on
// machines and builds without CUDA: it then binds nothing and says why.
#pragma once

#include <string>

#include "runtime/numerics.h"

namespace brt::launch {

struct GpuBinding {
  int device = -1;          // the CUDA device this rank now uses; -1: none
  int devices_on_node = 0;  // CUDA devices this process can see
  std::string description;  // "NVIDIA H200 (sm_90, 132 SMs, 139 GiB)" or why there is none
};

// The device a rank with this local rank takes when `devices` GPUs are visible (-1 if none).
int gpu_for_local_rank(int local_rank, int devices);

// Selects gpu_for_local_rank(local_rank, visible devices) as the current CUDA device (in a
// CUDA build with a GPU present) and describes it.
GpuBinding bind_gpu_for_local_rank(int local_rank);

// The GPU fields of the numerics fingerprint (runtime/numerics.h) for the bound `device`: name,
// compute capability, driver (shown, not decisive), CUDA runtime, cuBLAS, cuFFT and NCCL
// versions. Nothing for device -1 or a build without CUDA.
void add_gpu_numerics(runtime::Numerics& numerics, int device);

// NCCL's version ("2.27.7"), or why there is none in this build.
std::string nccl_version_description();

}  // namespace brt::launch
