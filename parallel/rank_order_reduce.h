// The element-wise reduction behind every MPI-backend reduction: sources combined strictly
// left to right, ((s0 op s1) op s2) ..., the same way on every rank and for every length —
// which is what makes all-reduce results bit-identical between runs (docs/parallelism.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "parallel/communicator.h"

namespace brt::parallel {

// out[i] = sources[0][i] op sources[1][i] op ... for i < n. `out` may alias a source (the
// same elements). kMax propagates NaN from any source.
void reduce_in_rank_order(DataType type, ReduceOp op, const std::vector<const std::byte*>& sources,
                          std::byte* out, int64_t n);

}  // namespace brt::parallel
