// AdamW (model.md §10c): beta1 0.9, beta2 0.98, eps 1e-8, bias-corrected, decoupled weight decay
// on matrices only:
//   m <- b1*m + (1-b1)*g;  v <- b2*v + (1-b2)*g^2
//   p <- p - lr*( (m/(1-b1^(t+1))) / (sqrt(v/(1-b2^(t+1))) + eps) + wd*p )   (wd = 0 off matrices)
// (the decay is scaled by the scheduled lr, as optax.adamw and torch.optim.AdamW do).
// State: "<param>.adamw.m" and "<param>.adamw.v", each of the parameter's shape, in the store's
// memory; one fused kernel (OptimizerKernels::adamw_update) applies the whole update.
#pragma once

#include <vector>

#include "core/optim/optimizer.h"

namespace brt::core {

template <typename T>
class AdamW final : public Optimizer<T> {
 public:
  AdamW(const OptimConfig& config, ParamStore<T>& store, const std::vector<bool>& owned = {},
        kernels::OptimizerKernels<T>* kernels = nullptr);

  int64_t state_elems_allocated() const override { return int64_t(m_.size() + v_.size()); }

 protected:
  void update() override;
  void fill_step_scalars(kernels::OptimStepScalars<T>& s) const override;
  void collect_state(std::vector<NamedState<T>>& out) override;

 private:
  kernels::Buffer<T> m_;  // owned parameters, compact (state_offset_)
  kernels::Buffer<T> v_;
  kernels::Buffer<kernels::OptimTensor<T>> tensors_;  // per parameter: value, grad, m, v, decay
};

}  // namespace brt::core
