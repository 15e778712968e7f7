// A step shared by the backward passes of both attentions (model.md §3.1–§3.4: logits are
// s·<q, k>). With g = dlogits·K computed without the scale, the query gradient is s·g and the
// scale's gradient collects <q, g> over the rows.
#pragma once

#include <cstdint>

namespace brt::kernels::cpu {

// dq[r] += s·g[r] for `rows` rows (q, dq with row stride `row_stride`, g packed [rows, dh]);
// returns the sum over rows of <q[r], g[r]> in double.
template <typename T>
inline double accumulate_query_grad(const T* q, T* dq, const T* g, int rows, int dh,
                                    int64_t row_stride, T s) {
  double total = 0;
  for (int r = 0; r < rows; ++r) {
    const T* qr = q + int64_t{r} * row_stride;
    T* dqr = dq + int64_t{r} * row_stride;
    const T* gr = g + int64_t{r} * dh;
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < dh; ++j) {
      dot += static_cast<double>(qr[j]) * gr[j];
      dqr[j] += s * gr[j];
    }
    total += dot;
  }
  return total;
}

}  // namespace brt::kernels::cpu
