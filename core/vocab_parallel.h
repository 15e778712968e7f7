// Vocabulary-parallel embedding and tied output (MODEL.md §1 under tensor parallelism,
// docs/parallelism.md): E [V, D] is split by rows, rank r holding tokens [r·V/TP, (r+1)·V/TP).
// The lookup zeroes rows of tokens outside the range and all-reduces; the output computes only
// this rank's logits and the cross-entropy from three all-reduces over the TP group (row max,
// row sum of exponentials, target logit), so the [B·N, V] logits never exist on one rank.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor_parallel.h"
#include "kernels/backend.h"

namespace brt::core {

struct VocabRange {
  int begin = 0, end = 0;  // this rank's tokens [begin, end)
  int size() const { return end - begin; }
  bool contains(int32_t token) const { return token >= begin && token < end; }
};

// The range rank tp.rank() holds of a vocabulary of `vocab` tokens (vocab % TP == 0).
VocabRange vocab_range(const TensorParallel& tp, int vocab);

// out[r] = E[tokens[r]] (rows of other ranks' tokens come from the all-reduce). table: this
// rank's [range.size(), D] rows.
template <typename T>
void vocab_parallel_embedding_forward(kernels::Backend<T>& be, const TensorParallel& tp,
                                      const VocabRange& range, const int32_t* tokens, int n,
                                      const T* table, int D, T* out);
// Accumulates dtable (this rank's rows) from dout [n, D] for the tokens in range.
template <typename T>
void vocab_parallel_embedding_backward(kernels::Backend<T>& be, const VocabRange& range,
                                       const int32_t* tokens, int n, const T* dout, int D,
                                       T* dtable);

// Masked softmax cross-entropy over logits split by vocabulary: logits [n, range.size()] are
// this rank's columns. Same contract as Backend::softmax_xent_forward_backward (per-row losses,
// dlogits OVERWRITTEN with grad_scale·mask·(softmax − onehot) for this rank's columns, may
// alias logits; returns the loss sum), and every rank gets the same losses.
template <typename T>
class VocabParallelCrossEntropy {
 public:
  explicit VocabParallelCrossEntropy(int rows) : max_(rows), sum_(rows), target_(rows) {}
  double forward_backward(const TensorParallel& tp, const VocabRange& range, const T* logits,
                          const int32_t* targets, const uint8_t* mask, int n, T grad_scale,
                          T* dlogits, T* row_loss);
  int64_t bytes() const { return int64_t(max_.size() + sum_.size() + target_.size()) * 8; }

 private:
  std::vector<double> max_, sum_, target_;  // [rows] each, planned once
};

}  // namespace brt::core
