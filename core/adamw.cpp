#include "core/adamw.h"

#include <cmath>

namespace brt::core {

template <typename T>
AdamW<T>::AdamW(const OptimConfig& config, ParamStore<T>& store, const std::vector<bool>& owned)
    : Optimizer<T>(config, store, owned),
      // value-initialised: every page is touched now, not in the first step
      m_(static_cast<size_t>(this->owned_numel_), T(0)),
      v_(static_cast<size_t>(this->owned_numel_), T(0)) {}

template <typename T>
void AdamW<T>::update(double lr, double grad_scale) {
  const OptimConfig& c = this->config_;
  const double step = static_cast<double>(this->t_ + 1);
  const T b1 = static_cast<T>(c.beta1), b2 = static_cast<T>(c.beta2);
  const T one_minus_b1 = static_cast<T>(1.0 - c.beta1), one_minus_b2 = static_cast<T>(1.0 - c.beta2);
  const T inv_bc1 = static_cast<T>(1.0 / (1.0 - std::pow(c.beta1, step)));
  const T inv_bc2 = static_cast<T>(1.0 / (1.0 - std::pow(c.beta2, step)));
  const T eps = static_cast<T>(c.eps), lr_t = static_cast<T>(lr), gs = static_cast<T>(grad_scale);
  ParamStore<T>& store = this->store_;
  const auto& chunks = this->table_.chunks();
  const int64_t n_chunks = this->table_.size();
#pragma omp parallel for schedule(static)
  for (int64_t ci = 0; ci < n_chunks; ++ci) {
    const ParamChunk& ch = chunks[ci];
    Param<T>& p = store[ch.param];
    const T wd = p.spec.is_matrix() ? static_cast<T>(c.weight_decay) : T(0);
    T* w = p.value;
    const T* g = p.grad;
    T* m = m_.data() + this->state_offset_[size_t(ch.param)];
    T* v = v_.data() + this->state_offset_[size_t(ch.param)];
    for (int64_t i = ch.begin; i < ch.end; ++i) {
      const T gi = g[i] * gs;
      m[i] = b1 * m[i] + one_minus_b1 * gi;
      v[i] = b2 * v[i] + one_minus_b2 * gi * gi;
      const T step_dir = (m[i] * inv_bc1) / (std::sqrt(v[i] * inv_bc2) + eps) + wd * w[i];
      w[i] -= lr_t * step_dir;
    }
  }
}

template <typename T>
void AdamW<T>::collect_state(std::vector<NamedState<T>>& out) {
  ParamStore<T>& store = this->store_;
  for (int p = 0; p < store.size(); ++p) {
    const ParamSpec& spec = store[p].spec;
    const int64_t off = this->state_offset_[size_t(p)];
    out.push_back({spec.name + ".adamw.m", spec.local_shape(), off < 0 ? nullptr : m_.data() + off, p});
    out.push_back({spec.name + ".adamw.v", spec.local_shape(), off < 0 ? nullptr : v_.data() + off, p});
  }
}

template class AdamW<float>;
template class AdamW<double>;

}  // namespace brt::core
