#include "core/adafactor.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace brt::core {
namespace {

constexpr int64_t kColumnBlock = 256;  // columns summed together by one thread (cache-friendly)

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
Adafactor<T>::Adafactor(const OptimConfig& config, ParamStore<T>& store, const std::vector<bool>& owned)
    : Optimizer<T>(config, store, owned) {
  plan_tensors();
}

template <typename T>
void Adafactor<T>::plan_tensors() {
  ParamStore<T>& store = this->store_;
  const int n_params = store.size();
  plans_.resize(n_params);
  int64_t v_total = 0, f1_total = 0, f2_total = 0, mean_total = 0;
  for (int p = 0; p < n_params; ++p) {
    Plan& plan = plans_[p];
    // A tensor-parallel shard is factored as the whole tensor is (its logical shape decides),
    // over its own local lengths.
    const ParamSpec& spec = store[p].spec;
    const std::vector<int64_t> shape = spec.local_shape();
    plan.numel = store[p].numel();
    plan.rms_count = spec.global_numel();
    const auto axes = adafactor_factor_axes(spec.shape, this->config_.min_dim_to_factor);
    const bool owned = this->owns(p);
    if (!axes) {
      if (owned) v_total += plan.numel;
      continue;
    }
    plan.factored = true;
    const int first = std::min(axes->normalized, axes->largest);
    const int second = std::max(axes->normalized, axes->largest);
    plan.p0 = product(shape, 0, first);
    plan.n1 = shape[first];
    plan.p1 = product(shape, first + 1, second);
    plan.n2 = shape[second];
    plan.p2 = product(shape, second + 1, shape.size());
    plan.n1_total = spec.shape[size_t(first)];
    plan.n2_total = spec.shape[size_t(second)];
    plan.r_dropped = axes->largest;
    plan.c_dropped = axes->normalized;
    plan.rows = plan.p0 * plan.n1;
    plan.cols = plan.p1 * plan.n2 * plan.p2;
    plan.r_is_f1 = axes->normalized == first;
    plan.r_shape = without_axis(shape, axes->largest);
    plan.c_shape = without_axis(shape, axes->normalized);
    plan.f1_size = plan.rows * plan.p1 * plan.p2;
    plan.f2_size = plan.p0 * plan.cols;
    plan.n_means = plan.p0 * plan.p1 * plan.p2;
    if (!owned) continue;  // shapes known (checkpoint names), no state kept here (ZeRO-1)
    factored_.push_back(p);
    plan.f1_off = f1_total;
    plan.f2_off = f2_total;
    plan.mean_off = mean_total;
    f1_total += plan.f1_size;
    f2_total += plan.f2_size;
    mean_total += plan.n_means;
    // F1 sums along the second axis, F2 along the first, the means along R's normalised axis:
    // only a sum along the TP split axis is partial on this rank (MODEL §10c).
    const int split = spec.shard.sharded() ? spec.shard.dim : -1;
    row_blocks_.push_back({p, plan.f1_off, plan.f1_size, split == second});
    col_blocks_.push_back({p, plan.f2_off, plan.f2_size, split == first});
    mean_blocks_.push_back({p, plan.mean_off, plan.n_means, split == axes->normalized});
  }
  // Value-initialised arenas: all pages are touched here, none in step().
  m_.assign(static_cast<size_t>(this->owned_numel_), T(0));
  v_.assign(static_cast<size_t>(v_total), T(0));
  factors_.assign(static_cast<size_t>(f1_total + f2_total), T(0));
  scratch_.assign(static_cast<size_t>(f1_total + f2_total), T(0));
  row_sums_.assign(static_cast<size_t>(f1_total), 0.0);
  col_sums_.assign(static_cast<size_t>(f2_total), 0.0);
  mean_sums_.assign(static_cast<size_t>(mean_total), 0.0);
  psq_partial_.assign(static_cast<size_t>(this->table_.size()), 0.0);
  ysq_partial_.assign(static_cast<size_t>(this->table_.size()), 0.0);
  psq_.assign(static_cast<size_t>(n_params), 0.0);
  ysq_.assign(static_cast<size_t>(n_params), 0.0);
  int64_t v_off = 0, f_off = 0;
  for (int p = 0; p < n_params; ++p) {
    Plan& plan = plans_[p];
    if (!this->owns(p)) continue;
    plan.m = m_.data() + this->state_offset_[size_t(p)];
    if (!plan.factored) {
      plan.v = v_.data() + v_off;
      v_off += plan.numel;
      continue;
    }
    plan.f1 = factors_.data() + f_off;
    plan.fac1 = scratch_.data() + f_off;
    f_off += plan.f1_size;
    plan.f2 = factors_.data() + f_off;
    plan.fac2 = scratch_.data() + f_off;
    f_off += plan.f2_size;
  }
}

template <typename T>
void Adafactor<T>::sum_factored_gradients(const Plan& plan, const T* g, T gs) {
  const T eps = static_cast<T>(this->config_.adafactor_eps);
  const int64_t rows = plan.rows, cols = plan.cols, inner = plan.p1 * plan.p2;
  const int64_t n2p2 = plan.n2 * plan.p2, p2 = plan.p2;
  double* s1 = row_sums_.data() + plan.f1_off;
  double* s2 = col_sums_.data() + plan.f2_off;
  // Sums of G along the second axis: one serial sum per F1 entry.
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    const T* grow = g + row * cols;
    if (inner == 1) {
      s1[row] = lane_sum(0, cols, [=](int64_t col) {
        const T gi = grow[col] * gs;
        return static_cast<double>(gi * gi + eps);
      });
    } else {
      double* out = s1 + row * inner;
      std::fill(out, out + inner, 0.0);
      for (int64_t col = 0; col < cols; ++col) {
        const T gi = grow[col] * gs;
        out[(col / n2p2) * p2 + col % p2] += static_cast<double>(gi * gi + eps);
      }
    }
  }
  // Sums of G along the first axis: a thread owns a block of columns and walks the rows.
  const int64_t blocks_per_group = (cols + kColumnBlock - 1) / kColumnBlock;
  const int64_t n_blocks = plan.p0 * blocks_per_group;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t group = b / blocks_per_group;
    const int64_t col0 = (b % blocks_per_group) * kColumnBlock;
    const int64_t width = std::min(kColumnBlock, cols - col0);
    double acc[kColumnBlock] = {};
    for (int64_t i1 = 0; i1 < plan.n1; ++i1) {
      const T* grow = g + (group * plan.n1 + i1) * cols + col0;
      for (int64_t j = 0; j < width; ++j) {
        const T gi = grow[j] * gs;
        acc[j] += static_cast<double>(gi * gi + eps);
      }
    }
    std::copy(acc, acc + width, s2 + group * cols + col0);
  }
}

template <typename T>
void Adafactor<T>::update_factors(const Plan& plan, double rho) {
  const double* s1 = row_sums_.data() + plan.f1_off;
  const double* s2 = col_sums_.data() + plan.f2_off;
  for (int64_t k = 0; k < plan.f1_size; ++k)
    plan.f1[k] = static_cast<T>((1.0 - rho) * plan.f1[k] + rho * (s1[k] / static_cast<double>(plan.n2_total)));
  for (int64_t k = 0; k < plan.f2_size; ++k)
    plan.f2[k] = static_cast<T>((1.0 - rho) * plan.f2[k] + rho * (s2[k] / static_cast<double>(plan.n1_total)));
  // Partial sums of R along its normalised axis, one per combination of the other axes.
  double* means = mean_sums_.data() + plan.mean_off;
  std::fill(means, means + plan.n_means, 0.0);
  for (int64_t q0 = 0; q0 < plan.p0; ++q0)
    for (int64_t q1 = 0; q1 < plan.p1; ++q1)
      for (int64_t q2 = 0; q2 < plan.p2; ++q2) {
        const int64_t o = (q0 * plan.p1 + q1) * plan.p2 + q2;
        double s = 0.0;
        if (plan.r_is_f1) {
          for (int64_t i1 = 0; i1 < plan.n1; ++i1) s += plan.f1[((q0 * plan.n1 + i1) * plan.p1 + q1) * plan.p2 + q2];
        } else {
          for (int64_t i2 = 0; i2 < plan.n2; ++i2) s += plan.f2[((q0 * plan.p1 + q1) * plan.n2 + i2) * plan.p2 + q2];
        }
        means[o] = s;
      }
}

template <typename T>
void Adafactor<T>::compute_factors(const Plan& plan) {
  const double* means = mean_sums_.data() + plan.mean_off;
  // C's factor: C^-1/2 over its whole array; R's: (R / mean)^-1/2 (the reference's row_factor).
  const T* c = plan.r_is_f1 ? plan.f2 : plan.f1;
  T* c_fac = plan.r_is_f1 ? plan.fac2 : plan.fac1;
  const int64_t c_size = plan.r_is_f1 ? plan.f2_size : plan.f1_size;
  for (int64_t k = 0; k < c_size; ++k) c_fac[k] = static_cast<T>(1.0 / std::sqrt(static_cast<double>(c[k])));
  const double n_norm = static_cast<double>(plan.r_is_f1 ? plan.n1_total : plan.n2_total);
  for (int64_t q0 = 0; q0 < plan.p0; ++q0)
    for (int64_t q1 = 0; q1 < plan.p1; ++q1)
      for (int64_t q2 = 0; q2 < plan.p2; ++q2) {
        const double mean = means[(q0 * plan.p1 + q1) * plan.p2 + q2] / n_norm;
        if (plan.r_is_f1) {
          for (int64_t i1 = 0; i1 < plan.n1; ++i1) {
            const int64_t k = ((q0 * plan.n1 + i1) * plan.p1 + q1) * plan.p2 + q2;
            plan.fac1[k] = static_cast<T>(1.0 / std::sqrt(plan.f1[k] / mean));
          }
        } else {
          for (int64_t i2 = 0; i2 < plan.n2; ++i2) {
            const int64_t k = ((q0 * plan.p1 + q1) * plan.n2 + i2) * plan.p2 + q2;
            plan.fac2[k] = static_cast<T>(1.0 / std::sqrt(plan.f2[k] / mean));
          }
        }
      }
}

template <typename T>
template <typename F>
void Adafactor<T>::for_each_factored_y(const Plan& plan, int64_t begin, int64_t end, const T* g, T gs,
                                       F&& f) const {
  const int64_t cols = plan.cols, inner = plan.p1 * plan.p2, n2p2 = plan.n2 * plan.p2, p2 = plan.p2;
  int64_t i = begin;
  while (i < end) {
    const int64_t row = i / cols;
    int64_t col = i - row * cols;
    const int64_t seg_end = std::min(end, (row + 1) * cols);
    const T* f2row = plan.fac2 + (row / plan.n1) * cols;
    if (inner == 1) {
      const T rf = plan.fac1[row];
      for (; i < seg_end; ++i, ++col) f(i, g[i] * gs * rf * f2row[col]);
    } else {
      const T* f1row = plan.fac1 + row * inner;
      for (; i < seg_end; ++i, ++col) f(i, g[i] * gs * f1row[(col / n2p2) * p2 + col % p2] * f2row[col]);
    }
  }
}

template <typename T>
double Adafactor<T>::factored_update_squares(const Plan& plan, int64_t begin, int64_t end, const T* g, T gs) const {
  const int64_t cols = plan.cols, inner = plan.p1 * plan.p2, n2p2 = plan.n2 * plan.p2, p2 = plan.p2;
  double total = 0.0;
  for (int64_t i = begin; i < end;) {  // one row segment at a time, each summed in lanes
    const int64_t row = i / cols;
    const int64_t seg_end = std::min(end, (row + 1) * cols);
    const T* grow = g + row * cols;
    const T* f2row = plan.fac2 + (row / plan.n1) * cols;
    const T* f1row = plan.fac1 + row * inner;
    const int64_t col0 = i - row * cols, col1 = seg_end - row * cols;
    if (inner == 1) {
      const T rf = f1row[0];
      total += lane_sum(col0, col1, [=](int64_t col) {
        const T y = grow[col] * gs * rf * f2row[col];
        return static_cast<double>(y) * y;
      });
    } else {
      total += lane_sum(col0, col1, [=](int64_t col) {
        const T y = grow[col] * gs * f1row[(col / n2p2) * p2 + col % p2] * f2row[col];
        return static_cast<double>(y) * y;
      });
    }
    i = seg_end;
  }
  return total;
}

template <typename T>
void Adafactor<T>::update(double lr, double grad_scale) {
  const OptimConfig& c = this->config_;
  ParamStore<T>& store = this->store_;
  const ChunkTable& table = this->table_;
  const auto& chunks = table.chunks();
  const int64_t n_chunks = table.size();
  const double rho = std::pow(static_cast<double>(this->t_ + 1), -c.decay_exponent);
  const T rho_t = static_cast<T>(rho), keep_t = static_cast<T>(1.0 - rho);
  const T gs = static_cast<T>(grad_scale), eps = static_cast<T>(c.adafactor_eps);

  // Phase A: parameter squares (before the update), the full second moments and their update
  // squares, and the row/column sums of G for factored tensors.
#pragma omp parallel for schedule(static)
  for (int64_t ci = 0; ci < n_chunks; ++ci) {
    const ParamChunk& ch = chunks[ci];
    const Plan& plan = plans_[ch.param];
    const T* w = store[ch.param].value;
    const T* g = store[ch.param].grad;
    psq_partial_[ci] = lane_sum(ch.begin, ch.end, [w](int64_t i) { return static_cast<double>(w[i]) * w[i]; });
    if (!plan.factored) {
      T* v = plan.v;
      ysq_partial_[ci] = lane_sum(ch.begin, ch.end, [=](int64_t i) {
        const T gi = g[i] * gs;
        v[i] = keep_t * v[i] + rho_t * (gi * gi + eps);
        const T y = gi / std::sqrt(v[i]);
        return static_cast<double>(y) * y;
      });
    }
  }
  for (int p : factored_) sum_factored_gradients(plans_[p], store[p].grad, gs);
  table.sum_per_param(psq_partial_, psq_);
  if (this->reducer_) {
    this->reducer_->reduce(StatKind::kParamSquares, psq_, table.per_param_blocks());
    this->reducer_->reduce(StatKind::kFactorRows, row_sums_, row_blocks_);
    this->reducer_->reduce(StatKind::kFactorCols, col_sums_, col_blocks_);
  }

  // Phase B: factored accumulators, their normalising means, the rsqrt factors, then the
  // update squares of factored tensors.
  const int64_t n_factored = static_cast<int64_t>(factored_.size());
#pragma omp parallel for schedule(dynamic)
  for (int64_t k = 0; k < n_factored; ++k) update_factors(plans_[factored_[k]], rho);
  if (this->reducer_) this->reducer_->reduce(StatKind::kFactorMean, mean_sums_, mean_blocks_);
#pragma omp parallel for schedule(dynamic)
  for (int64_t k = 0; k < n_factored; ++k) compute_factors(plans_[factored_[k]]);
#pragma omp parallel for schedule(static)
  for (int64_t ci = 0; ci < n_chunks; ++ci) {
    const ParamChunk& ch = chunks[ci];
    const Plan& plan = plans_[ch.param];
    if (!plan.factored) continue;
    ysq_partial_[ci] = factored_update_squares(plan, ch.begin, ch.end, store[ch.param].grad, gs);
  }
  table.sum_per_param(ysq_partial_, ysq_);
  if (this->reducer_) this->reducer_->reduce(StatKind::kUpdateSquares, ysq_, table.per_param_blocks());

  // Phase C: u = lr * max(RMS(param), 1e-3) * y / max(1, RMS(y)/clip); momentum; apply.
  const T beta1 = static_cast<T>(c.beta1), one_minus_beta1 = static_cast<T>(1.0 - c.beta1);
#pragma omp parallel for schedule(static)
  for (int64_t ci = 0; ci < n_chunks; ++ci) {
    const ParamChunk& ch = chunks[ci];
    const Plan& plan = plans_[ch.param];
    const double n = static_cast<double>(plan.rms_count);  // RMS over the whole tensor
    const double param_scale = std::max(std::sqrt(psq_[ch.param] / n), c.min_param_scale);
    const double clip_denom = std::max(1.0, std::sqrt(ysq_[ch.param] / n) / c.update_clip);
    const T coef = static_cast<T>(lr * param_scale / clip_denom);
    T* w = store[ch.param].value;
    const T* g = store[ch.param].grad;
    T* m = plan.m;
    auto apply = [&](int64_t i, T y) {
      m[i] = beta1 * m[i] + one_minus_beta1 * (coef * y);
      w[i] -= m[i];
    };
    if (plan.factored) {
      for_each_factored_y(plan, ch.begin, ch.end, g, gs, apply);
    } else {
      for (int64_t i = ch.begin; i < ch.end; ++i) apply(i, (g[i] * gs) / std::sqrt(plan.v[i]));
    }
  }
}

template <typename T>
void Adafactor<T>::collect_state(std::vector<NamedState<T>>& out) {
  ParamStore<T>& store = this->store_;
  for (int p = 0; p < store.size(); ++p) {
    const Plan& plan = plans_[p];
    const ParamSpec& spec = store[p].spec;
    out.push_back({spec.name + ".adafactor.m", spec.local_shape(), plan.m, p});
    if (plan.factored) {
      out.push_back({spec.name + ".adafactor.r", plan.r_shape, plan.r_is_f1 ? plan.f1 : plan.f2, p, plan.r_dropped});
      out.push_back({spec.name + ".adafactor.c", plan.c_shape, plan.r_is_f1 ? plan.f2 : plan.f1, p, plan.c_dropped});
    } else {
      out.push_back({spec.name + ".adafactor.v", spec.local_shape(), plan.v, p});
    }
  }
}

template class Adafactor<float>;
template class Adafactor<double>;

}  // namespace brt::core
