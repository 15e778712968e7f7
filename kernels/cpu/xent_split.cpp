// The cross-entropy over logits split by vocabulary (model.md §1 under tensor parallelism,
// docs/parallelism.md): the three per-row phases between which the caller reduces the row
// statistics over the TP group. Double accumulation in column order, so each rank's rows are
// deterministic and a TP = 1 run matches the fused softmax_xent to double rounding.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops.h"
#include "kernels/cpu_parallel.h"

namespace brt::kernels::cpu {

template <typename T>
void SplitXentOps<T>::row_max(const T* logits, int n, int V, double* row_max) {
#pragma omp parallel for schedule(static) if (int64_t{n} * V >= kParallelMinWork)
  for (int r = 0; r < n; ++r) {
    const T* l = logits + int64_t(r) * V;
    row_max[r] = double(*std::max_element(l, l + V));
  }
}

template <typename T>
void SplitXentOps<T>::sums(const T* logits, const int32_t* local_targets, const uint8_t* mask,
                           int n, int V, const double* row_max, double* sum_exp,
                           double* target_logit) {
#pragma omp parallel for schedule(static) if (int64_t{n} * V >= kParallelMinWork)
  for (int r = 0; r < n; ++r) {
    const T* l = logits + int64_t(r) * V;
    double s = 0.0;  // in column order (no simd reduction: a fixed summation order)
    for (int v = 0; v < V; ++v) s += std::exp(double(l[v]) - row_max[r]);
    sum_exp[r] = s;
    const int32_t t = local_targets[r];
    target_logit[r] = mask[r] != 0 && t >= 0 ? double(l[t]) : 0.0;
  }
}

template <typename T>
double SplitXentOps<T>::finish(Workspace<T>& ws, const T* logits, const int32_t* local_targets,
                               const uint8_t* mask, int n, int V, T grad_scale,
                               const double* row_max, const double* sum_exp,
                               const double* target_logit, T* dlogits, T* row_loss) {
  double* row_nats = ws.shared_sums(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static) if (int64_t{n} * V >= kParallelMinWork)
  for (int r = 0; r < n; ++r) {
    const T* l = logits + int64_t(r) * V;
    T* d = dlogits + int64_t(r) * V;  // may alias l: each l[v] is read before d[v] is written
    if (mask[r] == 0) {
      row_nats[r] = 0.0;
      row_loss[r] = T(0);
      std::fill(d, d + V, T(0));
      continue;
    }
    const double log_z = std::log(sum_exp[r]) + row_max[r];
    const double loss = log_z - target_logit[r];
    row_nats[r] = loss;
    row_loss[r] = T(loss);
    for (int v = 0; v < V; ++v) d[v] = T(double(grad_scale) * std::exp(double(l[v]) - log_z));
    if (local_targets[r] >= 0) d[local_targets[r]] -= grad_scale;
  }
  double total = 0.0;  // row order: deterministic whatever the thread count
  for (int r = 0; r < n; ++r) total += row_nats[r];
  return total;
}

template struct SplitXentOps<float>;
template struct SplitXentOps<double>;

}  // namespace brt::kernels::cpu
