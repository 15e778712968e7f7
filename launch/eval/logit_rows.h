// What the task evaluators (launch/eval/task_evaluator.h, launch/eval/mqar_evaluator.h) read
// from a model between segments: a whole logits row on the host, and a clean carried state.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/model.h"
#include "kernels/memory.h"

namespace brt::launch {

// The whole logits row `row` on the host: under TP each rank holds its vocabulary columns in
// rank order, gathered over the TP group (every rank of it reads the same batches, so all of
// them gather the same rows in the same order), as launch/eval/generator.cpp does.
template <typename T>
void whole_row(core::Model<T>& model, const T* logits, size_t row, std::vector<T>& out) {
  const core::TensorParallel& tp = model.tensor_parallel();
  const size_t V = size_t(model.config().vocab);
  if (!tp.active()) {  // backend memory (device memory under CUDA)
    out = kernels::copy_to_host(model.memory(), logits + row * V, V);
    return;
  }
  const size_t local = V / size_t(tp.size());
  const std::vector<T> mine = kernels::copy_to_host(model.memory(), logits + row * local, local);
  out.resize(V);
  tp.group()->all_gather(std::span<const T>(mine), std::span<T>(out));
}

// Zeros in every carried cache and state: nothing of a previous pass remains.
template <typename T>
void clear_carried_state(core::Model<T>& model) {
  for (auto& ref : model.carried_state()) {
    int64_t n = 1;
    for (auto s : ref.shape) n *= s;
    model.memory().fill_zero(ref.data, size_t(n) * sizeof(T));  // backend memory
  }
}

}  // namespace brt::launch
