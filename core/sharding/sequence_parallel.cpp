#include "core/sharding/sequence_parallel.h"

#include <stdexcept>
#include <string>

namespace brt::core {

RowSplit::RowSplit(const TensorParallel& tp, int streams, int rows_per_stream)
    : tp_(tp), streams_(streams), rows_(rows_per_stream) {
  tp.local(rows_per_stream, "model.state_size");  // throws unless S divides by TP
}

// Full rows are stream-major [B, S]; the collectives work on rank-major [TP, B, S/TP] blocks.
// Rank r's block of stream b (rows_/TP rows) sits at (b·TP + r)·block in full and at
// r·n_local + b·block in staging: one strided copy per rank moves all B of them.
template <typename T>
void RowSplit::all_gather(kernels::Backend<T>& be, const T* local, T* full, int width,
                          T* staging) const {
  const int64_t n_local = int64_t(local_rows()) * width;
  if (!active()) {
    be.copy(local, n_local, full);
    return;
  }
  tp_.all_gather(local, staging, n_local);
  const int tp = tp_.size();
  const int64_t block = int64_t(rows_ / tp) * width;  // one stream's rows of one rank
  for (int r = 0; r < tp; ++r)
    be.copy_2d(staging + r * n_local, block, streams_, block, full + r * block, tp * block, false);
}

template <typename T>
void RowSplit::reduce_scatter(kernels::Backend<T>& be, const T* full, T* local, int width,
                              T* staging) const {
  const int64_t n_local = int64_t(local_rows()) * width;
  if (!active()) {
    be.copy(full, n_local, local);
    return;
  }
  const int tp = tp_.size();
  const int64_t block = int64_t(rows_ / tp) * width;
  for (int r = 0; r < tp; ++r)
    be.copy_2d(full + r * block, tp * block, streams_, block, staging + r * n_local, block, false);
  tp_.reduce_scatter(staging, local, n_local);
}

template <typename T>
void RowSplit::add_local_rows(kernels::Backend<T>& be, const T* full, T* local, int width) const {
  const int tp = tp_.size();
  const int64_t block = int64_t(rows_ / tp) * width;
  be.copy_2d(full + tp_.rank() * block, tp * block, streams_, block, local, block, true);
}

#define BRT_INSTANTIATE_ROW_SPLIT(T)                                                          \
  template void RowSplit::all_gather<T>(kernels::Backend<T>&, const T*, T*, int, T*) const;   \
  template void RowSplit::reduce_scatter<T>(kernels::Backend<T>&, const T*, T*, int, T*) const; \
  template void RowSplit::add_local_rows<T>(kernels::Backend<T>&, const T*, T*, int) const;

BRT_INSTANTIATE_ROW_SPLIT(float)
BRT_INSTANTIATE_ROW_SPLIT(double)

}  // namespace brt::core
