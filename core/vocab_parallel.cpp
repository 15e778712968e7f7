#include "core/vocab_parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace brt::core {

VocabRange vocab_range(const TensorParallel& tp, int vocab) {
  const int local = tp.local(vocab, "model.vocab");
  return {tp.rank() * local, (tp.rank() + 1) * local};
}

template <typename T>
void vocab_parallel_embedding_forward(kernels::Backend<T>& be, const TensorParallel& tp,
                                      const VocabRange& range, const int32_t* tokens, int n,
                                      const T* table, int D, T* out) {
  for (int r = 0; r < n; ++r) {
    T* row = out + int64_t(r) * D;
    if (range.contains(tokens[r])) {
      const int32_t local = tokens[r] - range.begin;
      be.embedding_forward(&local, 1, table, D, row);
    } else {
      be.fill(row, D, T(0));
    }
  }
  tp.reduce_output(out, int64_t(n) * D);
}

template <typename T>
void vocab_parallel_embedding_backward(kernels::Backend<T>& be, const VocabRange& range,
                                       const int32_t* tokens, int n, const T* dout, int D,
                                       T* dtable) {
  for (int r = 0; r < n; ++r) {
    if (!range.contains(tokens[r])) continue;
    const int32_t local = tokens[r] - range.begin;
    be.embedding_backward(&local, 1, dout + int64_t(r) * D, D, dtable);
  }
}

template <typename T>
double VocabParallelCrossEntropy<T>::forward_backward(const TensorParallel& tp,
                                                      const VocabRange& range, const T* logits,
                                                      const int32_t* targets,
                                                      const uint8_t* mask, int n, T grad_scale,
                                                      T* dlogits, T* row_loss) {
  const int V = range.size();
  // 1. the row max over the whole vocabulary (for a stable log-sum-exp).
#pragma omp parallel for schedule(static)
  for (int r = 0; r < n; ++r) {
    const T* l = logits + int64_t(r) * V;
    max_[size_t(r)] = double(*std::max_element(l, l + V));
  }
  tp.all_reduce_max(max_.data(), n);
  // 2. the sum of exponentials and the target's logit (0 on ranks not holding the target).
#pragma omp parallel for schedule(static)
  for (int r = 0; r < n; ++r) {
    const T* l = logits + int64_t(r) * V;
    double s = 0.0;
    for (int v = 0; v < V; ++v) s += std::exp(double(l[v]) - max_[size_t(r)]);
    sum_[size_t(r)] = s;
    target_[size_t(r)] = mask[r] && range.contains(targets[r]) ? double(l[targets[r] - range.begin]) : 0.0;
  }
  tp.all_reduce_sum(sum_.data(), n);
  tp.all_reduce_sum(target_.data(), n);
  // 3. losses (identical on every rank) and this rank's columns of the gradient.
  double total = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : total)
  for (int r = 0; r < n; ++r) {
    const T* l = logits + int64_t(r) * V;
    T* d = dlogits + int64_t(r) * V;
    if (!mask[r]) {
      row_loss[r] = T(0);
      std::fill(d, d + V, T(0));
      continue;
    }
    const double log_z = std::log(sum_[size_t(r)]) + max_[size_t(r)];
    const double loss = log_z - target_[size_t(r)];
    row_loss[r] = T(loss);
    total += loss;
    for (int v = 0; v < V; ++v) d[v] = T(double(grad_scale) * std::exp(double(l[v]) - log_z));
    if (range.contains(targets[r])) d[targets[r] - range.begin] -= grad_scale;
  }
  return total;
}

#define BRT_INSTANTIATE_VOCAB_PARALLEL(T)                                                       \
  template void vocab_parallel_embedding_forward<T>(kernels::Backend<T>&, const TensorParallel&, \
                                                    const VocabRange&, const int32_t*, int,     \
                                                    const T*, int, T*);                         \
  template void vocab_parallel_embedding_backward<T>(kernels::Backend<T>&, const VocabRange&,   \
                                                     const int32_t*, int, const T*, int, T*);   \
  template class VocabParallelCrossEntropy<T>;

BRT_INSTANTIATE_VOCAB_PARALLEL(float)
BRT_INSTANTIATE_VOCAB_PARALLEL(double)

}  // namespace brt::core
