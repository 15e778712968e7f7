// Hyena-style implicit filter (model.md §7.1 `unstructured`); see implicit_filter.h.
#include "kernels/implicit_filter.h"

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

#include "kernels/cpu_parallel.h"

namespace brt::kernels::ssm {

double implicit_filter_delta(int r, int filters) {
  const double lo = std::log(1e-2) / 1.5, hi = std::log(1e-2) / 0.3;
  return filters <= 1 ? lo : lo + (hi - lo) * r / (filters - 1);
}

// ---- the CPU backend's filter ops ---------------------------------------------------------

template <typename T>
void sine_forward(const T* a, const T* freq, int n, int O, T* s) {
#pragma omp parallel for schedule(static) if (int64_t{n} * O >= cpu::kParallelMinWork)
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < O; ++o) {
      const int64_t e = int64_t{i} * O + o;
      s[e] = std::sin(freq[o] * a[e]);
    }
}

template <typename T>
void sine_backward(const T* a, const T* freq, const T* ds, int n, int O, T* da, T* dfreq) {
  // s = sin(ω a): da = ds·ω·cos(ω a), dω = Σ ds·a·cos(ω a). Rows in order: deterministic.
#pragma omp parallel for schedule(static) if (int64_t{n} * O >= cpu::kParallelMinWork)
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < O; ++o) {
      const int64_t e = int64_t{i} * O + o;
      da[e] += ds[e] * std::cos(freq[o] * a[e]) * freq[o];
    }
  cpu::column_reduce_accumulate(n, O, dfreq, [=](int i, int o) {
    const int64_t e = int64_t{i} * O + o;
    return ds[e] * std::cos(freq[o] * a[e]) * a[e];
  });
}

template <typename T>
void implicit_filter_decay(T* x, const double* rate, int filters, int length) {
#pragma omp parallel for schedule(static) if (int64_t{filters} * length >= cpu::kParallelMinWork)
  for (int r = 0; r < filters; ++r)
    for (int l = 0; l < length; ++l) {
      const double t = static_cast<double>(l) / length;
      x[int64_t{r} * length + l] *= static_cast<T>(std::exp(-t * rate[r]));
    }
}

// ---- the network, as backend calls ---------------------------------------------------------

template <typename T>
ImplicitFilter<T>::ImplicitFilter(Backend<T>& backend, int length, int filters, int order)
    : backend_(backend), length_(length), filters_(filters), order_(order) {
  if (length < 1 || filters < 1 || order < 1)
    throw std::runtime_error("kernels/ssm/implicit_filter: need length, filters, order >= 1 (got " +
                             std::to_string(length) + ", " + std::to_string(filters) + ", " +
                             std::to_string(order) + ")");
  Memory& memory = backend.memory();
  const std::size_t lo = static_cast<std::size_t>(length) * order;
  std::vector<T> z(static_cast<std::size_t>(length) * kEmbed);
  for (int l = 0; l < length; ++l) {
    const double t = static_cast<double>(l) / length;
    z[l * kEmbed + 0] = static_cast<T>(t);
    z[l * kEmbed + 1] = static_cast<T>(std::cos(2 * std::numbers::pi * t));
    z[l * kEmbed + 2] = static_cast<T>(std::sin(2 * std::numbers::pi * t));
  }
  z_.allocate(memory, z.size(), "implicit filter z(t)");
  z_.from_host(z);  // constant: uploaded once
  for (int i = 0; i < kLayers; ++i) {
    pre_[i].allocate(memory, lo, "implicit filter pre-activation");
    act_[i].allocate(memory, lo, "implicit filter activation");
  }
  dact_.allocate(memory, lo, "implicit filter activation gradient");
  dpre_.allocate(memory, lo, "implicit filter pre-activation gradient");
  rate_.allocate(memory, static_cast<std::size_t>(filters), "implicit filter decay rates");
  std::vector<int> ids(static_cast<std::size_t>(filters));
  for (int r = 0; r < filters; ++r) ids[static_cast<std::size_t>(r)] = r;
  set_filter_ids(ids, filters);
}

template <typename T>
void ImplicitFilter<T>::set_filter_ids(const std::vector<int>& global_ids, int global_filters) {
  if (static_cast<int>(global_ids.size()) != filters_)
    throw std::runtime_error("kernels/ssm/implicit_filter: " + std::to_string(global_ids.size()) +
                             " filter ids for " + std::to_string(filters_) + " filters");
  std::vector<double> rate(global_ids.size());
  for (std::size_t r = 0; r < global_ids.size(); ++r)
    rate[r] = std::abs(implicit_filter_delta(global_ids[r], global_filters));
  rate_.from_host(rate);  // set up once, not per step
}

template <typename T>
int64_t ImplicitFilter<T>::activation_bytes() const {
  int64_t n = z_.bytes() + rate_.bytes();
  for (int i = 0; i < kLayers; ++i) n += pre_[i].bytes() + act_[i].bytes();
  return n;
}

template <typename T>
int64_t ImplicitFilter<T>::parameter_count() const {
  const int64_t O = order_;
  return kEmbed * O + O + 2 * (O * O + O) + O + O * filters_;
}

template <typename T>
void ImplicitFilter<T>::forward(const ImplicitFilterParams<T>& p, T* kernel) {
  const int L = length_, O = order_, R = filters_;
  const T* weights[kLayers] = {p.w0, p.w1, p.w2};
  const T* biases[kLayers] = {p.b0, p.b1, p.b2};
  for (int i = 0; i < kLayers; ++i) {
    const T* input = i == 0 ? z_.data() : act_[i - 1].data();
    const int in = i == 0 ? kEmbed : O;
    backend_.gemm(Trans::N, Trans::N, L, O, in, T(1), input, in, weights[i], O, T(0),
                  pre_[i].data(), O);                                         // a_i = x·w_i
    backend_.add_rows_broadcast(pre_[i].data(), biases[i], L, 1, O);          //     + b_i
    backend_.sine_forward(pre_[i].data(), p.freq, L, O, act_[i].data());      // s_i = sin(ω a_i)
  }
  // K [R, L] = w_outᵀ·s2ᵀ, then the fixed exponential modulation per filter.
  backend_.gemm(Trans::T, Trans::T, R, L, O, T(1), p.w_out, R, act_[kLayers - 1].data(), O,
                T(0), kernel, L);
  backend_.implicit_filter_decay(kernel, rate_.data(), R, L);
}

template <typename T>
void ImplicitFilter<T>::backward(const ImplicitFilterParams<T>& p, T* dkernel,
                                 const ImplicitFilterGrads<T>& g) {
  const int L = length_, O = order_, R = filters_;
  // dH = dK ⊙ decay (in place); dw_out += s2ᵀ·dHᵀ, ds2 = dHᵀ·w_outᵀ.
  backend_.implicit_filter_decay(dkernel, rate_.data(), R, L);
  const T* s2 = act_[kLayers - 1].data();
  backend_.gemm(Trans::T, Trans::T, O, R, L, T(1), s2, O, dkernel, L, T(1), g.w_out, R);
  backend_.gemm(Trans::T, Trans::T, L, O, R, T(1), dkernel, L, p.w_out, R, T(0), dact_.data(), O);
  const T* weights[kLayers] = {p.w0, p.w1, p.w2};
  T* dweights[kLayers] = {g.w0, g.w1, g.w2};
  T* dbiases[kLayers] = {g.b0, g.b1, g.b2};
  for (int i = kLayers - 1; i >= 0; --i) {
    backend_.fill(dpre_.data(), int64_t{L} * O, T(0));
    backend_.sine_backward(pre_[i].data(), p.freq, dact_.data(), L, O, dpre_.data(), g.freq);
    backend_.column_sum_accumulate(dpre_.data(), L, O, dbiases[i]);
    const T* input = i == 0 ? z_.data() : act_[i - 1].data();
    const int in = i == 0 ? kEmbed : O;
    backend_.gemm(Trans::T, Trans::N, in, O, L, T(1), input, in, dpre_.data(), O, T(1),
                  dweights[i], O);
    if (i > 0)  // ds_{i−1} = da_i·w_iᵀ, into dact_ (its old contents are consumed above)
      backend_.gemm(Trans::N, Trans::T, L, O, O, T(1), dpre_.data(), O, weights[i], O, T(0),
                    dact_.data(), O);
  }
}

#define BRT_INSTANTIATE_FILTER_OPS(T)                                                        \
  template void sine_forward<T>(const T*, const T*, int, int, T*);                           \
  template void sine_backward<T>(const T*, const T*, const T*, int, int, T*, T*);            \
  template void implicit_filter_decay<T>(T*, const double*, int, int);                       \
  template class ImplicitFilter<T>;
BRT_INSTANTIATE_FILTER_OPS(float)
BRT_INSTANTIATE_FILTER_OPS(double)
#undef BRT_INSTANTIATE_FILTER_OPS

}  // namespace brt::kernels::ssm
