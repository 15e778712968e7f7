#include "core/optim/adafactor.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace brt::core {
namespace {

int64_t product(const std::vector<int64_t>& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

std::vector<int64_t> without_axis(std::vector<int64_t> shape, int axis) {
  shape.erase(shape.begin() + axis);
  return shape;
}

}  // namespace

std::optional<FactorAxes> adafactor_factor_axes(const std::vector<int64_t>& shape, int64_t min_dim) {
  if (shape.size() < 2) return std::nullopt;
  std::vector<int> order(shape.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return shape[a] < shape[b]; });
  const int second = order[order.size() - 2];
  const int largest = order.back();
  if (shape[second] < min_dim) return std::nullopt;
  return FactorAxes{second, largest};
}

template <typename T>
kernels::OptimTensor<T> adafactor_layout(const ParamSpec& spec, int64_t min_dim) {
  kernels::OptimTensor<T> t;
  const auto axes = adafactor_factor_axes(spec.shape, min_dim);
  if (!axes) return t;
  const std::vector<int64_t> shape = spec.local_shape();
  const int first = std::min(axes->normalized, axes->largest);
  const int second = std::max(axes->normalized, axes->largest);
  t.factored = 1;
  t.p0 = product(shape, 0, first);
  t.n1 = shape[first];
  t.p1 = product(shape, first + 1, second);
  t.n2 = shape[second];
  t.p2 = product(shape, second + 1, shape.size());
  t.n1_total = spec.shape[size_t(first)];
  t.n2_total = spec.shape[size_t(second)];
  t.r_is_f1 = axes->normalized == first ? 1 : 0;
  return t;
}

std::vector<kernels::OptimTensor<float>> optimizer_layouts(const ParamStore<float>& params, bool adafactor,
                                                           int64_t min_dim) {
  std::vector<kernels::OptimTensor<float>> tensors;
  for (int p = 0; p < params.size(); ++p) {
    kernels::OptimTensor<float> t;
    if (adafactor) t = adafactor_layout<float>(params[p].spec, min_dim);
    if (!t.factored) t.p0 = params[p].numel();
    tensors.push_back(t);
  }
  return tensors;
}

template <typename T>
Adafactor<T>::Adafactor(const OptimConfig& config, ParamStore<T>& store, const std::vector<bool>& owned,
                        kernels::OptimizerKernels<T>* kernels)
    : Optimizer<T>(config, store, owned, kernels) {
  plan_tensors();
}

template <typename T>
void Adafactor<T>::plan_tensors() {
  const int n_params = this->store_.size();
  plans_.resize(n_params);
  int64_t v_total = 0, f1_total = 0, f2_total = 0, mean_total = 0;
  for (int p = 0; p < n_params; ++p) plan_tensor(p, v_total, f1_total, f2_total, mean_total);
  allocate_state(v_total, f1_total, f2_total, mean_total);
  bind_tensors();
}

template <typename T>
void Adafactor<T>::plan_tensor(int p, int64_t& v_total, int64_t& f1_total, int64_t& f2_total,
                               int64_t& mean_total) {
  ParamStore<T>& store = this->store_;
  Plan& plan = plans_[p];
  kernels::OptimTensor<T>& t = plan.tensor;
  // A tensor-parallel shard is factored as the whole tensor is (its logical shape decides),
  // over its own local lengths.
  const ParamSpec& spec = store[p].spec;
  const std::vector<int64_t> shape = spec.local_shape();
  t = adafactor_layout<T>(spec, this->config_.min_dim_to_factor);
  t.value = store[p].value;
  t.grad = store[p].grad;
  plan.rms_count = spec.global_numel();
  const auto axes = adafactor_factor_axes(spec.shape, this->config_.min_dim_to_factor);
  const bool owned = this->owns(p);
  if (!axes) {
    if (owned) v_total += store[p].numel();
    return;
  }
  plan.factored = true;
  const int first = std::min(axes->normalized, axes->largest);
  const int second = std::max(axes->normalized, axes->largest);
  plan.r_dropped = axes->largest;
  plan.c_dropped = axes->normalized;
  plan.r_shape = without_axis(shape, axes->largest);
  plan.c_shape = without_axis(shape, axes->normalized);
  if (!owned) return;  // shapes known (checkpoint names), no state kept here (ZeRO-1)
  factored_.push_back(p);
  plan.f1_off = f1_total;
  plan.f2_off = f2_total;
  plan.mean_off = mean_total;
  f1_total += t.f1_size();
  f2_total += t.f2_size();
  mean_total += t.n_means();
  // F1 sums along the second axis, F2 along the first, the means along R's normalised axis:
  // only a sum along the TP split axis is partial on this rank (model.md §10c).
  const int split = spec.shard.sharded() ? spec.shard.dim : -1;
  row_blocks_.push_back({p, plan.f1_off, t.f1_size(), split == second});
  col_blocks_.push_back({p, plan.f2_off, t.f2_size(), split == first});
  mean_blocks_.push_back({p, plan.mean_off, t.n_means(), split == axes->normalized});
}

template <typename T>
void Adafactor<T>::allocate_state(int64_t v_total, int64_t f1_total, int64_t f2_total,
                                  int64_t mean_total) {
  const int n_params = this->store_.size();
  // Zeroed at allocation: all pages are touched here, none in step().
  kernels::Memory& memory = this->memory();
  m_.allocate(memory, static_cast<size_t>(this->owned_numel_), "Adafactor m");
  v_.allocate(memory, static_cast<size_t>(v_total), "Adafactor v");
  factors_.allocate(memory, static_cast<size_t>(f1_total + f2_total), "Adafactor factors");
  scratch_.allocate(memory, static_cast<size_t>(f1_total + f2_total), "Adafactor factor scratch");
  row_sums_dev_.allocate(memory, static_cast<size_t>(f1_total), "Adafactor row sums");
  col_sums_dev_.allocate(memory, static_cast<size_t>(f2_total), "Adafactor column sums");
  mean_sums_dev_.allocate(memory, static_cast<size_t>(mean_total), "Adafactor mean sums");
  int64_t sums_scratch = 0;
  for (int p : factored_) sums_scratch = std::max(sums_scratch, this->kernels_.adafactor_sums_scratch(plans_[p].tensor));
  sums_scratch_.allocate(memory, static_cast<size_t>(sums_scratch), "Adafactor row/column partial sums");
  psq_partial_dev_.allocate(memory, static_cast<size_t>(this->table_.size()), "Adafactor param squares");
  ysq_partial_dev_.allocate(memory, static_cast<size_t>(this->table_.size()), "Adafactor update squares");
  coef_dev_.allocate(memory, static_cast<size_t>(n_params), "Adafactor update coefficients");
  psq_totals_ = DeviceParamTotals(this->table_, memory);
  ysq_totals_ = DeviceParamTotals(this->table_, memory);
  const std::vector<int64_t>& first = this->table_.first_chunks();
  std::vector<int64_t> counts;
  for (const Plan& plan : plans_) counts.push_back(plan.rms_count);
  first_chunk_dev_.allocate(memory, first.size(), "Adafactor first chunk per parameter");
  first_chunk_dev_.from_host(first);
  rms_count_dev_.allocate(memory, counts.size(), "Adafactor RMS count per parameter");
  rms_count_dev_.from_host(counts);
  row_sums_.assign(static_cast<size_t>(f1_total), 0.0);
  col_sums_.assign(static_cast<size_t>(f2_total), 0.0);
  mean_sums_.assign(static_cast<size_t>(mean_total), 0.0);
  psq_partial_.assign(static_cast<size_t>(this->table_.size()), 0.0);
  ysq_partial_.assign(static_cast<size_t>(this->table_.size()), 0.0);
  psq_.assign(static_cast<size_t>(n_params), 0.0);
  ysq_.assign(static_cast<size_t>(n_params), 0.0);
  coef_.assign(static_cast<size_t>(n_params), T(0));
}

template <typename T>
void Adafactor<T>::bind_tensors() {
  ParamStore<T>& store = this->store_;
  const int n_params = store.size();
  int64_t v_off = 0, f_off = 0;
  std::vector<kernels::OptimTensor<T>> tensors(static_cast<size_t>(n_params));
  for (int p = 0; p < n_params; ++p) {
    kernels::OptimTensor<T>& t = plans_[p].tensor;
    if (this->owns(p)) {
      t.m = m_.data() + this->state_offset_[size_t(p)];
      if (!t.factored) {
        t.v = v_.data() + v_off;
        v_off += store[p].numel();
      } else {
        t.f1 = factors_.data() + f_off;
        t.fac1 = scratch_.data() + f_off;
        f_off += t.f1_size();
        t.f2 = factors_.data() + f_off;
        t.fac2 = scratch_.data() + f_off;
        f_off += t.f2_size();
      }
    }
    tensors[size_t(p)] = t;
  }
  tensors_.allocate(this->memory(), tensors.size(), "Adafactor tensor table");
  tensors_.from_host(tensors);
}

template <typename T>
void Adafactor<T>::reduce_stats(StatKind kind, kernels::Buffer<double>& dev, std::vector<double>& host,
                                const std::vector<StatBlock>& blocks) {
  if (!this->reducer_) return;
  if (this->reducer_->reduces_on_device()) {
    this->reducer_->reduce_on_device(kind, dev.data(), static_cast<int64_t>(dev.size()), blocks, this->kernels_);
    return;
  }
  stats_to_host(this->memory(), dev, host);
  this->reducer_->reduce(kind, host, blocks);
  stats_from_host(this->memory(), host, dev);
}

template <typename T>
void Adafactor<T>::fill_step_scalars(kernels::OptimStepScalars<T>& s) const {
  s.rho = std::pow(static_cast<double>(this->t_ + 1), -this->config_.decay_exponent);
  s.rho_t = static_cast<T>(s.rho);
  s.keep_t = static_cast<T>(1.0 - s.rho);
}

template <typename T>
void Adafactor<T>::update() {
  const OptimConfig& c = this->config_;
  const ChunkTable& table = this->table_;
  kernels::OptimizerKernels<T>& k = this->kernels_;
  kernels::Memory& memory = this->memory();
  const kernels::OptimChunk* chunks = this->chunks_.data();
  const int64_t n_chunks = table.size();
  const kernels::OptimStepScalars<T>* step = this->step_scalars();
  const T eps = static_cast<T>(c.adafactor_eps);

  // Phase A: parameter squares (before the update), the full second moments and their update
  // squares, and the row/column sums of G for factored tensors.
  k.adafactor_second_moment(chunks, n_chunks, tensors_.data(), step, eps, psq_partial_dev_.data(),
                            ysq_partial_dev_.data());
  for (int p : factored_) {
    const Plan& plan = plans_[p];
    k.adafactor_gradient_sums(plan.tensor, step, eps, row_sums_dev_.data() + plan.f1_off,
                              col_sums_dev_.data() + plan.f2_off, sums_scratch_.data());
  }
  StatReducer* reducer = this->reducer_;
  const bool on_device = reducer == nullptr || reducer->reduces_on_device();
  if (reducer && on_device) {  // summed across ranks where they live
    psq_totals_.reduce(StatKind::kParamSquares, psq_partial_dev_.data(), *reducer, k);
  } else if (reducer) {  // the sums leave this rank: through the host
    stats_to_host(memory, psq_partial_dev_, psq_partial_);
    table.sum_per_param(psq_partial_, psq_);
    this->reducer_->reduce(StatKind::kParamSquares, psq_, table.per_param_blocks());
  }
  reduce_stats(StatKind::kFactorRows, row_sums_dev_, row_sums_, row_blocks_);
  reduce_stats(StatKind::kFactorCols, col_sums_dev_, col_sums_, col_blocks_);

  // Phase B: factored accumulators, their normalising means, the rsqrt factors, then the
  // update squares of factored tensors.
  for (int p : factored_) {
    const Plan& plan = plans_[p];
    k.adafactor_update_factors(plan.tensor, step, row_sums_dev_.data() + plan.f1_off,
                               col_sums_dev_.data() + plan.f2_off, mean_sums_dev_.data() + plan.mean_off);
  }
  reduce_stats(StatKind::kFactorMean, mean_sums_dev_, mean_sums_, mean_blocks_);
  for (int p : factored_) k.adafactor_compute_factors(plans_[p].tensor, mean_sums_dev_.data() + plans_[p].mean_off);
  k.adafactor_factored_update_squares(chunks, n_chunks, tensors_.data(), step, ysq_partial_dev_.data());

  // Phase C: u = lr * max(RMS(param), 1e-3) * y / max(1, RMS(y)/clip) (RMS over the whole
  // tensor); momentum; apply. The coefficients are made on the device from the chunk partials
  // (one rank) or a device reducer's totals; a host reducer's totals are made on the host
  // (whose step is apply(): the lr it staged) and sent back.
  const kernels::AdafactorScalars scalars{c.min_param_scale, c.update_clip};
  const auto n_tensors = static_cast<int32_t>(plans_.size());
  if (reducer && on_device) {
    ysq_totals_.reduce(StatKind::kUpdateSquares, ysq_partial_dev_.data(), *reducer, k);
    k.adafactor_coefficients(n_tensors, psq_totals_.chunks(), rms_count_dev_.data(), psq_totals_.totals(),
                             ysq_totals_.totals(), scalars, step, coef_dev_.data());
  } else if (reducer) {
    stats_to_host(memory, ysq_partial_dev_, ysq_partial_);
    table.sum_per_param(ysq_partial_, ysq_);
    this->reducer_->reduce(StatKind::kUpdateSquares, ysq_, table.per_param_blocks());
    const double lr = this->staged_scalars().lr;
    for (size_t p = 0; p < plans_.size(); ++p)
      coef_[p] = static_cast<T>(kernels::adafactor_coefficient(scalars, lr, psq_[p], ysq_[p],
                                                               static_cast<double>(plans_[p].rms_count)));
    memory.from_host(coef_dev_.data(), coef_.data(), coef_.size() * sizeof(T));
  } else {
    k.adafactor_coefficients(n_tensors, first_chunk_dev_.data(), rms_count_dev_.data(),
                             psq_partial_dev_.data(), ysq_partial_dev_.data(), scalars, step, coef_dev_.data());
  }
  k.adafactor_apply(chunks, n_chunks, tensors_.data(), coef_dev_.data(), step, static_cast<T>(c.beta1),
                    static_cast<T>(1.0 - c.beta1));
}

template <typename T>
void Adafactor<T>::collect_state(std::vector<NamedState<T>>& out) {
  ParamStore<T>& store = this->store_;
  for (int p = 0; p < store.size(); ++p) {
    const Plan& plan = plans_[p];
    const kernels::OptimTensor<T>& t = plan.tensor;
    const ParamSpec& spec = store[p].spec;
    out.push_back({spec.name + ".adafactor.m", spec.local_shape(), t.m, p});
    if (plan.factored) {
      out.push_back({spec.name + ".adafactor.r", plan.r_shape, t.r_is_f1 ? t.f1 : t.f2, p, plan.r_dropped});
      out.push_back({spec.name + ".adafactor.c", plan.c_shape, t.r_is_f1 ? t.f2 : t.f1, p, plan.c_dropped});
    } else {
      out.push_back({spec.name + ".adafactor.v", spec.local_shape(), t.v, p});
    }
  }
}

template class Adafactor<float>;
template class Adafactor<double>;
template kernels::OptimTensor<float> adafactor_layout<float>(const ParamSpec&, int64_t);
template kernels::OptimTensor<double> adafactor_layout<double>(const ParamSpec&, int64_t);

}  // namespace brt::core
