// Shared by the S4D kernels of kernels/cuda/ssm (ssm.cu, s4d_state_passing.cu): complex double
// arithmetic, one mode's constants computed from the parameters on the device (as
// kernels/ssm/s4d_modes.h s4d_mode does on the CPU), and the fold of per-mode Δ-gradient parts
// into dlog_dt (modes in order, one thread per filter); the modes' bound. Internal to those files.
#pragma once

#include <stdexcept>
#include <string>

#include "kernels/cuda/device_common.cuh"
#include "kernels/ssm/s4d_kernel.h"

namespace brt::kernels::cuda {
namespace {

struct Complex {
  double re, im;
};
__device__ inline Complex cmul(Complex a, Complex b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
__device__ inline Complex cdiv(Complex a, Complex b) {
  const double d = b.re * b.re + b.im * b.im;
  return {(a.re * b.re + a.im * b.im) / d, (a.im * b.re - a.re * b.im) / d};
}
__device__ inline Complex cexp(Complex z) {
  const double m = exp(z.re);
  return {m * cos(z.im), m * sin(z.im)};
}

// Mode n of filter r (kernels/ssm/s4d_modes.h s4d_mode): Δ, A_n, ΔA_n, w_n = exp(ΔA_n),
// E_n = (w_n − 1)/A_n and C_n.
struct Mode {
  double dt;
  Complex a, dta, w, zoh, c;
};
__device__ Mode load_mode(const ssm::S4dParams<float>& p, int modes, int64_t r, int n) {
  Mode m;
  const int64_t i = r * modes + n;
  m.dt = exp(static_cast<double>(p.log_dt[r]));
  m.a = {-exp(static_cast<double>(p.log_neg_a_re[i])), static_cast<double>(p.a_im[i])};
  m.dta = {m.dt * m.a.re, m.dt * m.a.im};
  m.w = cexp(m.dta);
  m.zoh = cdiv({m.w.re - 1.0, m.w.im}, m.a);
  m.c = {static_cast<double>(p.c_re[i]), static_cast<double>(p.c_im[i])};
  return m;
}

__global__ void s4d_carry_log_dt_kernel(int filters, int modes, const double* parts,
                                        float* dlog_dt) {
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < filters; r += gridDim.x * blockDim.x) {
    double s = 0;
    for (int n = 0; n < modes; ++n) s += parts[int64_t{r} * modes + n];
    dlog_dt[r] += static_cast<float>(s);
  }
}

inline void check_modes(int modes, const char* what) {
  if (modes < 1 || modes > ssm::kS4dMaxModes)
    throw std::runtime_error(std::string("kernels/cuda ") + what + ": modes must be in [1, " +
                             std::to_string(ssm::kS4dMaxModes) + "], got " + std::to_string(modes));
}

}  // namespace
}  // namespace brt::kernels::cuda
