#include "launch/run/gpu_binding.h"

#ifdef BRT_WITH_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device/device_versions.h"
#endif
#ifdef BRT_WITH_NCCL
#include "parallel/nccl_communicator.h"
#endif

namespace brt::launch {

int gpu_for_local_rank(int local_rank, int devices) {
  if (devices <= 0 || local_rank < 0) return -1;
  return local_rank % devices;
}

GpuBinding bind_gpu_for_local_rank(int local_rank) {
  GpuBinding b;
#ifdef BRT_WITH_CUDA
  const kernels::cuda::CudaDeviceQuery query = kernels::cuda::query_cuda_devices();
  b.devices_on_node = query.count;
  if (b.devices_on_node == 0) {
    b.description = "none (" + query.describe() + ")";
    return b;
  }
  b.device = kernels::cuda::select_device_for_local_rank(local_rank);
  b.description = kernels::cuda::cuda_device_description(b.device);
#else
  (void)local_rank;
  b.description = "none (this build has no CUDA backend)";
#endif
  return b;
}

void add_gpu_numerics(runtime::Numerics& numerics, int device) {
  if (device < 0) return;
#ifdef BRT_WITH_CUDA
  const kernels::cuda::CudaVersions v = kernels::cuda::cuda_versions(device);
  numerics.add("gpu", "GPU", v.device);
  numerics.add("compute_capability", "compute capability", v.compute_capability);
  numerics.add("gpu_driver", "CUDA driver", v.driver, false);
  numerics.add("cuda_runtime", "CUDA runtime", v.runtime);
  numerics.add("cublas", "cuBLAS", v.cublas);
  numerics.add("cufft", "cuFFT", v.cufft);
  numerics.add("nccl", "NCCL", nccl_version_description());
#else
  (void)numerics;
#endif
}

std::string nccl_version_description() {
#ifdef BRT_WITH_NCCL
  return parallel::nccl_version_string();
#else
  return "not built (this build communicates over MPI only)";
#endif
}

}  // namespace brt::launch
