// The `unstructured` kernel of model.md §7.1: a Hyena-style implicit filter. For taps
// l ∈ [0, L), t_l = l/L and z(t) = [t, cos 2πt, sin 2πt]:
//
//   a0 = z·w0 + b0,  s0 = sin(ω ⊙ a0)          w0 [3, O],  b0 [O]
//   a1 = s0·w1 + b1, s1 = sin(ω ⊙ a1)          w1 [O, O],  b1 [O]
//   a2 = s1·w2 + b2, s2 = sin(ω ⊙ a2)          w2 [O, O],  b2 [O]
//   h  = s2·w_out                              w_out [O, R] (no bias), R = C·Ds filters
//   K[r, l] = h[l, r] · exp(−t_l·|δ_r|),  δ_r = linspace(ln(1e−2)/1.5, ln(1e−2)/0.3, R)[r]
//
// O = order (64). Matrices act on row vectors and are stored [in, out] (model.md §0, §9).
// ω ∈ R^O (`freq`, init 1) is ONE learned vector shared by the three sine activations, as in
// the Hyena reference (safari `standalone_hyena.py` builds one Sin module and reuses it).
// Filters are ordered r = c·Ds + f, so K [R, L] is FftConv's k layout [C, Ds, L]. δ is fixed
// (not a parameter). Suggested checkpoint names under layers.{i}.ssm.filter.: w0, b0, w1, b1,
// w2, b2, freq, w_out.
//
// Forward overwrites K and keeps the activations for the next backward, which must use the
// same parameters; backward accumulates (backend.h). Every step is a Backend call (gemm,
// add_rows_broadcast, column_sum_accumulate and the three filter ops sine_forward,
// sine_backward, implicit_filter_decay) on buffers the constructor allocates in the backend's
// memory, so on a GPU the network runs on the device with its parameters: no host copy per
// step. Deterministic: the backend's gemm plus fixed-order reductions.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kernels/memory.h"

namespace brt::kernels::ssm {

template <typename T>
struct ImplicitFilterParams {
  const T* w0;  // [3, O]
  const T* b0;  // [O]
  const T* w1;  // [O, O]
  const T* b1;
  const T* w2;  // [O, O]
  const T* b2;
  const T* freq;   // ω [O]
  const T* w_out;  // [O, R]
};

template <typename T>
struct ImplicitFilterGrads {  // same shapes; all required, accumulated into
  T* w0;
  T* b0;
  T* w1;
  T* b1;
  T* w2;
  T* b2;
  T* freq;
  T* w_out;
};

// δ_r of model.md §7.1 (before the absolute value): linear from ln(1e−2)/1.5 (r = 0) to
// ln(1e−2)/0.3 (r = R−1).
double implicit_filter_delta(int r, int filters);

// The CPU implementations of the backend's filter ops (kernels/backend.h: sine_forward,
// sine_backward, implicit_filter_decay), host pointers.
template <typename T>
void sine_forward(const T* a, const T* freq, int n, int O, T* s);
template <typename T>
void sine_backward(const T* a, const T* freq, const T* ds, int n, int O, T* da, T* dfreq);
template <typename T>
void implicit_filter_decay(T* x, const double* rate, int filters, int length);

template <typename T>
class ImplicitFilter {
 public:
  static constexpr int kEmbed = 3;  // z(t) = [t, cos 2πt, sin 2πt]

  // Buffers (z, the decay rates, activations, scratch) in backend.memory(); parameters,
  // gradients and K passed to forward/backward must live there too.
  ImplicitFilter(Backend<T>& backend, int length, int filters, int order = 64);

  int length() const { return length_; }
  int filters() const { return filters_; }
  int order() const { return order_; }
  // Number of learned scalars: 3·O + O + 2·(O·O + O) + O + O·R.
  int64_t parameter_count() const;
  // Backend memory the constructor allocated (what the planner counts, launch/plan/planner_memory.cpp):
  // z, the activations a_i, s_i and the decay rates; the backward scratch dact, dpre.
  int64_t activation_bytes() const;
  int64_t scratch_bytes() const { return dact_.bytes() + dpre_.bytes(); }

  // Under tensor parallelism a rank makes only its filters: local filter r is filter
  // global_ids[r] of `global_filters`, which fixes its decay rate (default: r of R).
  void set_filter_ids(const std::vector<int>& global_ids, int global_filters);

  // K [R, L].
  void forward(const ImplicitFilterParams<T>& p, T* kernel);
  // Given dK [R, L], accumulates every parameter gradient. dK is consumed: it is scaled in
  // place by the decay (dH = dK ⊙ decay), which saves an [R, L] scratch.
  void backward(const ImplicitFilterParams<T>& p, T* dkernel, const ImplicitFilterGrads<T>& g);

 private:
  static constexpr int kLayers = 3;

  Backend<T>& backend_;
  int length_, filters_, order_;
  Buffer<double> rate_;       // [R] per-filter decay rate |δ_r|
  Buffer<T> z_;               // [L, 3]
  Buffer<T> pre_[kLayers];    // a_i [L, O]
  Buffer<T> act_[kLayers];    // s_i [L, O]
  Buffer<T> dact_, dpre_;     // [L, O]
};

}  // namespace brt::kernels::ssm
