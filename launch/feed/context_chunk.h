// Context parallelism's share of a batch (core/sharding/context_parallel.h, docs/parallelism.md): every
// rank of a cp group reads the same streams' segment (its data rank's) and runs chunk `rank` of
// `size` of it. The segment's document starts, ids and task marks stay as they are: a chunk
// knows where its segment began.
//
// Training and its held-out loss read their chunks from one source, context_chunks() below,
// which the trainer builds over its segments' sources (launch/train/trainer.cpp make_source). The
// full evaluator (launch/eval/evaluator.cpp) cuts its own: it scores whole documents from the
// segment's gathered losses, so it keeps the whole segment beside this rank's chunk.
#pragma once

#include <memory>

#include "data/batch.h"
#include "launch/feed/batch_source.h"

namespace brt::launch {

// chunk = tokens [rank·N/size, (rank+1)·N/size) of every stream of full's inputs, targets, mask
// and positions. size must divide full.seq.
void take_chunk(const data::Batch& full, int rank, int size, data::Batch& chunk);

// A source of chunk `rank` of `size` of every segment `segments` gives: next() reads the whole
// [B, N] batch and keeps this rank's [B, N/size]; the cursor (and its merging and restoring),
// the description and the tokenizer are the segments' source's, so a checkpoint's data cursor
// does not depend on the CP size. `segments` itself when size == 1.
std::unique_ptr<BatchSource> context_chunks(std::unique_ptr<BatchSource> segments, int rank, int size);

}  // namespace brt::launch
