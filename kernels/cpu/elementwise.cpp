// Element-wise helpers, embedding (model.md §1) and ReLU (model.md §4).
#include <algorithm>
#include <cstring>

#include "kernels/cpu/ops.h"
#include "kernels/cpu_parallel.h"

namespace brt::kernels::cpu {

template <typename T>
void ElementwiseOps<T>::fill(T* x, int64_t n, T value) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}

template <typename T>
void ElementwiseOps<T>::copy(const T* x, int64_t n, T* y) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}

template <typename T>
void ElementwiseOps<T>::add_inplace(T* y, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

template <typename T>
void ElementwiseOps<T>::scale_inplace(T* x, int64_t n, T alpha) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

template <typename T>
void ElementwiseOps<T>::column_sum_accumulate(const T* dz, int n, int D, T* db) {
  column_reduce_accumulate(n, D, db,
                           [=](int i, int j) { return dz[static_cast<int64_t>(i) * D + j]; });
}

template <typename T>
void ElementwiseOps<T>::add_rows_broadcast(T* out, const T* table, int rows_out, int rows_table,
                                           int D) {
#pragma omp parallel for schedule(static) if (int64_t{rows_out} * D >= kParallelMinWork)
  for (int i = 0; i < rows_out; ++i) {
    T* row = out + static_cast<int64_t>(i) * D;
    const T* src = table + static_cast<int64_t>(i % rows_table) * D;
#pragma omp simd
    for (int j = 0; j < D; ++j) row[j] += src[j];
  }
}

// model.md §1: x0 = E[token]. The vocabulary size is not passed, so tokens are trusted here
// (the data loader validates them).
template <typename T>
void ElementwiseOps<T>::embedding_forward(const int32_t* tokens, int n, const T* table, int D,
                                          T* out) {
#pragma omp parallel for schedule(static) if (int64_t{n} * D >= kParallelMinWork)
  for (int i = 0; i < n; ++i) {
    T* row = out + static_cast<int64_t>(i) * D;
    if (tokens[i] < 0)  // another TP rank's token (backend.h)
      std::memset(static_cast<void*>(row), 0, sizeof(T) * D);
    else
      std::memcpy(row, table + static_cast<int64_t>(tokens[i]) * D, sizeof(T) * D);
  }
}

// Repeated tokens hit the same table row, so threads split the COLUMNS and each walks all
// rows in order: race-free and the same summation order whatever the thread count.
template <typename T>
void ElementwiseOps<T>::embedding_backward(const int32_t* tokens, int n, const T* dout, int D,
                                           T* dtable) {
  const int chunks = (D + kColumnChunk - 1) / kColumnChunk;
#pragma omp parallel for schedule(static) if (int64_t{n} * D >= kParallelMinWork && chunks > 1)
  for (int c = 0; c < chunks; ++c) {
    const int j0 = c * kColumnChunk;
    const int j1 = std::min(D, j0 + kColumnChunk);
    for (int i = 0; i < n; ++i) {
      if (tokens[i] < 0) continue;  // another TP rank's token
      T* dst = dtable + static_cast<int64_t>(tokens[i]) * D;
      const T* src = dout + static_cast<int64_t>(i) * D;
#pragma omp simd
      for (int j = j0; j < j1; ++j) dst[j] += src[j];
    }
  }
}

template <typename T>
void ElementwiseOps<T>::copy_2d(const T* x, int64_t ldx, int rows, int64_t cols, T* y,
                                int64_t ldy, bool accumulate) {
#pragma omp parallel for schedule(static) if (int64_t{rows} * cols >= kParallelMinWork)
  for (int i = 0; i < rows; ++i) {
    const T* src = x + i * ldx;
    T* dst = y + i * ldy;
    if (accumulate) {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) dst[j] += src[j];
    } else {
      std::memcpy(dst, src, sizeof(T) * size_t(cols));
    }
  }
}

template <typename T>
void ElementwiseOps<T>::relu_forward(const T* x, int64_t n, T* y) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
}

template <typename T>
void ElementwiseOps<T>::relu_backward(const T* y, const T* dy, int64_t n, T* dx) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
}

template struct ElementwiseOps<float>;
template struct ElementwiseOps<double>;

}  // namespace brt::kernels::cpu
