// The optimizer kernels (kernels/optimizer_kernels.h) of a CUDA backend: they run on the
// backend's stream and work on its device memory, so an optimizer built with them keeps all
// its state on the GPU (core/optim/optimizer.h). Needs no CUDA headers.
#pragma once

#include <memory>

#include "kernels/backend.h"
#include "kernels/optimizer_kernels.h"

namespace brt::kernels::cuda {

// `backend` must be a CUDA backend (make_cuda_backend) and outlive the result; throws
// std::runtime_error naming the backend otherwise.
std::unique_ptr<OptimizerKernels<float>> make_cuda_optimizer_kernels(Backend<float>& backend);

}  // namespace brt::kernels::cuda
