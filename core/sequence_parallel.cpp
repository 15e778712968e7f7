#include "core/sequence_parallel.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace brt::core {

RowSplit::RowSplit(const TensorParallel& tp, int streams, int rows_per_stream)
    : tp_(tp), streams_(streams), rows_(rows_per_stream) {
  tp.local(rows_per_stream, "model.state_size");  // throws unless S divides by TP
}

// Full rows are stream-major [B, S]; the collectives work on rank-major [TP, B, S/TP] blocks.
template <typename T>
void RowSplit::all_gather(const T* local, T* full, int width, std::vector<T>& staging) const {
  const int64_t n_local = int64_t(local_rows()) * width;
  if (!active()) {
    std::copy(local, local + n_local, full);
    return;
  }
  tp_.group()->all_gather(std::span<const T>(local, size_t(n_local)),
                          std::span<T>(staging.data(), size_t(n_local) * size_t(tp_.size())));
  const int64_t block = int64_t(rows_ / tp_.size()) * width;  // one stream's rows of one rank
  for (int r = 0; r < tp_.size(); ++r)
    for (int b = 0; b < streams_; ++b) {
      const T* src = staging.data() + r * n_local + b * block;
      std::copy(src, src + block, full + (int64_t(b) * tp_.size() + r) * block);
    }
}

template <typename T>
void RowSplit::reduce_scatter(const T* full, T* local, int width, std::vector<T>& staging) const {
  const int64_t n_local = int64_t(local_rows()) * width;
  if (!active()) {
    std::copy(full, full + n_local, local);
    return;
  }
  const int64_t block = int64_t(rows_ / tp_.size()) * width;
  for (int r = 0; r < tp_.size(); ++r)
    for (int b = 0; b < streams_; ++b) {
      const T* src = full + (int64_t(b) * tp_.size() + r) * block;
      std::copy(src, src + block, staging.data() + r * n_local + b * block);
    }
  tp_.group()->reduce_scatter(
      std::span<const T>(staging.data(), size_t(n_local) * size_t(tp_.size())),
      std::span<T>(local, size_t(n_local)));
}

template <typename T>
void RowSplit::add_local_rows(const T* full, T* local, int width) const {
  const int64_t block = int64_t(rows_ / tp_.size()) * width;
  const int r = tp_.rank();
  for (int b = 0; b < streams_; ++b) {
    const T* src = full + (int64_t(b) * tp_.size() + r) * block;
    T* dst = local + b * block;
    for (int64_t i = 0; i < block; ++i) dst[i] += src[i];
  }
}

#define BRT_INSTANTIATE_ROW_SPLIT(T)                                                            \
  template void RowSplit::all_gather<T>(const T*, T*, int, std::vector<T>&) const;              \
  template void RowSplit::reduce_scatter<T>(const T*, T*, int, std::vector<T>&) const;          \
  template void RowSplit::add_local_rows<T>(const T*, T*, int) const;

BRT_INSTANTIATE_ROW_SPLIT(float)
BRT_INSTANTIATE_ROW_SPLIT(double)

}  // namespace brt::core
