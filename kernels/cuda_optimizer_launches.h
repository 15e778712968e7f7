// The CUDA optimizer's launches in one step (kernels/cuda/optim/optimizer.cu behind core/optim's
// AdamW and Adafactor), each with its grid's threads and the bytes it moves, for the planner's
// optimizer lines (launch/plan/counted_step.h): a kernel whose grid holds fewer threads than the
// device keeps resident cannot stream at the device's bandwidth, so the threads matter as much
// as the bytes. The list follows the code: the gradient norm (one chunk-list kernel, under TP
// its reduction), then the rule's kernels in core's order, per factored tensor where core calls
// per tensor, with the statistics' reductions between. The strict emulator checks the count against
// the launches it sees (tests/cuda_emulation/launches.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/optimizer_kernels.h"

namespace brt::kernels {

struct OptimizerLaunch {
  std::string kernel;
  int64_t threads = 0;       // grid x block; 0 for a copy
  double bytes = 0;          // read and written in device memory
  bool factor_sums = false;  // Adafactor's row and column sums of G (and their fold)
  bool copy = false;         // a device <-> host copy core waits for (a round trip)
  bool collective = false;   // a small all-reduce over the TP group on the backend's stream
};

// One step over `tensors` (their layouts: core::adafactor_layout for Adafactor, numel in
// p0..p2 otherwise; pointers unused), `n_chunks` the optimizer's chunk table's size.
// `reducer`: the statistics are summed across ranks (tensor parallelism) where they live
// (core::StatReducer::reduce_on_device): per-parameter totals, then for each statistic its
// partial entries gathered, all-reduced and scattered back; without one the norm and the
// coefficients are made from the chunk partials. Either way nothing waits for the host but the
// step scalars' read-back.
std::vector<OptimizerLaunch> cuda_optimizer_step_launches(const std::vector<OptimTensor<float>>& tensors,
                                                          int64_t n_chunks, bool adafactor, bool reducer = false);

}  // namespace brt::kernels
