// Where each tensor of a training run sits in its checkpoint, against its full
// (layout-independent) shape: what the save (training_checkpoint_save.cpp) and the load
// (training_checkpoint_load.cpp) must agree on (docs/checkpoint-format.md). Internal to
// launch/train/checkpoint.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "core/model.h"
#include "core/optim/optimizer.h"
#include "launch/train/checkpoint/training_checkpoint.h"

namespace brt::launch::training_layout {

namespace ck = brt::checkpoint;

// The parameters a checkpoint of this model holds, at their full shapes.
template <typename T>
std::vector<ck::ExpectedTensor> expected_parameters(core::Model<T>& model) {
  std::vector<ck::ExpectedTensor> out;
  for (const auto& p : model.params().params())
    out.push_back({ck::join_path(ck::kModelGroup, p.spec.name), p.spec.shape,
                   ck::DTypeOf<T>::value});
  return out;
}

// A per-stream tensor [B, ...] of this rank as part of the global [data_size*B, ...] one.
inline ck::Shape global_shape(ck::Shape local, int data_size) {
  local[0] *= data_size;
  return local;
}

inline ck::Slice stream_slice(const ck::Shape& local, const CheckpointRanks& ranks) {
  return ck::Slice::along(global_shape(local, ranks.data_size()), 0, int64_t(ranks.data_rank()) * local[0], local[0]);
}

// A tensor as this rank holds it, described against its full (layout-independent) shape.
inline core::ParamSpec full_spec_of(const std::string& name, std::vector<int64_t> local_shape,
                             const core::ShardSpec& shard) {
  if (shard.sharded()) local_shape[size_t(shard.dim)] *= shard.size;
  return {name, std::move(local_shape), {}, shard};
}

// The spec of optimizer state `s` against its full shape: its parameter's when it has the
// parameter's shape (AdamW, Adafactor m and v). Adafactor's R / C drop one parameter axis: a
// split along that axis was summed over TP (the state is whole on every rank), a split along
// another axis carries over to the state's matching axis (model.md §10c).
template <typename T>
core::ParamSpec optimizer_state_spec(const core::NamedState<T>& s, const core::ParamSpec& param) {
  if (!param.shard.sharded()) return {s.name, s.shape, {}, {}};
  if (s.dropped_axis < 0) {
    if (s.shape != param.local_shape())
      throw std::invalid_argument("checkpoint: optimizer state " + s.name + " of the tensor-parallel "
                                  "shard " + param.name + " has no layout-independent form");
    return {s.name, param.shape, {}, param.shard};
  }
  if (param.shard.dim == s.dropped_axis) return {s.name, s.shape, {}, {}};
  core::ShardSpec shard = param.shard;
  if (shard.dim > s.dropped_axis) --shard.dim;
  return full_spec_of(s.name, s.shape, shard);
}


}  // namespace brt::launch::training_layout
