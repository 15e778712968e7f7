#include "core/param_store.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/philox.h"

namespace brt::core {

double CounterRng::normal(uint64_t counter_hi, uint64_t counter_lo) const {
  const auto w = draw(counter_hi, counter_lo);
  const double u1 = uniform_open01(w[0], w[1]);
  const double u2 = uniform_open01(w[2], w[3]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

int64_t ParamSpec::shard_offset(int piece) const {
  if (!shard.sharded()) return 0;
  const int64_t block = shape[size_t(shard.dim)] / shard.pieces;
  return piece * block + shard.rank * (block / shard.size);
}

int64_t ParamSpec::global_index(int64_t local_index) const {
  if (!shard.sharded()) return local_index;
  // inner: elements after `dim` (one step along dim); local coordinate along dim → global.
  int64_t inner = 1;
  for (size_t d = size_t(shard.dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t global_len = shape[size_t(shard.dim)];
  const int64_t local_len = global_len / shard.size;
  const int64_t per_piece = local_len / shard.pieces;
  const int64_t outer = local_index / (local_len * inner);
  const int64_t along = (local_index / inner) % local_len;
  const int64_t rest = local_index % inner;
  const int64_t global_along = shard_offset(int(along / per_piece)) + along % per_piece;
  return (outer * global_len + global_along) * inner + rest;
}

double initial_value(const ParamSpec& spec, uint64_t seed, int64_t index) {
  const InitSpec& init = spec.init;
  switch (init.kind) {
    case InitKind::kOnes:
      return 1.0;
    case InitKind::kZeros:
      return 0.0;
    case InitKind::kNormal: {
      const CounterRng rng(seed, fnv1a64(spec.name.data(), spec.name.size()));
      return init.value + init.stddev * rng.normal(0, static_cast<uint64_t>(index));
    }
    case InitKind::kTruncNormal: {
      // model.md §4: sigma = sqrt(gain/fan_in)/0.8796, resampled until inside +-2 sigma. Each
      // attempt has its own counter, so the value depends only on (seed, name, index).
      const CounterRng rng(seed, fnv1a64(spec.name.data(), spec.name.size()));
      const double sigma = std::sqrt(init.gain / static_cast<double>(init.fan_in)) / 0.8796;
      for (uint64_t attempt = 1;; ++attempt) {
        const double z = rng.normal(attempt, static_cast<uint64_t>(index));
        if (std::fabs(z) <= 2.0) return sigma * z;
      }
    }
    case InitKind::kConstant:
      return init.value;
    case InitKind::kUniform: {
      const CounterRng rng(seed, fnv1a64(spec.name.data(), spec.name.size()));
      return init.low + (init.high - init.low) * rng.uniform(0, static_cast<uint64_t>(index));
    }
    case InitKind::kArange:
      return init.value * static_cast<double>(index % std::max<int64_t>(init.period, 1));
  }
  throw std::logic_error("initial_value: unknown init kind for " + spec.name);
}

template <typename T>
int ParamStore<T>::declare(ParamSpec spec) {
  if (finalized_) throw std::logic_error("ParamStore::declare after finalize: " + spec.name);
  if (index_.count(spec.name)) throw std::logic_error("duplicate parameter name " + spec.name);
  if (spec.init.kind == InitKind::kTruncNormal && spec.init.fan_in <= 0)
    throw std::logic_error("truncated-normal init needs fan_in: " + spec.name);
  if (spec.shard.sharded()) {
    const auto& sh = spec.shard;
    if (sh.dim >= int(spec.shape.size()) || sh.rank < 0 || sh.rank >= sh.size || sh.pieces < 1 ||
        spec.shape[size_t(sh.dim)] % (int64_t(sh.size) * sh.pieces) != 0)
      throw std::invalid_argument("parameter " + spec.name + ": dimension " + std::to_string(sh.dim) +
                                  " cannot be split into " + std::to_string(sh.pieces) + " x " +
                                  std::to_string(sh.size) + " tensor-parallel parts");
  }
  Param<T> p;
  p.spec = std::move(spec);
  p.offset = total_;
  total_ += p.numel();
  index_[p.spec.name] = static_cast<int>(params_.size());
  params_.push_back(std::move(p));
  return static_cast<int>(params_.size()) - 1;
}

template <typename T>
void ParamStore<T>::finalize(kernels::Memory& memory) {
  memory_ = &memory;
  values_.allocate(memory, static_cast<size_t>(total_), "parameter values");
  grads_.allocate(memory, static_cast<size_t>(total_), "parameter gradients");
  for (auto& p : params_) {
    p.value = values_.data() + p.offset;
    p.grad = grads_.data() + p.offset;
  }
  finalized_ = true;
}

template <typename T>
void ParamStore<T>::initialize(uint64_t seed) {
  if (!finalized_) throw std::logic_error("ParamStore::initialize before finalize");
  // Computed on the host (the counter-based values are cheap), then copied into the arena.
  std::vector<T> host(static_cast<size_t>(total_));
  for (auto& p : params_) {
    const int64_t n = p.numel();
    T* dst = host.data() + p.offset;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<T>(initial_value(p.spec, seed, p.spec.global_index(i)));
  }
  values_.from_host(host);
}

template <typename T>
void ParamStore<T>::zero_grads() {
  if (!grads_.empty()) memory_->fill_zero(grads_.data(), size_t(grads_.bytes()));
}

template <typename T>
std::vector<T> ParamStore<T>::value_to_host(int i) const {
  const Param<T>& p = params_[size_t(i)];
  return kernels::copy_to_host(*memory_, static_cast<const T*>(p.value), size_t(p.numel()));
}

template <typename T>
std::vector<T> ParamStore<T>::grad_to_host(int i) const {
  const Param<T>& p = params_[size_t(i)];
  return kernels::copy_to_host(*memory_, static_cast<const T*>(p.grad), size_t(p.numel()));
}

template <typename T>
void ParamStore<T>::value_from_host(int i, std::span<const T> values) {
  const Param<T>& p = params_[size_t(i)];
  if (int64_t(values.size()) != p.numel())
    throw std::runtime_error("parameter " + p.spec.name + ": " + std::to_string(values.size()) +
                             " values for " + std::to_string(p.numel()) + " elements");
  memory_->from_host(p.value, values.data(), values.size() * sizeof(T));
}

template <typename T>
int ParamStore<T>::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? -1 : it->second;
}

template <typename T>
int declare_norm(ParamStore<T>& store, const std::string& name, int d_model) {
  return store.declare({name, {d_model}, {InitKind::kOnes}, {}});
}

template <typename T>
int declare_matrix(ParamStore<T>& store, const std::string& name, int in, int out, double gain,
                   ShardSpec shard) {
  InitSpec init{InitKind::kTruncNormal};
  init.gain = gain;
  init.fan_in = in;  // the full fan-in: a shard is the slice of the TP = 1 initialisation
  return store.declare({name, {in, out}, init, shard});
}

template <typename T>
int declare_normal(ParamStore<T>& store, const std::string& name, std::vector<int64_t> shape,
                   double stddev, ShardSpec shard, double mean) {
  InitSpec init{InitKind::kNormal};
  init.stddev = stddev;
  init.value = mean;
  return store.declare({name, std::move(shape), init, shard});
}

template <typename T>
int declare_ones(ParamStore<T>& store, const std::string& name, std::vector<int64_t> shape,
                 ShardSpec shard) {
  return store.declare({name, std::move(shape), {InitKind::kOnes}, shard});
}

template class ParamStore<float>;
template class ParamStore<double>;

#define BRT_INSTANTIATE_DECLARE(T)                                                             \
  template int declare_norm<T>(ParamStore<T>&, const std::string&, int);                       \
  template int declare_matrix<T>(ParamStore<T>&, const std::string&, int, int, double,        \
                                 ShardSpec);                                                   \
  template int declare_normal<T>(ParamStore<T>&, const std::string&, std::vector<int64_t>,     \
                                 double, ShardSpec, double);                                   \
  template int declare_ones<T>(ParamStore<T>&, const std::string&, std::vector<int64_t>,       \
                               ShardSpec);

BRT_INSTANTIATE_DECLARE(float)
BRT_INSTANTIATE_DECLARE(double)

}  // namespace brt::core
