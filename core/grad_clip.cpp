#include "core/grad_clip.h"

#include <cmath>

namespace brt::core {

double clip_scale(double norm, double clip_norm) {
  if (clip_norm <= 0 || !std::isfinite(norm) || norm <= clip_norm) return 1.0;
  return clip_norm / norm;
}

template <typename T>
GradNorm<T>::GradNorm(const ParamStore<T>& store, StatReducer* reducer)
    : table_(store), partial_(static_cast<size_t>(table_.size())),
      per_param_(static_cast<size_t>(store.size())), reducer_(reducer) {}

template <typename T>
double GradNorm<T>::compute(const ParamStore<T>& store) {
  const auto& chunks = table_.chunks();
  const int64_t n_chunks = table_.size();
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < n_chunks; ++c) {
    const ParamChunk& ch = chunks[c];
    const T* g = store[ch.param].grad;
    partial_[c] = lane_sum(ch.begin, ch.end, [g](int64_t i) { return static_cast<double>(g[i]) * g[i]; });
  }
  table_.sum_per_param(partial_, per_param_);
  if (reducer_) reducer_->reduce(StatKind::kGradSquares, per_param_, table_.per_param_blocks());
  double total = 0.0;
  for (double s : per_param_) total += s;
  return std::sqrt(total);
}

template <typename T>
double clip_gradients(ParamStore<T>& store, GradNorm<T>& norm, double clip_norm) {
  const double n = norm.compute(store);
  const double scale = clip_scale(n, clip_norm);
  if (scale != 1.0) {
    T* g = store.grads();
    const int64_t total = store.total_numel();
    const T s = static_cast<T>(scale);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < total; ++i) g[i] *= s;
  }
  return n;
}

template class GradNorm<float>;
template class GradNorm<double>;
template double clip_gradients(ParamStore<float>&, GradNorm<float>&, double);
template double clip_gradients(ParamStore<double>&, GradNorm<double>&, double);

}  // namespace brt::core
