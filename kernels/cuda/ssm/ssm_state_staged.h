// Context parallelism's S4D state passing on the CUDA backend (kernels/ssm/s4d_state_passing.h).
// These four ops run once per BST layer and step on state-sized tensors (and, for the summary's
// backward, on the chunk's U), so for now they are staged: the operands are copied to the host
// through the backend's memory (which waits for the stream), the CPU implementation runs, and
// the outputs go back. Correct and deterministic on any device, not fast; device kernels are the
// next step when CP runs on GPUs (docs/parallelism.md, "Context parallelism").
#pragma once

#include "kernels/memory.h"
#include "kernels/ssm/s4d_state_passing.h"

namespace brt::kernels::cuda {

void staged_s4d_state_advance(Memory& memory, const ssm::S4dCarryDims& d,
                              const ssm::S4dParams<float>& p, const double* h, double* x,
                              bool adjoint);
void staged_s4d_state_apply_grad(Memory& memory, const ssm::S4dCarryDims& d,
                                 const ssm::S4dParams<float>& p, const float* dy, double* g);
void staged_s4d_state_advance_backward(Memory& memory, const ssm::S4dCarryDims& d,
                                       const ssm::S4dParams<float>& p, const double* x_prev,
                                       const double* gnext, const ssm::S4dGrads<float>& g);
void staged_s4d_summary_backward(Memory& memory, const ssm::S4dCarryDims& d,
                                 const ssm::S4dParams<float>& p, const float* u, const double* dh,
                                 float* du, const ssm::S4dGrads<float>& g);

}  // namespace brt::kernels::cuda
