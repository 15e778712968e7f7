#include "core/optim/grad_clip.h"

#include <cmath>
#include <stdexcept>

namespace brt::core {

double clip_scale(double norm, double clip_norm) { return kernels::optim_clip_scale(norm, clip_norm); }

template <typename T>
GradNorm<T>::GradNorm(const ParamStore<T>& store, StatReducer* reducer, kernels::OptimizerKernels<T>* kernels)
    : store_(&store), kernels_(&resolve_optimizer_kernels(kernels, store, owned_kernels_, "GradNorm")),
      table_(store), partial_(static_cast<size_t>(table_.size())), per_param_(static_cast<size_t>(store.size())),
      reducer_(reducer) {
  kernels::Memory& memory = store.memory();
  chunks_ = upload_chunks(table_, memory);
  std::vector<kernels::OptimTensor<T>> tensors(static_cast<size_t>(store.size()));
  for (int p = 0; p < store.size(); ++p) tensors[size_t(p)].grad = const_cast<T*>(store[p].grad);
  tensors_.allocate(memory, tensors.size(), "gradient norm tensor table");
  tensors_.from_host(tensors);
  partial_dev_.allocate(memory, partial_.size(), "gradient norm partial sums");
  first_chunk_dev_.allocate(memory, table_.first_chunks().size(), "gradient norm first chunk per parameter");
  first_chunk_dev_.from_host(table_.first_chunks());
  totals_ = DeviceParamTotals(table_, memory);
}

template <typename T>
double GradNorm<T>::compute(const ParamStore<T>& store) {
  if (&store != store_) throw std::invalid_argument("GradNorm::compute: not the ParamStore it was planned for");
  kernels_->sum_squares(kernels::OptimField::kGrad, chunks_.data(), table_.size(), tensors_.data(), partial_dev_.data());
  stats_to_host(store.memory(), partial_dev_, partial_);
  table_.sum_per_param(partial_, per_param_);
  if (reducer_) reducer_->reduce(StatKind::kGradSquares, per_param_, table_.per_param_blocks());
  double total = 0.0;
  for (double s : per_param_) total += s;
  return std::sqrt(total);
}

template <typename T>
void GradNorm<T>::enqueue(const ParamStore<T>& store, double clip_norm, kernels::OptimStepScalars<T>* step,
                          const double* loss_sum) {
  if (&store != store_) throw std::invalid_argument("GradNorm::enqueue: not the ParamStore it was planned for");
  if (reducer_ && !reducer_->reduces_on_device())
    throw std::logic_error("GradNorm::enqueue: a reducer sums the norm on the host; use compute()");
  kernels_->sum_squares(kernels::OptimField::kGrad, chunks_.data(), table_.size(), tensors_.data(), partial_dev_.data());
  const auto n_params = static_cast<int32_t>(store.size());
  if (!reducer_) {
    kernels_->grad_norm_finish(n_params, first_chunk_dev_.data(), partial_dev_.data(), clip_norm, loss_sum, step);
    return;
  }
  totals_.reduce(StatKind::kGradSquares, partial_dev_.data(), *reducer_, *kernels_);
  kernels_->grad_norm_finish(n_params, totals_.chunks(), totals_.totals(), clip_norm, loss_sum, step);
}

template <typename T>
double clip_gradients(ParamStore<T>& store, GradNorm<T>& norm, double clip_norm) {
  const double n = norm.compute(store);
  const double scale = clip_scale(n, clip_norm);
  if (scale != 1.0) norm.kernels().scale(store.grads(), store.total_numel(), static_cast<T>(scale));
  return n;
}

template class GradNorm<float>;
template class GradNorm<double>;
template double clip_gradients(ParamStore<float>&, GradNorm<float>&, double);
template double clip_gradients(ParamStore<double>&, GradNorm<double>&, double);

}  // namespace brt::core
