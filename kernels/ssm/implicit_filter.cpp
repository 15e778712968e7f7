// Hyena-style implicit filter (MODEL §7.1 `unstructured`); see implicit_filter.h.
#include "kernels/ssm/implicit_filter.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/parallel.h"

namespace brt::kernels::ssm {

using cpu::blas_gemm;

double implicit_filter_delta(int r, int filters) {
  const double lo = std::log(1e-2) / 1.5, hi = std::log(1e-2) / 0.3;
  return filters <= 1 ? lo : lo + (hi - lo) * r / (filters - 1);
}

template <typename T>
ImplicitFilter<T>::ImplicitFilter(int length, int filters, int order)
    : length_(length), filters_(filters), order_(order) {
  if (length < 1 || filters < 1 || order < 1)
    throw std::runtime_error("kernels/ssm/implicit_filter: need length, filters, order >= 1 (got " +
                             std::to_string(length) + ", " + std::to_string(filters) + ", " +
                             std::to_string(order) + ")");
  const std::size_t lo = static_cast<std::size_t>(length) * order;
  z_.resize(static_cast<std::size_t>(length) * kEmbed);
  for (int l = 0; l < length; ++l) {
    const double t = static_cast<double>(l) / length;
    z_[l * kEmbed + 0] = static_cast<T>(t);
    z_[l * kEmbed + 1] = static_cast<T>(std::cos(2 * std::numbers::pi * t));
    z_[l * kEmbed + 2] = static_cast<T>(std::sin(2 * std::numbers::pi * t));
  }
  for (int i = 0; i < kLayers; ++i) {
    pre_[i].resize(lo);
    act_[i].resize(lo);
  }
  dact_.resize(lo);
  dpre_.resize(lo);
  dh_chunk_.resize(static_cast<std::size_t>(filters) * kChunk);
  column_sums_.resize(order);
  freq_sums_.resize(order);
  std::vector<int> ids(static_cast<std::size_t>(filters));
  for (int r = 0; r < filters; ++r) ids[static_cast<std::size_t>(r)] = r;
  set_filter_ids(ids, filters);
}

template <typename T>
void ImplicitFilter<T>::set_filter_ids(const std::vector<int>& global_ids, int global_filters) {
  if (static_cast<int>(global_ids.size()) != filters_)
    throw std::runtime_error("kernels/ssm/implicit_filter: " + std::to_string(global_ids.size()) +
                             " filter ids for " + std::to_string(filters_) + " filters");
  delta_.resize(global_ids.size());
  for (std::size_t r = 0; r < global_ids.size(); ++r)
    delta_[r] = std::abs(implicit_filter_delta(global_ids[r], global_filters));
}

template <typename T>
int64_t ImplicitFilter<T>::parameter_count() const {
  const int64_t O = order_;
  return kEmbed * O + O + 2 * (O * O + O) + O + O * filters_;
}

template <typename T>
T ImplicitFilter<T>::decay(int r, int l) const {
  const double t = static_cast<double>(l) / length_;
  return static_cast<T>(std::exp(-t * delta_[static_cast<std::size_t>(r)]));
}

template <typename T>
void ImplicitFilter<T>::forward(const ImplicitFilterParams<T>& p, T* kernel) {
  const int L = length_, O = order_, R = filters_;
  const T* weights[kLayers] = {p.w0, p.w1, p.w2};
  const T* biases[kLayers] = {p.b0, p.b1, p.b2};
  for (int i = 0; i < kLayers; ++i) {
    const T* input = i == 0 ? z_.data() : act_[i - 1].data();
    const int in = i == 0 ? kEmbed : O;
    T* a = pre_[i].data();
    T* s = act_[i].data();
    blas_gemm(Trans::N, Trans::N, L, O, in, T(1), input, in, weights[i], O, T(0), a, O);
#pragma omp parallel for schedule(static) if (int64_t{L} * O >= cpu::kParallelMinWork)
    for (int l = 0; l < L; ++l)
      for (int o = 0; o < O; ++o) {
        T& al = a[int64_t{l} * O + o];
        al += biases[i][o];
        s[int64_t{l} * O + o] = std::sin(p.freq[o] * al);
      }
  }
  // K [R, L] = w_outᵀ·s2ᵀ, then the fixed exponential modulation per filter.
  blas_gemm(Trans::T, Trans::T, R, L, O, T(1), p.w_out, R, act_[kLayers - 1].data(), O, T(0),
            kernel, L);
#pragma omp parallel for schedule(static) if (int64_t{R} * L >= cpu::kParallelMinWork)
  for (int r = 0; r < R; ++r)
    for (int l = 0; l < L; ++l) kernel[int64_t{r} * L + l] *= decay(r, l);
}

template <typename T>
void ImplicitFilter<T>::backward(const ImplicitFilterParams<T>& p, const T* dkernel,
                                 const ImplicitFilterGrads<T>& g) {
  const int L = length_, O = order_, R = filters_;
  // dH = dK ⊙ decay, chunk by chunk over taps: dw_out += s2ᵀ·dHᵀ, ds2 = dHᵀ·w_outᵀ.
  const T* s2 = act_[kLayers - 1].data();
  for (int l0 = 0; l0 < L; l0 += kChunk) {
    const int n = std::min(kChunk, L - l0);
#pragma omp parallel for schedule(static) if (int64_t{R} * n >= cpu::kParallelMinWork)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < n; ++j)
        dh_chunk_[int64_t{r} * kChunk + j] = dkernel[int64_t{r} * L + l0 + j] * decay(r, l0 + j);
    blas_gemm(Trans::T, Trans::T, O, R, n, T(1), s2 + int64_t{l0} * O, O, dh_chunk_.data(), kChunk,
              T(1), g.w_out, R);
    blas_gemm(Trans::T, Trans::T, n, O, R, T(1), dh_chunk_.data(), kChunk, p.w_out, R, T(0),
              dact_.data() + int64_t{l0} * O, O);
  }
  const T* weights[kLayers] = {p.w0, p.w1, p.w2};
  T* dweights[kLayers] = {g.w0, g.w1, g.w2};
  T* dbiases[kLayers] = {g.b0, g.b1, g.b2};
  std::fill(freq_sums_.begin(), freq_sums_.end(), 0.0);
  for (int i = kLayers - 1; i >= 0; --i) {
    const T* a = pre_[i].data();
    // s = sin(ω a): da = ds·ω·cos(ω a), dω += ds·a·cos(ω a). Rows in order: deterministic.
    std::fill(column_sums_.begin(), column_sums_.end(), 0.0);
    for (int l = 0; l < L; ++l)
      for (int o = 0; o < O; ++o) {
        const int64_t e = int64_t{l} * O + o;
        const T slope = dact_[e] * std::cos(p.freq[o] * a[e]);
        dpre_[e] = slope * p.freq[o];
        freq_sums_[o] += static_cast<double>(slope) * a[e];
        column_sums_[o] += static_cast<double>(dpre_[e]);
      }
    for (int o = 0; o < O; ++o) dbiases[i][o] += static_cast<T>(column_sums_[o]);
    const T* input = i == 0 ? z_.data() : act_[i - 1].data();
    const int in = i == 0 ? kEmbed : O;
    blas_gemm(Trans::T, Trans::N, in, O, L, T(1), input, in, dpre_.data(), O, T(1), dweights[i], O);
    if (i > 0)  // ds_{i−1} = da_i·w_iᵀ, into dact_ (its old contents are consumed above)
      blas_gemm(Trans::N, Trans::T, L, O, O, T(1), dpre_.data(), O, weights[i], O, T(0),
                dact_.data(), O);
  }
  for (int o = 0; o < O; ++o) g.freq[o] += static_cast<T>(freq_sums_[o]);
}

template class ImplicitFilter<float>;
template class ImplicitFilter<double>;

}  // namespace brt::kernels::ssm
