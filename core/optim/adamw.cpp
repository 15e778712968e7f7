#include "core/optim/adamw.h"

#include <cmath>

namespace brt::core {

template <typename T>
AdamW<T>::AdamW(const OptimConfig& config, ParamStore<T>& store, const std::vector<bool>& owned,
                kernels::OptimizerKernels<T>* kernels)
    : Optimizer<T>(config, store, owned, kernels) {
  // Zeroed at allocation: every page is touched now, not in the first step.
  m_.allocate(this->memory(), static_cast<size_t>(this->owned_numel_), "AdamW m");
  v_.allocate(this->memory(), static_cast<size_t>(this->owned_numel_), "AdamW v");
  std::vector<kernels::OptimTensor<T>> tensors(static_cast<size_t>(store.size()));
  for (int p = 0; p < store.size(); ++p) {
    kernels::OptimTensor<T>& t = tensors[size_t(p)];
    t.value = store[p].value;
    t.grad = store[p].grad;
    t.decay = store[p].spec.is_matrix() ? 1 : 0;
    const int64_t off = this->state_offset_[size_t(p)];
    if (off < 0) continue;  // not owned: no chunks refer to it
    t.m = m_.data() + off;
    t.v = v_.data() + off;
  }
  tensors_.allocate(this->memory(), tensors.size(), "AdamW tensor table");
  tensors_.from_host(tensors);
}

template <typename T>
void AdamW<T>::fill_step_scalars(kernels::OptimStepScalars<T>& s) const {
  const OptimConfig& c = this->config_;
  const double step = static_cast<double>(this->t_ + 1);
  s.lr_t = static_cast<T>(s.lr);
  s.inv_bias_correction1 = static_cast<T>(1.0 / (1.0 - std::pow(c.beta1, step)));
  s.inv_bias_correction2 = static_cast<T>(1.0 / (1.0 - std::pow(c.beta2, step)));
}

template <typename T>
void AdamW<T>::update() {
  const OptimConfig& c = this->config_;
  kernels::AdamWStep<T> s;
  s.beta1 = static_cast<T>(c.beta1);
  s.beta2 = static_cast<T>(c.beta2);
  s.one_minus_beta1 = static_cast<T>(1.0 - c.beta1);
  s.one_minus_beta2 = static_cast<T>(1.0 - c.beta2);
  s.eps = static_cast<T>(c.eps);
  s.weight_decay = static_cast<T>(c.weight_decay);
  this->kernels_.adamw_update(s, this->step_scalars(), this->chunks_.data(), this->table_.size(), tensors_.data());
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
