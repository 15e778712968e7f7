// S4D convolution kernels (model.md §7.1 `s4d`) and the carried SSM state of model.md §7.3.
//
// Per filter r = (c, f) (R = C·Ds filters in [C, Ds] order) with M = N_s/2 complex modes n:
//   Δ      = exp(log_dt[r])
//   A_n    = −exp(log_neg_a_re[r, n]) + i·a_im[r, n]      (model.md §7.1: a_n, b_n)
//   C_n    = c_re[r, n] + i·c_im[r, n],   B_n = 1
//   C̃_n    = C_n·B_n·(exp(ΔA_n) − 1)/A_n                   (ZOH)
//   K[r, l] = 2·Re Σ_n C̃_n·exp(l·ΔA_n),   l ∈ [0, L)
// Checkpoint names (model.md §9, under layers.{i}.ssm.): log_dt [C, Ds], a_re = log_neg_a_re and
// a_im [C, Ds, M], c_re, c_im [C, Ds, M]. NOTE: the stored `a_re` is the LOG of the negative
// real part of A (Re A_n = −exp(a_re)), which keeps Re A < 0 (a stable SSM) for any value.
//
// All mode sums and powers are computed in double whatever T is; powers exp(l·ΔA) are walked
// by repeated multiplication and re-anchored exactly every 1024 taps (s4d_modes.h), so the
// error does not grow with L. Forward overwrites; backward accumulates (backend.h). Parallel over
// filters r, each owned by one task: deterministic.
#pragma once

#include <cstdint>

namespace brt::kernels::ssm {

// Most complex modes per filter (M = N_s/2, docs/model.md default 32) the kernels accept: their
// per-filter mode tables live on the stack, so the kernels never allocate.
constexpr int kS4dMaxModes = 128;

// Parameters of R = C·Ds filters with M modes each. Shapes: log_dt [R]; the others [R, M].
template <typename T>
struct S4dParams {
  const T* log_dt;
  const T* log_neg_a_re;  // checkpoint name `a_re`
  const T* a_im;
  const T* c_re;
  const T* c_im;
};

// Gradient buffers with the same shapes (accumulated into; null entries are skipped).
template <typename T>
struct S4dGrads {
  T* log_dt;
  T* log_neg_a_re;
  T* a_im;
  T* c_re;
  T* c_im;
};

struct S4dDims {
  int filters;  // R = C·Ds
  int modes;    // M = N_s / 2
  int length;   // L (kernel taps)
};

// K [R, L] (the k layout of FftConv: [C, Ds, L]).
template <typename T>
void s4d_kernel_forward(const S4dDims& d, const S4dParams<T>& p, T* kernel);

// Given dK [R, L], accumulates the gradients of every parameter.
template <typename T>
void s4d_kernel_backward(const S4dDims& d, const S4dParams<T>& p, const T* dkernel,
                         const S4dGrads<T>& g);

// S4D-Lin initialisation of the deterministic parts (model.md §7.1): log_neg_a_re = ln 0.5 and
// a_im = π·n for every filter. The random parts (log Δ ~ U[ln 1e−3, ln 1e−1], C ~ complex
// N(0, 1) with re/im each N(0, 1/2), Dskip ~ N(0, 1)) come from the model's counter-based
// initialiser (model.md §10b); s4d_log_dt_from_uniform maps a U[0, 1) draw to log Δ.
template <typename T>
void s4d_lin_init_modes(int filters, int modes, T* log_neg_a_re, T* a_im);
double s4d_log_dt_from_uniform(double u01, double dt_min = 1e-3, double dt_max = 1e-1);

// ---- model.md §7.3 carried state (forward only; the carry is detached) -----------------------
// The state of one stream is x [C, Ds, M] complex, stored interleaved as [C, Ds, M, 2]
// (re, im) in double (the carry is a long exact recurrence; fp32 would drift across a
// book). States of B streams are [B, C, Ds, M, 2].
struct S4dCarryDims {
  int batch;     // B streams
  int channels;  // C
  int features;  // Ds
  int modes;     // M
  int length;    // L = N_seg tokens in this segment
  int filters() const { return channels * features; }
};

// For each stream b and filter (c, f):
//   x_n ← exp(L·ΔA_n)·x_n + Σ_{τ<L} exp((L−1−τ)·ΔA_n)·u[b, τ, f]
// u: [B, L, Ds] (the SSM input U of this segment); state updated in place.
template <typename T>
void s4d_carry_update(const S4dCarryDims& d, const S4dParams<T>& p, const T* u, double* state);

// For each stream b, filter (c, f) and t ∈ [0, L):
//   y[b, c, t, f] += 2·Re Σ_n C̃_n·exp((t+1)·ΔA_n)·x_n
// with the state x from before this segment's update. y: [B, C, L, Ds] (FftConv's layout).
// Together with the in-segment convolution this is exactly the convolution over the whole
// document (model.md §7.3).
template <typename T>
void s4d_carry_apply(const S4dCarryDims& d, const S4dParams<T>& p, const double* state, T* y);

// The parameter gradient of s4d_carry_apply (s4d_carry_backward.cpp). The state is detached
// (no gradient crosses a segment boundary, model.md §8), but the term a segment adds depends on
// its parameters (Δ, A, C). dy: [B, C, L, Ds]; state: the one s4d_carry_apply read.
// Accumulates into g (null entries skipped). Streams whose active[b] is 0 (a document start:
// zero state) are skipped. Parallel over filters, each owned by one task: deterministic.
template <typename T>
void s4d_carry_apply_backward(const S4dCarryDims& d, const S4dParams<T>& p, const double* state,
                              const uint8_t* active, const T* dy, const S4dGrads<T>& g);

}  // namespace brt::kernels::ssm
