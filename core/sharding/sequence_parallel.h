// Megatron sequence parallelism for the recurrent state (model.md §5, docs/parallelism.md): a
// [B, S, width] tensor whose S state rows are split over the TP group, rank r holding rows
// [r·S/TP, (r+1)·S/TP) of every stream. Row-wise work (the gates, the carried Σ) runs on the
// local rows only; an all-gather makes the full rows before column-parallel projections and a
// reduce-scatter returns row-parallel partial sums to the rank that owns each row.
// Inactive (TP = 1) it is the identity and allocates nothing.
// The reorderings between the layers' stream-major rows and the collectives' rank-major blocks
// are backend copies (Backend::copy_2d) and the collectives TensorParallel's, so every buffer
// below may be backend (device) memory.
#pragma once

#include <cstdint>

#include "core/sharding/tensor_parallel.h"
#include "kernels/backend.h"

namespace brt::core {

// Buffers for the collectives in the backend's memory, planned once by the owner (a step
// allocates nothing).
template <typename T>
struct RowSplitScratch {
  kernels::Buffer<T> full;     // [B·S, width]
  kernels::Buffer<T> staging;  // [B·S, width]: rank-major order for the collectives
  void allocate(kernels::Memory& memory, int64_t full_elems) {
    full.allocate(memory, size_t(full_elems), "sequence-parallel rows");
    staging.allocate(memory, size_t(full_elems), "sequence-parallel staging");
  }
  int64_t bytes() const { return full.bytes() + staging.bytes(); }
};

class RowSplit {
 public:
  RowSplit() = default;  // inactive
  RowSplit(const TensorParallel& tp, int streams, int rows_per_stream);

  bool active() const { return tp_.active(); }
  const TensorParallel& tp() const { return tp_; }
  int full_rows() const { return streams_ * rows_; }                  // B·S
  int local_rows() const { return streams_ * (rows_ / tp_.size()); }  // B·S/TP

  // full [B·S, width] = every rank's local rows [B·S/TP, width] in place (staging: [B·S,
  // width]). Buffers in be's memory.
  template <typename T>
  void all_gather(kernels::Backend<T>& be, const T* local, T* full, int width, T* staging) const;
  // local = sum over ranks of their `full` partials, this rank's rows (full is not modified
  // beyond being copied to staging).
  template <typename T>
  void reduce_scatter(kernels::Backend<T>& be, const T* full, T* local, int width,
                      T* staging) const;
  // local += this rank's rows of full (a gradient complete on every rank).
  template <typename T>
  void add_local_rows(kernels::Backend<T>& be, const T* full, T* local, int width) const;

 private:
  TensorParallel tp_;
  int streams_ = 0, rows_ = 0;
};

}  // namespace brt::core
