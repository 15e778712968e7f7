// The parameter gradient of the carried S4D term of MODEL §7.3. The carried state x is
// detached (no gradient crosses a segment boundary, §8), but the term the next segment adds,
//   y[b, c, t, f] += 2·Re Σ_n C̃_n·exp((t+1)·ΔA_n)·x_n,   C̃_n = C_n·(exp(ΔA_n) − 1)/A_n,
// still depends on this segment's parameters (Δ, A, C), so the loss gradient of those
// parameters has a part through it. kernels/ssm's s4d_carry_apply is forward only; this is its
// backward with respect to the parameters (the state gets none).
#pragma once

#include "kernels/ssm/s4d_kernel.h"

namespace brt::core {

// dy: [B, C, L, Ds] the gradient w.r.t. y; state: [B, C, Ds, M, 2] (re, im) in double, the
// state s4d_carry_apply read. Accumulates into g.log_dt, g.log_neg_a_re, g.a_im, g.c_re, g.c_im.
// Streams whose `active[b]` is 0 (a document start: zero state) are skipped. Parallel over
// filters; each filter's gradients are owned by one task (deterministic).
template <typename T>
void s4d_carry_apply_backward(const kernels::ssm::S4dCarryDims& d,
                              const kernels::ssm::S4dParams<T>& p, const double* state,
                              const uint8_t* active, const T* dy,
                              const kernels::ssm::S4dGrads<T>& g);

}  // namespace brt::core
