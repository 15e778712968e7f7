// The device memory the CUDA backend holds beside the model's own buffers, predicted from the
// model config (docs/gpu.md): what the backend is created with (launch/run/device_backend.h)
// and what `brt-dist plan` and the preflight's memory check count per GPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/model_config.h"

namespace brt::launch {

// Bytes of scratch the CUDA backend needs for this model (CudaOptions::workspace_bytes): bf16
// matrix products convert both operands into it, so it must hold the largest pair — the
// logits' [B·N, V] and [V, D] — plus the attention, embedding and loss scratch; at least the
// backend's 256 MiB default. (1.3b with B 4 × N 4096 in bf16: about 2.3 GB.)
std::size_t cuda_workspace_bytes(const core::ModelConfig& model, int streams, bool bf16);

// Device memory the CUDA backend holds beside the model's own buffers (brt-dist plan counts it
// per GPU): its scratch arena (cuda_workspace_bytes), cuBLAS's fixed workspace, for BST
// layers their cuFFT convolvers' staging and spectra plus the one cuFFT work area they share
// (kernels/ssm/fft_conv_dims.h; CudaFftConv plans with cufftSetAutoAllocation(0)), and in bf16
// the weights' bf16 shadow (CudaBackend::weights_fixed: 2 bytes a parameter of this rank).
struct CudaWorkspaceBytes {
  int64_t scratch = 0, cublas = 0, fft_buffers = 0, fft_work_area = 0, weight_shadow = 0;
  int64_t total() const { return scratch + cublas + fft_buffers + fft_work_area + weight_shadow; }
};
// `tp`: this rank's share of the SSM features (D/4/tp per rank); `parameter_bytes`: this rank's
// fp32 parameters (MemoryPrediction::parameters), which the bf16 shadow halves.
CudaWorkspaceBytes cuda_backend_workspace(const core::ModelConfig& model, int streams, bool bf16,
                                          int tp = 1, int64_t parameter_bytes = 0);

}  // namespace brt::launch
