// Softmax cross-entropy over the output logits (model.md §1), fused with its gradient.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu_parallel.h"

namespace brt::kernels::cpu {

template <typename T>
double XentOps<T>::forward_backward(Workspace<T>& ws, const T* logits, const int32_t* targets,
                                    const uint8_t* mask, int n, int V, T grad_scale, T* dlogits,
                                    T* row_loss) {
  // Validate before the parallel loop (exceptions must not leave an OpenMP region). Masked
  // rows may carry any target (padding).
  for (int r = 0; r < n; ++r) {
    if (mask[r] != 0 && (targets[r] < 0 || targets[r] >= V)) {
      throw std::runtime_error(bad_target_message("cpu", targets[r], r, V));
    }
  }
  double* row_nats = ws.shared_sums(static_cast<std::size_t>(n));

#pragma omp parallel for schedule(static) if (int64_t{n} * V >= kParallelMinWork)
  for (int r = 0; r < n; ++r) {
    const T* x = logits + static_cast<int64_t>(r) * V;
    T* dx = dlogits + static_cast<int64_t>(r) * V;  // may alias x: read x[j] before writing
    if (mask[r] == 0) {
      row_nats[r] = 0;
      row_loss[r] = T(0);
#pragma omp simd
      for (int j = 0; j < V; ++j) dx[j] = T(0);
      continue;
    }
    const int target = targets[r];
    const T x_target = x[target];
    T row_max = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : row_max)
    for (int j = 0; j < V; ++j) row_max = x[j] > row_max ? x[j] : row_max;
    // dx holds exp(x - max) after this pass (each x[j] is read before dx[j] is written).
    double sum = 0;  // max-subtracted, so each term is in (0, 1]
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < V; ++j) {
      dx[j] = exp_t(x[j] - row_max);
      sum += static_cast<double>(dx[j]);
    }
    const double nats = std::log(sum) + static_cast<double>(row_max) - x_target;
    row_nats[r] = nats;
    row_loss[r] = static_cast<T>(nats);
    const T coef = static_cast<T>(static_cast<double>(grad_scale) / sum);
#pragma omp simd
    for (int j = 0; j < V; ++j) dx[j] *= coef;
    dx[target] -= grad_scale;
  }

  double total = 0;  // fixed order: deterministic whatever the thread count
  for (int r = 0; r < n; ++r) total += row_nats[r];
  return total;
}

template struct XentOps<float>;
template struct XentOps<double>;

}  // namespace brt::kernels::cpu
