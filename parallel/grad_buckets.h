// Data-parallel gradient reduction in buckets (Megatron-style).
//
// The gradient arena of a model is one contiguous buffer in which every layer's parameters
// form a contiguous range. Backward finishes layers from the last to the first, so buckets
// are built from the END of the arena backwards: each bucket is a contiguous range of whole
// layers (a layer larger than the bucket size is split into several buckets), and a bucket is
// "ready" once the lowest layer it covers has reported its gradients final. The ranges that
// belong to no layer (embedding, final norm) are ready last (layer -1).
//
// Overlap: mark_ready(layer) is called from Model's backward hook; it starts the all-reduce
// of every bucket that just became ready (non-blocking) and test()s the ones in flight, so
// the MPI backend makes progress between layers. finish() starts whatever is left and waits.
// With overlap off, nothing starts before finish() (the benchmark's reference).
//
// Determinism: buckets are started in one fixed order (the bucket order, which follows the
// hook order of backward and is the same on every rank), and the MPI backend's all-reduce
// sums element-wise in ascending rank order, so the result does not depend on the bucket
// size, on overlap, or on timing: it is the serial fold g_0 + g_1 + ... of the ranks'
// gradients, bit for bit.
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "parallel/communicator.h"

namespace brt::parallel {

struct GradBucket {
  int64_t begin = 0;  // [begin, end) elements of the gradient arena
  int64_t end = 0;
  int ready_after = 0;  // the layer whose hook makes this bucket ready (-1: the last hook)
};

// Plans buckets for an arena of `total` elements whose layer i occupies layer_ranges[i]
// (ascending, non-overlapping). Elements outside every layer range are ready at layer -1.
// Buckets hold at most `bucket_elems` elements (>= 1); the result is in start order.
std::vector<GradBucket> plan_grad_buckets(int64_t total,
                                          const std::vector<std::pair<int64_t, int64_t>>& layer_ranges,
                                          int64_t bucket_elems);

// Time spent inside communication calls during one step (seconds), for the benchmark.
struct BucketTimes {
  double in_hooks = 0;   // starting and testing buckets from the backward hook
  double in_finish = 0;  // finish(): starting the rest and waiting for every bucket
  int buckets_started_early = 0;  // buckets started before finish()
  double total() const { return in_hooks + in_finish; }
};

template <typename T>
class GradBuckets {
 public:
  // `grads` is the gradient arena (total elements); it must stay valid. The all-reduce is a
  // sum; callers scale the loss gradient by 1 / (global target count) so the sum is the
  // gradient of the global mean (model.md §10b).
  // `stream`: where the gradients are produced (a device backend's stream with overlap set,
  // for NCCL; the host Stream for MPI).
  GradBuckets(Communicator& group, T* grads, std::vector<GradBucket> buckets, bool overlap,
              Stream stream = {});
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // Before backward: no bucket in flight, none started.
  void begin_step();
  // From the backward hook: layer `layer`'s gradients are final.
  void mark_ready(int layer);
  // After backward: every bucket reduced (all ranks hold the summed gradient).
  void finish();

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  const BucketTimes& times() const { return times_; }
  bool overlap() const { return overlap_; }

 private:
  void start(size_t i);
  void progress();

  Communicator& group_;
  T* grads_;
  std::vector<GradBucket> buckets_;
  bool overlap_;
  Stream stream_;
  std::vector<Request> requests_;  // one per bucket
  size_t next_ = 0;                // first bucket not started yet
  BucketTimes times_;
};

}  // namespace brt::parallel
