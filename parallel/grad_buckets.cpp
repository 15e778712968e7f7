#include "parallel/grad_buckets.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace brt::parallel {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Segment {
  int64_t begin, end;
  int ready_after;
};

// Whether a bucket that becomes ready at `ready_after` is ready once `layer`'s hook ran
// (hooks run L-1, ..., 0, then -1).
bool is_ready(int ready_after, int layer) {
  return layer == -1 || (ready_after != -1 && ready_after >= layer);
}

}  // namespace

std::vector<GradBucket> plan_grad_buckets(int64_t total,
                                          const std::vector<std::pair<int64_t, int64_t>>& layer_ranges,
                                          int64_t bucket_elems) {
  if (bucket_elems < 1) throw std::invalid_argument("plan_grad_buckets: bucket size must be >= 1 element");
  // Segments in the order their gradients become final: layers from last to first, then the
  // ranges outside every layer (embedding, final norm), also from the end of the arena.
  std::vector<Segment> segments;
  int64_t prev_end = 0;
  std::vector<Segment> outside;
  for (size_t i = 0; i < layer_ranges.size(); ++i) {
    const auto [b, e] = layer_ranges[i];
    if (b < prev_end || e < b || e > total)
      throw std::invalid_argument("plan_grad_buckets: layer " + std::to_string(i) + " range [" +
                                  std::to_string(b) + ", " + std::to_string(e) +
                                  ") overlaps another or leaves the arena of " + std::to_string(total));
    if (b > prev_end) outside.push_back({prev_end, b, -1});
    prev_end = e;
  }
  if (total > prev_end) outside.push_back({prev_end, total, -1});
  for (size_t i = layer_ranges.size(); i-- > 0;)
    segments.push_back({layer_ranges[i].first, layer_ranges[i].second, int(i)});
  for (size_t i = outside.size(); i-- > 0;) segments.push_back(outside[i]);

  // Greedy fill from the end of each segment backwards: a bucket grows downwards while it is
  // contiguous and below the size cap.
  std::vector<GradBucket> buckets;
  bool open = false;
  GradBucket cur;
  for (const Segment& s : segments) {
    int64_t pos = s.end;
    while (pos > s.begin) {
      if (open && cur.begin == pos && cur.end - cur.begin < bucket_elems) {
        const int64_t take = std::min(pos - s.begin, bucket_elems - (cur.end - cur.begin));
        cur.begin -= take;
        cur.ready_after = s.ready_after;
        pos -= take;
      } else {
        if (open) buckets.push_back(cur);
        cur = {pos, pos, s.ready_after};
        open = true;
      }
    }
  }
  if (open && cur.end > cur.begin) buckets.push_back(cur);
  return buckets;
}

template <typename T>
GradBuckets<T>::GradBuckets(Communicator& group, T* grads, std::vector<GradBucket> buckets, bool overlap,
                            Stream stream)
    : group_(group), grads_(grads), buckets_(std::move(buckets)), overlap_(overlap), stream_(stream) {
  requests_.resize(buckets_.size());
}

template <typename T>
void GradBuckets<T>::begin_step() {
  for (auto& r : requests_) r.wait();  // none should be pending; never free under a transfer
  next_ = 0;
  times_ = {};
}

template <typename T>
void GradBuckets<T>::start(size_t i) {
  const GradBucket& b = buckets_[i];
  requests_[i] = group_.all_reduce_async(std::span<T>(grads_ + b.begin, size_t(b.end - b.begin)),
                                      ReduceOp::kSum, stream_);
}

template <typename T>
void GradBuckets<T>::progress() {
  for (size_t i = 0; i < next_; ++i)
    if (!requests_[i].done()) requests_[i].test();
}

template <typename T>
void GradBuckets<T>::mark_ready(int layer) {
  if (!overlap_) return;
  const auto t0 = Clock::now();
  while (next_ < buckets_.size() && is_ready(buckets_[next_].ready_after, layer)) {
    start(next_++);
    ++times_.buckets_started_early;
  }
  progress();
  times_.in_hooks += seconds_since(t0);
}

template <typename T>
void GradBuckets<T>::finish() {
  const auto t0 = Clock::now();
  while (next_ < buckets_.size()) start(next_++);
  for (auto& r : requests_) r.wait();
  times_.in_finish += seconds_since(t0);
}

template class GradBuckets<float>;
template class GradBuckets<double>;

}  // namespace brt::parallel
