// Context parallelism's share of a batch (core/sharding/context_parallel.h, docs/parallelism.md): every
// rank of a cp group reads the same streams' segment (its data rank's) and runs chunk `rank` of
// `size` of it. The segment's document starts, ids and task marks stay as they are: a chunk
// knows where its segment began.
#pragma once

#include "data/batch.h"

namespace brt::launch {

// chunk = tokens [rank·N/size, (rank+1)·N/size) of every stream of full's inputs, targets, mask
// and positions. size must divide full.seq.
void take_chunk(const data::Batch& full, int rank, int size, data::Batch& chunk);

}  // namespace brt::launch
