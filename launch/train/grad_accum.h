// Gradient accumulation (train.grad_accum = M; docs/parallelism.md, "Gradient accumulation"): an
// optimizer step is M micro-steps, each a forward and backward over its own group of
// train.batch = B streams of the rank, so a step trains on exactly the B·M streams, tokens and
// loss of a run with train.batch = B·M, train.grad_accum = 1, in the same per-stream order, on
// the activation memory of B streams.
//
// The rank's data source holds all B·M streams (global streams [data_rank·B·M,
// (data_rank+1)·B·M)); micro-step g takes its streams [g·B, (g+1)·B). The model holds the
// carried state (model.md §8) of B streams; StreamGroupState keeps every group's, laid out as
// the carried state of one model of B·M streams, so checkpoints are those of train.batch = B·M
// (docs/checkpoint-format.md) and a run resumes under either.
#pragma once

#include <cstdint>
#include <vector>

#include "core/layer.h"
#include "core/model.h"
#include "data/batch.h"
#include "kernels/memory.h"

namespace brt::launch {

template <typename T>
class StreamGroupState {
 public:
  // `groups` = train.grad_accum >= 1. With one group nothing is allocated and load/store do
  // nothing: the model's own carried state is the only one. Otherwise every group starts from
  // the model's current carried state.
  StreamGroupState(core::Model<T>& model, int groups);
  StreamGroupState(const StreamGroupState&) = delete;
  StreamGroupState& operator=(const StreamGroupState&) = delete;

  int groups() const { return groups_; }
  // Group `g`'s carried state into the model (before its micro-step) and back (after it).
  void load(int g);
  void store(int g);
  // Every group's carried state, one ref per model tensor with the model's name and shard,
  // shape [groups·B, ...]: group g's streams are rows [g·B, (g+1)·B). In backend memory like the
  // model's. The model's own refs when groups = 1.
  std::vector<core::TensorRef<T>> carried_state();
  int64_t bytes() const;  // what the groups hold beyond the model (0 for one group)

 private:
  void copy_group(int g, bool into_model);

  core::Model<T>& model_;
  int groups_;
  std::vector<kernels::Buffer<T>> banks_;  // per model carried tensor: [groups·B, ...]
};

// Micro-step g's batch: streams [g·B, (g+1)·B) of `whole` (B = streams), every per-stream field.
void take_stream_group(const data::Batch& whole, int g, int streams, data::Batch& out);

}  // namespace brt::launch
