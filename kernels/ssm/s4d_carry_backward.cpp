// The parameter gradient of the carried S4D term of model.md §7.3 (s4d_kernel.h):
//   y[b, c, t, f] += 2·Re Σ_n C̃_n·exp((t+1)·ΔA_n)·x_n,   C̃_n = C_n·(exp(ΔA_n) − 1)/A_n.
#include "kernels/ssm/s4d_kernel.h"

#include <cmath>
#include <complex>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace brt::kernels::ssm {

using cplx = std::complex<double>;

// With P_n(t) = C_n·E_n·x_n·w_n^(t+1), E_n = (w_n − 1)/A_n, w_n = exp(Δ·A_n), and
// G = Σ_b Σ_t dy[t]·x·w^(t+1), G1 = Σ_b Σ_t dy[t]·(t+1)·x·w^(t+1):
//   Σ dy·∂P/∂C = E·G
//   Σ dy·∂P/∂Δ = C·(w·G + (w − 1)·G1)            (∂E/∂Δ = w, ∂w^(t+1)/∂Δ = (t+1)·A·w^(t+1))
//   Σ dy·∂P/∂A = C·((Δw − E)/A·G + E·Δ·G1)       (∂E/∂A = (Δw − E)/A)
// y = 2·Re P, so a real parameter θ gets 2·Re(Σ dy·∂P/∂θ); Im-type parameters (∂/∂θ = i·∂/∂z)
// get −2·Im(...). Δ = exp(log_dt), Re A = −exp(a_re).
template <typename T>
void s4d_carry_apply_backward(const S4dCarryDims& d,
                              const S4dParams<T>& p, const double* state,
                              const uint8_t* active, const T* dy,
                              const S4dGrads<T>& g) {
  const int R = d.filters(), F = d.features, M = d.modes, L = d.length, C = d.channels;
  if (M < 1 || M > kS4dMaxModes)
    throw std::runtime_error("kernels/ssm s4d_carry_apply_backward: modes must be in [1, 128], got " + std::to_string(M));
#pragma omp parallel for schedule(static)
  for (int r = 0; r < R; ++r) {
    const int c = r / F, f = r % F;
    const double dt = std::exp(static_cast<double>(p.log_dt[r]));
    double wr[kS4dMaxModes], wi[kS4dMaxModes];
    double gr[kS4dMaxModes] = {}, gi[kS4dMaxModes] = {}, g1r[kS4dMaxModes] = {}, g1i[kS4dMaxModes] = {};
    cplx a[kS4dMaxModes], w[kS4dMaxModes];
    for (int n = 0; n < M; ++n) {
      const int64_t i = int64_t{r} * M + n;
      a[n] = cplx(-std::exp(static_cast<double>(p.log_neg_a_re[i])), static_cast<double>(p.a_im[i]));
      w[n] = std::exp(dt * a[n]);
      wr[n] = w[n].real();
      wi[n] = w[n].imag();
    }
    for (int b = 0; b < d.batch; ++b) {
      if (!active[b]) continue;
      const double* x = state + (int64_t{b} * R + r) * M * 2;
      const T* dyc = dy + (int64_t{b} * C + c) * L * F + f;
      // z_n = x_n·w_n^(t+1), walked by multiplication (|w| < 1: errors decay).
      double zr[kS4dMaxModes], zi[kS4dMaxModes];
      for (int n = 0; n < M; ++n) {
        const cplx z = cplx(x[2 * n], x[2 * n + 1]) * w[n];
        zr[n] = z.real();
        zi[n] = z.imag();
      }
      for (int t = 0; t < L; ++t) {
        const double e = static_cast<double>(dyc[int64_t{t} * F]);
        const double et = e * (t + 1);
#pragma omp simd
        for (int n = 0; n < M; ++n) {
          gr[n] += e * zr[n];
          gi[n] += e * zi[n];
          g1r[n] += et * zr[n];
          g1i[n] += et * zi[n];
          const double re = zr[n] * wr[n] - zi[n] * wi[n];
          zi[n] = zr[n] * wi[n] + zi[n] * wr[n];
          zr[n] = re;
        }
      }
    }
    double dlog_dt = 0;
    for (int n = 0; n < M; ++n) {
      const int64_t i = int64_t{r} * M + n;
      const cplx G(gr[n], gi[n]), G1(g1r[n], g1i[n]);
      const cplx cn(static_cast<double>(p.c_re[i]), static_cast<double>(p.c_im[i]));
      const cplx e = (w[n] - 1.0) / a[n];
      const cplx dc = e * G;
      const cplx ddt = cn * (w[n] * G + (w[n] - 1.0) * G1);
      const cplx da = cn * ((dt * w[n] - e) / a[n] * G + e * dt * G1);
      if (g.c_re) g.c_re[i] += static_cast<T>(2.0 * dc.real());
      if (g.c_im) g.c_im[i] += static_cast<T>(-2.0 * dc.imag());
      if (g.log_neg_a_re) g.log_neg_a_re[i] += static_cast<T>(2.0 * da.real() * a[n].real());
      if (g.a_im) g.a_im[i] += static_cast<T>(-2.0 * da.imag());
      dlog_dt += 2.0 * ddt.real() * dt;
    }
    if (g.log_dt) g.log_dt[r] += static_cast<T>(dlog_dt);
  }
}

template void s4d_carry_apply_backward<float>(const S4dCarryDims&,
                                              const S4dParams<float>&, const double*,
                                              const uint8_t*, const float*,
                                              const S4dGrads<float>&);
template void s4d_carry_apply_backward<double>(const S4dCarryDims&,
                                               const S4dParams<double>&, const double*,
                                               const uint8_t*, const double*,
                                               const S4dGrads<double>&);

}  // namespace brt::kernels::ssm
