#include "core/optim/optimizer.h"

#include <stdexcept>

#include "core/optim/adafactor.h"
#include "core/optim/adamw.h"
#include "core/optim/lr_schedule.h"

namespace brt::core {
namespace {

OptimConfig resolved(OptimConfig c) {
  c.resolve();
  return c;
}

}  // namespace

template <typename T>
Optimizer<T>::Optimizer(const OptimConfig& config, ParamStore<T>& store, const std::vector<bool>& owned,
                        kernels::OptimizerKernels<T>* kernels)
    : store_(store), config_(resolved(config)),
      kernels_(resolve_optimizer_kernels(kernels, store, owned_kernels_, "Optimizer")),
      table_(store, ChunkTable::kDefaultChunk, owned), owned_(owned), grad_norm_(store, nullptr, &kernels_) {
  if (!store.finalized()) throw std::logic_error("Optimizer: the ParamStore is not finalized");
  chunks_ = upload_chunks(table_, store.memory());
  scalars_.allocate(store.memory(), 1, "optimizer step scalars");
  state_offset_.assign(size_t(store.size()), -1);
  for (int p = 0; p < store.size(); ++p) {
    if (!owns(p)) continue;
    state_offset_[size_t(p)] = owned_numel_;
    owned_numel_ += store[p].numel();
  }
}

template <typename T>
StepStats Optimizer<T>::step() {
  return apply(grad_norm());
}

template <typename T>
double Optimizer<T>::grad_norm() {
  if (!device_steps()) return grad_norm_.compute(store_);
  // One process: the norm made where the gradients live, one scalar back (compute()'s value).
  grad_norm_.enqueue(store_, config_.clip_norm, scalars_.data());
  kernels::OptimStepScalars<T> v;
  memory().to_host(&v, scalars_.data(), sizeof v);
  return v.grad_norm;
}

template <typename T>
void Optimizer<T>::write_step_scalars(double grad_norm, double clip) {
  kernels::OptimStepScalars<T> s;
  s.lr = learning_rate(config_, t_);
  fill_step_scalars(s);
  s.grad_norm = grad_norm;
  s.grad_scale = static_cast<T>(clip);
  s.skip = 0;
  staged_ = s;
  memory().from_host(scalars_.data(), &s, sizeof s);
}

template <typename T>
StepStats Optimizer<T>::apply(double grad_norm) {
  StepStats s;
  s.step = t_;
  s.grad_norm = grad_norm;
  s.clip_scale = clip_scale(s.grad_norm, config_.clip_norm);
  write_step_scalars(s.grad_norm, s.clip_scale);
  s.lr = staged_.lr;
  update();
  ++t_;
  return s;
}

template <typename T>
void Optimizer<T>::stage_step() {
  write_step_scalars(0.0, 1.0);  // the gradient side is enqueue_step's
}

template <typename T>
void Optimizer<T>::enqueue_step(const double* loss_sum) {
  if (!device_steps())
    throw std::logic_error("Optimizer::enqueue_step: a reducer sums the statistics on the host; use step()");
  grad_norm_.enqueue(store_, config_.clip_norm, scalars_.data(), loss_sum);
  update();
}

template <typename T>
StepStats Optimizer<T>::finish_step() {
  kernels::OptimStepScalars<T> v;
  memory().to_host(&v, scalars_.data(), sizeof v);
  StepStats s;
  s.step = t_;
  s.lr = staged_.lr;
  s.grad_norm = v.grad_norm;
  s.clip_scale = clip_scale(v.grad_norm, config_.clip_norm);
  s.applied = v.skip == 0;
  if (s.applied) ++t_;
  return s;
}

template <typename T>
void Optimizer<T>::set_step_count(int64_t t) {
  if (t < 0) throw std::invalid_argument("Optimizer::set_step_count: negative step " + std::to_string(t));
  t_ = t;
}

template <typename T>
std::vector<NamedState<T>> Optimizer<T>::state() {
  std::vector<NamedState<T>> out;
  collect_state(out);
  return out;
}

template <typename T>
void Optimizer<T>::set_reducer(StatReducer* reducer) {
  reducer_ = reducer;
  grad_norm_.set_reducer(reducer);
}

template <typename T>
std::unique_ptr<Optimizer<T>> make_optimizer(const OptimConfig& config, ParamStore<T>& store,
                                             const std::vector<bool>& owned,
                                             kernels::OptimizerKernels<T>* kernels) {
  if (config.kind == OptimKind::kAdamW) return std::make_unique<AdamW<T>>(config, store, owned, kernels);
  return std::make_unique<Adafactor<T>>(config, store, owned, kernels);
}

template class Optimizer<float>;
template class Optimizer<double>;
template std::unique_ptr<Optimizer<float>> make_optimizer(const OptimConfig&, ParamStore<float>&,
                                                          const std::vector<bool>&,
                                                          kernels::OptimizerKernels<float>*);
template std::unique_ptr<Optimizer<double>> make_optimizer(const OptimConfig&, ParamStore<double>&,
                                                           const std::vector<bool>&,
                                                           kernels::OptimizerKernels<double>*);

}  // namespace brt::core
