// S4D kernel generation (ZOH) and its backward (model.md §7.1), S4D-Lin initialisation, and the
// carried state of model.md §7.3. See s4d_kernel.h.
#include "kernels/ssm/s4d_kernel.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/cpu_parallel.h"
#include "kernels/ssm/s4d_modes.h"

namespace brt::kernels::ssm {

using detail::cplx;
using detail::PowerWalk;
using detail::s4d_mode;
using detail::S4dMode;
using detail::walk_taps;

namespace {
// Below this many mode-taps an OpenMP region costs more than it saves.
bool worth_parallel(int64_t tasks, int modes, int length) {
  return tasks > 1 && tasks * modes * length >= cpu::kParallelMinWork;
}
}  // namespace

template <typename T>
void s4d_kernel_forward(const S4dDims& d, const S4dParams<T>& p, T* kernel) {
  detail::check_modes(d.modes, "s4d_kernel_forward");
  const int L = d.length, M = d.modes;
#pragma omp parallel for schedule(static) if (worth_parallel(d.filters, M, L))
  for (int r = 0; r < d.filters; ++r) {
    PowerWalk walk;
    walk.count = M;
    for (int n = 0; n < M; ++n) {
      const S4dMode m = s4d_mode(p, M, r, n);
      walk.set_mode(n, m.c_tilde, m.dta, m.w);
    }
    T* kr = kernel + int64_t{r} * L;
    walk_taps(walk, L, 0,
              [&](int l, const PowerWalk& z) { kr[l] = static_cast<T>(2.0 * z.real_sum()); });
  }
}

template <typename T>
void s4d_kernel_backward(const S4dDims& d, const S4dParams<T>& p, const T* dkernel,
                         const S4dGrads<T>& g) {
  detail::check_modes(d.modes, "s4d_kernel_backward");
  const int L = d.length, M = d.modes;
#pragma omp parallel for schedule(static) if (worth_parallel(d.filters, M, L))
  for (int r = 0; r < d.filters; ++r) {
    // loss = Σ_l dK[l]·K[l] = 2·Re Σ_n C̃_n·S_n with S_n = Σ_l dK[l]·w_n^l, and
    // S'_n = Σ_l l·dK[l]·w_n^l = ∂S_n/∂(ΔA_n).
    PowerWalk walk;
    walk.count = M;
    for (int n = 0; n < M; ++n) {
      const S4dMode m = s4d_mode(p, M, r, n);
      walk.set_mode(n, cplx(1.0), m.dta, m.w);
    }
    double sr[kS4dMaxModes] = {}, si[kS4dMaxModes] = {}, spr[kS4dMaxModes] = {},
           spi[kS4dMaxModes] = {};
    const T* gk = dkernel + int64_t{r} * L;
    walk_taps(walk, L, 0, [&](int l, const PowerWalk& z) {
      const double gl = static_cast<double>(gk[l]), lgl = static_cast<double>(l) * gl;
#pragma omp simd
      for (int n = 0; n < M; ++n) {
        sr[n] += gl * z.zr[n];
        si[n] += gl * z.zi[n];
        spr[n] += lgl * z.zr[n];
        spi[n] += lgl * z.zi[n];
      }
    });
    double dlog_dt = 0;
    for (int n = 0; n < M; ++n) {
      const S4dMode m = s4d_mode(p, M, r, n);
      const cplx s(sr[n], si[n]), s_prime(spr[n], spi[n]);
      const int64_t i = int64_t{r} * M + n;
      // C: ∂C̃/∂c_re = E, ∂C̃/∂c_im = i·E.
      const cplx es = m.zoh * s;
      if (g.c_re != nullptr) g.c_re[i] += static_cast<T>(2.0 * es.real());
      if (g.c_im != nullptr) g.c_im[i] += static_cast<T>(-2.0 * es.imag());
      // A (holomorphic, Δ fixed): ∂C̃/∂A = C·(Δ·w − E)/A, ∂S/∂A = Δ·S'.
      const cplx grad_a = m.c * (m.dt * m.w - m.zoh) / m.a * s + m.c_tilde * s_prime * m.dt;
      if (g.log_neg_a_re != nullptr)  // ∂A/∂a_re = −exp(a_re) = Re A
        g.log_neg_a_re[i] += static_cast<T>(2.0 * (grad_a * m.a.real()).real());
      if (g.a_im != nullptr)  // ∂A/∂a_im = i
        g.a_im[i] += static_cast<T>(-2.0 * grad_a.imag());
      // Δ: ∂C̃/∂Δ = C·w, ∂S/∂Δ = A·S'; ∂Δ/∂log Δ = Δ.
      dlog_dt += 2.0 * m.dt * (m.c * m.w * s + m.c_tilde * s_prime * m.a).real();
    }
    if (g.log_dt != nullptr) g.log_dt[r] += static_cast<T>(dlog_dt);
  }
}

template <typename T>
void s4d_lin_init_modes(int filters, int modes, T* log_neg_a_re, T* a_im) {
  for (int64_t r = 0; r < filters; ++r)
    for (int n = 0; n < modes; ++n) {
      log_neg_a_re[r * modes + n] = static_cast<T>(std::log(0.5));
      a_im[r * modes + n] = static_cast<T>(std::numbers::pi * n);
    }
}

double s4d_log_dt_from_uniform(double u01, double dt_min, double dt_max) {
  const double lo = std::log(dt_min), hi = std::log(dt_max);
  return lo + u01 * (hi - lo);
}

template <typename T>
void s4d_carry_update(const S4dCarryDims& d, const S4dParams<T>& p, const T* u, double* state) {
  detail::check_modes(d.modes, "s4d_carry_update");
  const int R = d.filters(), F = d.features, M = d.modes, L = d.length;
  const int64_t tasks = int64_t{d.batch} * R;
#pragma omp parallel for schedule(static) if (worth_parallel(tasks, M, L))
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t b = task / R;
    const int r = static_cast<int>(task % R);
    const T* ub = u + b * L * F + r % F;
    double* x = state + task * M * 2;
    double wr[kS4dMaxModes], wi[kS4dMaxModes], xr[kS4dMaxModes], xi[kS4dMaxModes];
    for (int n = 0; n < M; ++n) {
      const S4dMode m = s4d_mode(p, M, r, n);
      wr[n] = m.w.real();
      wi[n] = m.w.imag();
      xr[n] = x[2 * n];
      xi[n] = x[2 * n + 1];
    }
    // Horner form of exp(LΔA)·x + Σ_τ exp((L−1−τ)ΔA)·u[τ]: x ← w·x + u[τ] for τ = 0..L−1.
    // |w| < 1, so rounding errors decay instead of growing.
    for (int t = 0; t < L; ++t) {
      const double ut = static_cast<double>(ub[int64_t{t} * F]);
#pragma omp simd
      for (int n = 0; n < M; ++n) {
        const double re = wr[n] * xr[n] - wi[n] * xi[n] + ut;
        xi[n] = wr[n] * xi[n] + wi[n] * xr[n];
        xr[n] = re;
      }
    }
    for (int n = 0; n < M; ++n) {
      x[2 * n] = xr[n];
      x[2 * n + 1] = xi[n];
    }
  }
}

template <typename T>
void s4d_carry_apply(const S4dCarryDims& d, const S4dParams<T>& p, const double* state, T* y) {
  detail::check_modes(d.modes, "s4d_carry_apply");
  // Features in tiles, so each row of y [L, Ds] is written a cache line at a time rather
  // than one strided element per filter.
  constexpr int kTile = 8;
  const int R = d.filters(), F = d.features, M = d.modes, L = d.length, C = d.channels;
  const int tiles_per_channel = (F + kTile - 1) / kTile;
  const int64_t tasks = int64_t{d.batch} * C * tiles_per_channel;
#pragma omp parallel for schedule(static) if (worth_parallel(tasks, M * kTile, L))
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t bc = task / tiles_per_channel;  // b·C + c
    const int c = static_cast<int>(bc % C);
    const int f0 = static_cast<int>(task % tiles_per_channel) * kTile;
    const int width = std::min(kTile, F - f0);
    PowerWalk walks[kTile];
    for (int j = 0; j < width; ++j) {
      const int r = c * F + f0 + j;
      const double* x = state + ((bc / C) * R + r) * M * 2;
      walks[j].count = M;
      for (int n = 0; n < M; ++n) {
        const S4dMode m = s4d_mode(p, M, r, n);
        walks[j].set_mode(n, m.c_tilde * cplx(x[2 * n], x[2 * n + 1]), m.dta, m.w);
      }
    }
    T* yc = y + bc * L * F + f0;
    for (int block = 0, l0 = 0; l0 < L; ++block, l0 += detail::kPowerBlock) {
      for (int j = 0; j < width; ++j) walks[j].start_block(block, 1);  // z = C̃·x·w^(l+1)
      const int l1 = std::min(L, l0 + detail::kPowerBlock);
      for (int l = l0; l < l1; ++l) {
        T* row = yc + int64_t{l} * F;
        for (int j = 0; j < width; ++j) {
          row[j] += static_cast<T>(2.0 * walks[j].real_sum());
          walks[j].step();
        }
      }
    }
  }
}

#define BRT_SSM_S4D_INSTANTIATE(T)                                                                \
  template void s4d_kernel_forward<T>(const S4dDims&, const S4dParams<T>&, T*);                   \
  template void s4d_kernel_backward<T>(const S4dDims&, const S4dParams<T>&, const T*,             \
                                       const S4dGrads<T>&);                                       \
  template void s4d_lin_init_modes<T>(int, int, T*, T*);                                          \
  template void s4d_carry_update<T>(const S4dCarryDims&, const S4dParams<T>&, const T*, double*); \
  template void s4d_carry_apply<T>(const S4dCarryDims&, const S4dParams<T>&, const double*, T*);
BRT_SSM_S4D_INSTANTIATE(float)
BRT_SSM_S4D_INSTANTIATE(double)
#undef BRT_SSM_S4D_INSTANTIATE

}  // namespace brt::kernels::ssm
