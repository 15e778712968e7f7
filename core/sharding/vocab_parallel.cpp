#include "core/sharding/vocab_parallel.h"

#include <stdexcept>
#include <string>

namespace brt::core {

VocabRange vocab_range(const TensorParallel& tp, int vocab) {
  const int local = tp.local(vocab, "model.vocab");
  return {tp.rank() * local, (tp.rank() + 1) * local};
}

void local_token_ids(const VocabRange& range, const int32_t* tokens, int n, int32_t* local) {
  for (int i = 0; i < n; ++i) local[i] = range.contains(tokens[i]) ? tokens[i] - range.begin : -1;
}

template <typename T>
void vocab_parallel_embedding_forward(kernels::Backend<T>& be, const TensorParallel& tp,
                                      const int32_t* local_tokens, int n, const T* table, int D,
                                      T* out) {
  be.embedding_forward(local_tokens, n, table, D, out);  // zero rows for -1
  tp.reduce_output(out, int64_t(n) * D);
}

template <typename T>
void vocab_parallel_embedding_backward(kernels::Backend<T>& be, const int32_t* local_tokens,
                                       int n, const T* dout, int D, T* dtable) {
  be.embedding_backward(local_tokens, n, dout, D, dtable);  // -1 rows add nothing
}

template <typename T>
void VocabParallelCrossEntropy<T>::allocate(kernels::Memory& memory, int rows) {
  max_.allocate(memory, size_t(rows), "vocab-parallel xent row max");
  sum_.allocate(memory, size_t(rows), "vocab-parallel xent row sum");
  target_.allocate(memory, size_t(rows), "vocab-parallel xent target logit");
}

template <typename T>
double VocabParallelCrossEntropy<T>::forward_backward(kernels::Backend<T>& be,
                                                      const TensorParallel& tp, const T* logits,
                                                      const int32_t* local_targets,
                                                      const uint8_t* mask, int n, int V,
                                                      T grad_scale, T* dlogits, T* row_loss) {
  if (size_t(n) > max_.size())
    throw std::logic_error("VocabParallelCrossEntropy: " + std::to_string(n) +
                           " rows, planned for " + std::to_string(max_.size()));
  // 1. the row max over the whole vocabulary (for a stable log-sum-exp).
  be.xent_split_max(logits, n, V, max_.data());
  tp.all_reduce_max(max_.data(), n);
  // 2. the sum of exponentials and the target's logit (0 on ranks not holding the target).
  be.xent_split_sums(logits, local_targets, mask, n, V, max_.data(), sum_.data(),
                     target_.data());
  tp.all_reduce_sum(sum_.data(), n);
  tp.all_reduce_sum(target_.data(), n);
  // 3. losses (identical on every rank) and this rank's columns of the gradient.
  return be.xent_split_finish(logits, local_targets, mask, n, V, grad_scale, max_.data(),
                              sum_.data(), target_.data(), dlogits, row_loss);
}

#define BRT_INSTANTIATE_VOCAB_PARALLEL(T)                                                      \
  template void vocab_parallel_embedding_forward<T>(kernels::Backend<T>&, const TensorParallel&, \
                                                    const int32_t*, int, const T*, int, T*);    \
  template void vocab_parallel_embedding_backward<T>(kernels::Backend<T>&, const int32_t*, int, \
                                                     const T*, int, T*);                        \
  template class VocabParallelCrossEntropy<T>;

BRT_INSTANTIATE_VOCAB_PARALLEL(float)
BRT_INSTANTIATE_VOCAB_PARALLEL(double)

}  // namespace brt::core
