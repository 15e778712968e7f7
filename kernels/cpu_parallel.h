// Small OpenMP helpers shared by the CPU kernels. Every reduction here has a fixed partition
// and a fixed summation order, independent of the thread count (backend.h conventions).
#pragma once

#include <algorithm>
#include <cstdint>

namespace brt::kernels::cpu {

// Below this many elements an OpenMP region costs more than it saves.
constexpr int64_t kParallelMinWork = int64_t{1} << 15;
// The same for kernels built from gemm tiles, counted in multiply-adds.
constexpr int64_t kParallelMinGemmWork = int64_t{1} << 18;
// Columns per task of a column reduction: 64 floats = 4 cache lines, so threads never share
// a cache line of the output.
constexpr int kColumnChunk = 64;

// out[j] += sum over rows i (in row order, accumulated in double) of term(i, j), for
// j in [0, D). Threads own disjoint column chunks.
template <typename T, typename Term>
void column_reduce_accumulate(int n, int D, T* out, Term term) {
  const int chunks = (D + kColumnChunk - 1) / kColumnChunk;
#pragma omp parallel for schedule(static) if (int64_t{n} * D >= kParallelMinWork && chunks > 1)
  for (int c = 0; c < chunks; ++c) {
    const int j0 = c * kColumnChunk;
    const int j1 = std::min(D, j0 + kColumnChunk);
    double acc[kColumnChunk] = {};
    for (int i = 0; i < n; ++i) {
#pragma omp simd
      for (int j = j0; j < j1; ++j) acc[j - j0] += static_cast<double>(term(i, j));
    }
    for (int j = j0; j < j1; ++j) out[j] += static_cast<T>(acc[j - j0]);
  }
}

}  // namespace brt::kernels::cpu
