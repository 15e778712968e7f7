// Context parallelism's exact S4D state passing (docs/parallelism.md, "Context parallelism";
// model.md §7.1, §7.3). A segment of N tokens is cut into C chunks of L = N/C tokens, one per
// rank. Each rank convolves its own chunk from a zero state and adds the response of the state
// x_in(r) that everything before it leaves, so that the sum is the convolution over the whole
// segment. With w_n = exp(ΔA_n) per filter r and mode n, and the per-chunk summary
//   h_j = Σ_{τ<L} w^{L−1−τ} u_j[τ]            (s4d_carry_update from a zero state)
// the states entering the chunks are the exclusive scan
//   x_in(0) = x_carried (zero at a document start),  x_in(j+1) = w^L·x_in(j) + h_j.
// Backward runs the scan in reverse. With complex gradients G = ∂ℓ/∂Re + i·∂ℓ/∂Im:
//   g_j = ∂ℓ/∂x_in(j) through chunk j's own response      (s4d_state_apply_grad)
//   Gt_j = g_j + conj(w^L)·Gt_{j+1},   ∂ℓ/∂h_j = Gt_{j+1}  (s4d_state_advance, adjoint)
// and the parameters receive the scan's term through w^L (s4d_state_advance_backward) and the
// summary's through w^{L−1−τ} (s4d_summary_backward), besides the response's own
// (s4d_carry_apply_backward). The carried state x_in(C) stays detached (model.md §8).
//
// States and their gradients are [B, R, M, 2] doubles (R = C·Ds filters, re/im interleaved), the
// layout of s4d_carry_update's state. All four are deterministic: each output element is owned
// by one task and summed in a fixed order.
#pragma once

#include <cstdint>

#include "kernels/ssm/s4d_kernel.h"

namespace brt::kernels::ssm {

// x ← w^L·x + h (adjoint: x ← conj(w^L)·x + h), L = d.length, for every stream and filter.
template <typename T>
void s4d_state_advance(const S4dCarryDims& d, const S4dParams<T>& p, const double* h, double* x,
                       bool adjoint);

// g = ∂ℓ/∂x of y[b, c, t, f] += 2·Re Σ_n C̃_n·w_n^{t+1}·x_n (s4d_carry_apply), given dy
// [B, C, L, Ds]: g_n = 2·conj(C̃_n·Σ_t dy_t·w_n^{t+1}). Overwrites g.
template <typename T>
void s4d_state_apply_grad(const S4dCarryDims& d, const S4dParams<T>& p, const T* dy, double* g);

// The parameter gradient of x_next = w^L·x_prev + h through w^L, given gnext = ∂ℓ/∂x_next.
// Accumulates log_dt, a_re, a_im (c_re, c_im are not involved).
template <typename T>
void s4d_state_advance_backward(const S4dCarryDims& d, const S4dParams<T>& p, const double* x_prev,
                                const double* gnext, const S4dGrads<T>& g);

// The backward of h = Σ_{τ<L} w^{L−1−τ}·u[b, τ, f] (s4d_carry_update from zero), given dh:
// accumulates du [B, L, Ds] (du[τ, f] += Σ_c Σ_n Re(conj(dh)·w^{L−1−τ})) and log_dt, a_re, a_im.
template <typename T>
void s4d_summary_backward(const S4dCarryDims& d, const S4dParams<T>& p, const T* u,
                          const double* dh, T* du, const S4dGrads<T>& g);

}  // namespace brt::kernels::ssm
