// Vocabulary-parallel embedding and tied output (model.md §1 under tensor parallelism,
// docs/parallelism.md): E [V, D] is split by rows, rank r holding tokens [r·V/TP, (r+1)·V/TP).
// The lookup zeroes rows of tokens outside the range and all-reduces; the output computes only
// this rank's logits and the cross-entropy from three all-reduces over the TP group (row max,
// row sum of exponentials, target logit), so the [B·N, V] logits never exist on one rank.
// Everything runs as backend kernels on backend memory (device memory under CUDA); the host
// only maps the step's token ids (which it has anyway) to this rank's local ids.
#pragma once

#include <cstdint>

#include "core/sharding/tensor_parallel.h"
#include "kernels/backend.h"

namespace brt::core {

struct VocabRange {
  int begin = 0, end = 0;  // this rank's tokens [begin, end)
  int size() const { return end - begin; }
  bool contains(int32_t token) const { return token >= begin && token < end; }
};

// The range rank tp.rank() holds of a vocabulary of `vocab` tokens (vocab % TP == 0).
VocabRange vocab_range(const TensorParallel& tp, int vocab);

// Host: local[i] = tokens[i] - range.begin for tokens in range, -1 for other ranks' tokens
// (the backend's embedding and split cross-entropy skip -1).
void local_token_ids(const VocabRange& range, const int32_t* tokens, int n, int32_t* local);

// out[r] = E[token r] (rows of other ranks' tokens come from the all-reduce). local_tokens:
// local_token_ids of the step's tokens, in backend memory. table: this rank's [V/TP, D] rows.
template <typename T>
void vocab_parallel_embedding_forward(kernels::Backend<T>& be, const TensorParallel& tp,
                                      const int32_t* local_tokens, int n, const T* table, int D,
                                      T* out);
// Accumulates dtable (this rank's rows) from dout [n, D] for the tokens in range.
template <typename T>
void vocab_parallel_embedding_backward(kernels::Backend<T>& be, const int32_t* local_tokens,
                                       int n, const T* dout, int D, T* dtable);

// Masked softmax cross-entropy over logits split by vocabulary: logits [n, V/TP] are this
// rank's columns, local_targets the targets' local_token_ids (backend memory). Same contract
// as Backend::softmax_xent_forward_backward (per-row losses, dlogits OVERWRITTEN with
// grad_scale·mask·(softmax − onehot) for this rank's columns, may alias logits; returns the
// loss sum), and every rank gets the same losses.
template <typename T>
class VocabParallelCrossEntropy {
 public:
  VocabParallelCrossEntropy() = default;
  // Row statistics for `rows` rows in `memory` (the backend's), planned once.
  void allocate(kernels::Memory& memory, int rows);
  double forward_backward(kernels::Backend<T>& be, const TensorParallel& tp, const T* logits,
                          const int32_t* local_targets, const uint8_t* mask, int n, int V,
                          T grad_scale, T* dlogits, T* row_loss);
  int64_t bytes() const { return max_.bytes() + sum_.bytes() + target_.bytes(); }

 private:
  kernels::Buffer<double> max_, sum_, target_;  // [rows] each
};

}  // namespace brt::core
