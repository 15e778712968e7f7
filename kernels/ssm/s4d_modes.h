// Per-filter S4D mode tables (model.md §7.1), in double, shared by the kernel generator, its
// backward and the §7.3 carry. Internal to kernels/ssm.
//
// Powers exp(l·ΔA_n) are walked by repeated multiplication with w_n = exp(ΔA_n), tap by tap,
// with the modes in structure-of-arrays form so the per-tap update vectorises across n.
// Every kPowerBlock taps the walk restarts from a block start that is stepped by
// w_n^kPowerBlock, and every kAnchorBlocks blocks the start is evaluated exactly, so the
// relative error stays ~1e-13 for any kernel length.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/ssm/fftw_api.h"
#include "kernels/ssm/s4d_kernel.h"

namespace brt::kernels::ssm::detail {

using cplx = std::complex<double>;

constexpr int kPowerBlock = 64;
constexpr int kAnchorBlocks = 16;

inline void check_modes(int modes, const char* what) {
  if (modes < 1 || modes > kS4dMaxModes)
    throw std::runtime_error(std::string("kernels/ssm/") + what + ": modes must be in [1, " +
                             std::to_string(kS4dMaxModes) + "], got " + std::to_string(modes));
}

// Constants of mode n of filter r.
struct S4dMode {
  double dt;     // Δ
  cplx a;        // A_n
  cplx dta;      // Δ·A_n
  cplx w;        // exp(ΔA_n), the discrete pole
  cplx zoh;      // E_n = (exp(ΔA_n) − 1)/A_n  (B_n = 1)
  cplx c;        // C_n
  cplx c_tilde;  // C̃_n = C_n·E_n
};

template <typename T>
S4dMode s4d_mode(const S4dParams<T>& p, int modes, int64_t r, int n) {
  S4dMode m;
  const int64_t i = r * modes + n;
  m.dt = std::exp(static_cast<double>(p.log_dt[r]));
  m.a = cplx(-std::exp(static_cast<double>(p.log_neg_a_re[i])), static_cast<double>(p.a_im[i]));
  m.dta = m.dt * m.a;
  m.w = std::exp(m.dta);
  m.zoh = (m.w - 1.0) / m.a;
  m.c = cplx(static_cast<double>(p.c_re[i]), static_cast<double>(p.c_im[i]));
  m.c_tilde = m.c * m.zoh;
  return m;
}

// z_n(l) = coeff_n · w_n^(l + shift) for all modes of one filter, walked tap by tap.
class PowerWalk {
 public:
  int count = 0;
  double zr[kS4dMaxModes], zi[kS4dMaxModes];  // current z_n(l)

  void set_mode(int n, cplx coeff, cplx dta, cplx w) {
    coeff_[n] = coeff;
    dta_[n] = dta;
    wr_[n] = w.real();
    wi_[n] = w.imag();
    block_step_[n] = std::exp(static_cast<double>(kPowerBlock) * dta);
  }
  // Positions z at tap l0 = block·kPowerBlock.
  void start_block(int block, int shift) {
    const double first = static_cast<double>(block) * kPowerBlock + shift;
    for (int n = 0; n < count; ++n) {
      start_[n] = block % kAnchorBlocks == 0 ? coeff_[n] * std::exp(first * dta_[n])
                                             : cmul(start_[n], block_step_[n]);
      zr[n] = start_[n].real();
      zi[n] = start_[n].imag();
    }
  }
  // z_n ← z_n·w_n for every mode.
  void step() {
#pragma omp simd
    for (int n = 0; n < count; ++n) {
      const double r = zr[n] * wr_[n] - zi[n] * wi_[n];
      zi[n] = zr[n] * wi_[n] + zi[n] * wr_[n];
      zr[n] = r;
    }
  }
  // Σ_n Re z_n (fixed order within one build).
  double real_sum() const {
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int n = 0; n < count; ++n) s += zr[n];
    return s;
  }

 private:
  cplx coeff_[kS4dMaxModes], dta_[kS4dMaxModes], block_step_[kS4dMaxModes], start_[kS4dMaxModes];
  double wr_[kS4dMaxModes], wi_[kS4dMaxModes];
};

// Calls per_tap(l, walk) for l in [0, length) with walk.z = coeff·w^(l + shift).
template <typename PerTap>
void walk_taps(PowerWalk& walk, int length, int shift, PerTap per_tap) {
  for (int block = 0, l0 = 0; l0 < length; ++block, l0 += kPowerBlock) {
    walk.start_block(block, shift);
    const int l1 = l0 + kPowerBlock < length ? l0 + kPowerBlock : length;
    for (int l = l0; l < l1; ++l) {
      per_tap(l, walk);
      walk.step();
    }
  }
}

}  // namespace brt::kernels::ssm::detail
