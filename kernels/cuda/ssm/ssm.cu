// The BST SSM besides the FFT convolution (model.md §7.1, §7.3; CPU versions:
// kernels/cpu/cpu_backend.cpp copy_rows and kernels/ssm/s4d_kernel.cpp, s4d_carry_backward.cpp):
// strided row copies, S4D kernel generation and its backward, and the carried S4D state's
// update, response and parameter gradient.
// The state and every mode sum are in double, as on the CPU (the carry is a long exact
// recurrence). Each output element is owned by one thread and summed in a fixed order (no
// atomics): deterministic.
#include <stdexcept>
#include <string>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/ssm/s4d_device.cuh"

namespace brt::kernels::cuda {

namespace {

__global__ void copy_rows_kernel(const float* src, int64_t src_stride, int64_t rows,
                                 int64_t width, float* dst, int64_t dst_stride) {
  const int64_t total = rows * width;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / width, j = e % width;
    dst[r * dst_stride + j] = src[r * src_stride + j];
  }
}

// One thread per (b, r, n): x ← w·x + u[τ] for τ = 0..L−1 (Horner form, as on the CPU).
__global__ void s4d_carry_update_kernel(ssm::S4dCarryDims d, ssm::S4dParams<float> p,
                                        const float* u, double* state) {
  const int F = d.features, R = d.channels * F, M = d.modes, L = d.length;
  const int64_t total = int64_t{d.batch} * R * M;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int n = static_cast<int>(i % M);
    const int r = static_cast<int>((i / M) % R);
    const int64_t b = i / (int64_t{M} * R);
    const Mode m = load_mode(p, M, r, n);
    const float* ub = u + b * L * F + r % F;
    double xr = state[2 * i], xi = state[2 * i + 1];
    for (int t = 0; t < L; ++t) {
      const double ut = static_cast<double>(ub[int64_t{t} * F]);
      const double re = m.w.re * xr - m.w.im * xi + ut;
      xi = m.w.re * xi + m.w.im * xr;
      xr = re;
    }
    state[2 * i] = xr;
    state[2 * i + 1] = xi;
  }
}

// coeff[b, r, n] = C̃_n·x_n and dta[r, n] = ΔA_n (the response's per-mode constants).
__global__ void s4d_carry_coeff_kernel(ssm::S4dCarryDims d, ssm::S4dParams<float> p,
                                       const double* state, Complex* coeff, Complex* dta) {
  const int R = d.channels * d.features, M = d.modes;
  const int64_t total = int64_t{d.batch} * R * M;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t rn = i % (int64_t{R} * M);
    const Mode m = load_mode(p, M, rn / M, static_cast<int>(rn % M));
    coeff[i] = cmul(cmul(m.c, m.zoh), {state[2 * i], state[2 * i + 1]});
    if (i < int64_t{R} * M) dta[i] = m.dta;
  }
}

// One thread per y element: y[b, c, t, f] += 2·Re Σ_n coeff[b, r, n]·exp((t+1)·ΔA_n), the
// power evaluated directly (no walk).
__global__ void s4d_carry_apply_kernel(ssm::S4dCarryDims d, const Complex* coeff,
                                       const Complex* dta, float* y) {
  const int F = d.features, C = d.channels, R = C * F, M = d.modes, L = d.length;
  const int64_t total = int64_t{d.batch} * C * L * F;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int f = static_cast<int>(e % F);
    const int t = static_cast<int>((e / F) % L);
    const int64_t bc = e / (int64_t{F} * L);
    const int r = static_cast<int>(bc % C) * F + f;
    const int64_t b = bc / C;
    const Complex* k = coeff + (b * R + r) * M;
    const Complex* a = dta + int64_t{r} * M;
    const double l = t + 1.0;
    double sum = 0;
    for (int n = 0; n < M; ++n) {
      const Complex z = cmul(k[n], cexp({l * a[n].re, l * a[n].im}));
      sum += z.re;
    }
    y[e] += static_cast<float>(2.0 * sum);
  }
}

// One thread per (r, n) (kernels/ssm/s4d_carry_backward.cpp has the derivation):
// G = Σ_b Σ_t dy·x·w^(t+1), G1 = Σ_b Σ_t dy·(t+1)·x·w^(t+1) over the active streams; the
// mode's own gradients are written here, its Δ part into dlog_dt_parts[r, n].
__global__ void s4d_carry_grad_kernel(ssm::S4dCarryDims d, ssm::S4dParams<float> p,
                                      const double* state, const uint8_t* active,
                                      const float* dy, ssm::S4dGrads<float> g,
                                      double* dlog_dt_parts) {
  const int F = d.features, C = d.channels, R = C * F, M = d.modes, L = d.length;
  const int64_t total = int64_t{R} * M;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int r = static_cast<int>(i / M), n = static_cast<int>(i % M);
    const int c = r / F, f = r % F;
    const Mode m = load_mode(p, M, r, n);
    Complex G{0, 0}, G1{0, 0};
    for (int b = 0; b < d.batch; ++b) {
      if (!active[b]) continue;
      const double* x = state + ((int64_t{b} * R + r) * M + n) * 2;
      Complex z = cmul({x[0], x[1]}, m.w);
      const float* dyc = dy + (int64_t{b} * C + c) * L * F + f;
      for (int t = 0; t < L; ++t) {
        const double e = static_cast<double>(dyc[int64_t{t} * F]), et = e * (t + 1);
        G.re += e * z.re;
        G.im += e * z.im;
        G1.re += et * z.re;
        G1.im += et * z.im;
        z = cmul(z, m.w);
      }
    }
    const Complex wm1{m.w.re - 1.0, m.w.im};
    const Complex dc = cmul(m.zoh, G);
    const Complex wG = cmul(m.w, G), wG1 = cmul(wm1, G1);
    const Complex ddt = cmul(m.c, {wG.re + wG1.re, wG.im + wG1.im});
    const Complex ra = cdiv({m.dt * m.w.re - m.zoh.re, m.dt * m.w.im - m.zoh.im}, m.a);
    const Complex ga = cmul(ra, G), gb = cmul(m.zoh, G1);
    const Complex da = cmul(m.c, {ga.re + m.dt * gb.re, ga.im + m.dt * gb.im});
    if (g.c_re) g.c_re[i] += static_cast<float>(2.0 * dc.re);
    if (g.c_im) g.c_im[i] += static_cast<float>(-2.0 * dc.im);
    if (g.log_neg_a_re) g.log_neg_a_re[i] += static_cast<float>(2.0 * da.re * m.a.re);
    if (g.a_im) g.a_im[i] += static_cast<float>(-2.0 * da.im);
    dlog_dt_parts[i] = 2.0 * ddt.re * m.dt;
  }
}

// c_tilde[r, n] = C̃_n = C_n·E_n and dta[r, n] = ΔA_n: the kernel's per-mode constants.
__global__ void s4d_kernel_modes_kernel(int filters, int modes, ssm::S4dParams<float> p,
                                        Complex* c_tilde, Complex* dta) {
  const int64_t total = int64_t{filters} * modes;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const Mode m = load_mode(p, modes, i / modes, static_cast<int>(i % modes));
    c_tilde[i] = cmul(m.c, m.zoh);
    dta[i] = m.dta;
  }
}

// One thread per tap: K[r, l] = 2·Re Σ_n C̃_n·exp(l·ΔA_n), the power evaluated directly in
// double (the CPU walks powers, re-anchored every 1024 taps: both are exact to ~1e-13).
__global__ void s4d_kernel_forward_kernel(ssm::S4dDims d, const Complex* c_tilde,
                                          const Complex* dta, float* kernel) {
  const int M = d.modes, L = d.length;
  const int64_t total = int64_t{d.filters} * L;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / L;
    const double l = static_cast<double>(e % L);
    const Complex* k = c_tilde + r * M;
    const Complex* a = dta + r * M;
    double sum = 0;
    for (int n = 0; n < M; ++n) sum += cmul(k[n], cexp({l * a[n].re, l * a[n].im})).re;
    kernel[e] = static_cast<float>(2.0 * sum);
  }
}

// One thread per (r, n) (the derivation is in kernels/ssm/s4d_kernel.cpp): S = Σ_l dK[l]·w^l,
// S' = Σ_l l·dK[l]·w^l, then C's and A's gradients; the Δ part goes to dlog_dt_parts[r, n].
__global__ void s4d_kernel_backward_kernel(ssm::S4dDims d, ssm::S4dParams<float> p,
                                           const float* dkernel, ssm::S4dGrads<float> g,
                                           double* dlog_dt_parts) {
  const int M = d.modes, L = d.length;
  const int64_t total = int64_t{d.filters} * M;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / M;
    const Mode m = load_mode(p, M, r, static_cast<int>(i % M));
    const float* gk = dkernel + r * L;
    Complex S{0, 0}, S1{0, 0}, z{1, 0};
    for (int l = 0; l < L; ++l) {
      const double e = static_cast<double>(gk[l]), el = e * l;
      S.re += e * z.re;
      S.im += e * z.im;
      S1.re += el * z.re;
      S1.im += el * z.im;
      z = cmul(z, m.w);
    }
    const Complex c_tilde = cmul(m.c, m.zoh);
    const Complex es = cmul(m.zoh, S);
    // ∂C̃/∂A = C·(Δ·w − E)/A, ∂S/∂A = Δ·S'.
    const Complex ra = cdiv({m.dt * m.w.re - m.zoh.re, m.dt * m.w.im - m.zoh.im}, m.a);
    const Complex ga = cmul(cmul(m.c, ra), S), gb = cmul(c_tilde, S1);
    const Complex grad_a{ga.re + m.dt * gb.re, ga.im + m.dt * gb.im};
    // ∂C̃/∂Δ = C·w, ∂S/∂Δ = A·S'.
    const Complex cw = cmul(cmul(m.c, m.w), S), ca = cmul(gb, m.a);
    if (g.c_re) g.c_re[i] += static_cast<float>(2.0 * es.re);
    if (g.c_im) g.c_im[i] += static_cast<float>(-2.0 * es.im);
    if (g.log_neg_a_re) g.log_neg_a_re[i] += static_cast<float>(2.0 * grad_a.re * m.a.re);
    if (g.a_im) g.a_im[i] += static_cast<float>(-2.0 * grad_a.im);
    dlog_dt_parts[i] = 2.0 * m.dt * (cw.re + ca.re);
  }
}

// log_dt[r] += Σ_n parts[r, n] in mode order.
}  // namespace

void launch_copy_rows(const float* src, int64_t src_stride, int64_t rows, int64_t width,
                      float* dst, int64_t dst_stride, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return;
  copy_rows_kernel<<<elementwise_blocks(rows * width), 256, 0, stream>>>(src, src_stride, rows,
                                                                         width, dst, dst_stride);
  BRT_CUDA_CHECK_LAUNCH("copy_rows");
}

void launch_s4d_kernel_forward(const ssm::S4dDims& d, const ssm::S4dParams<float>& p,
                               float* kernel, DeviceArena& scratch, cudaStream_t stream) {
  check_modes(d.modes, "s4d_kernel_forward");
  const int64_t rm = int64_t{d.filters} * d.modes, taps = int64_t{d.filters} * d.length;
  if (rm == 0 || taps == 0) return;
  Complex* c_tilde = scratch.allocate_array<Complex>(size_t(rm), "s4d_kernel_forward C~");
  Complex* dta = scratch.allocate_array<Complex>(size_t(rm), "s4d_kernel_forward dtA");
  s4d_kernel_modes_kernel<<<elementwise_blocks(rm), 256, 0, stream>>>(d.filters, d.modes, p,
                                                                      c_tilde, dta);
  BRT_CUDA_CHECK_LAUNCH("s4d_kernel_forward modes");
  s4d_kernel_forward_kernel<<<elementwise_blocks(taps), 256, 0, stream>>>(d, c_tilde, dta, kernel);
  BRT_CUDA_CHECK_LAUNCH("s4d_kernel_forward");
}

void launch_s4d_kernel_backward(const ssm::S4dDims& d, const ssm::S4dParams<float>& p,
                                const float* dkernel, const ssm::S4dGrads<float>& g,
                                DeviceArena& scratch, cudaStream_t stream) {
  check_modes(d.modes, "s4d_kernel_backward");
  const int64_t rm = int64_t{d.filters} * d.modes;
  if (rm == 0 || d.length == 0) return;
  double* parts = scratch.allocate_array<double>(size_t(rm), "s4d_kernel_backward dlog_dt");
  s4d_kernel_backward_kernel<<<elementwise_blocks(rm, 128), 128, 0, stream>>>(d, p, dkernel, g,
                                                                              parts);
  BRT_CUDA_CHECK_LAUNCH("s4d_kernel_backward");
  if (g.log_dt) {
    s4d_carry_log_dt_kernel<<<elementwise_blocks(d.filters), 256, 0, stream>>>(d.filters, d.modes,
                                                                              parts, g.log_dt);
    BRT_CUDA_CHECK_LAUNCH("s4d_kernel_backward log_dt");
  }
}

void launch_s4d_carry_update(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                             const float* u, double* state, cudaStream_t stream) {
  check_modes(d.modes, "s4d_carry_update");
  const int64_t total = int64_t{d.batch} * d.channels * d.features * d.modes;
  if (total == 0 || d.length == 0) return;
  s4d_carry_update_kernel<<<elementwise_blocks(total, 128), 128, 0, stream>>>(d, p, u, state);
  BRT_CUDA_CHECK_LAUNCH("s4d_carry_update");
}

void launch_s4d_carry_apply(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                            const double* state, float* y, DeviceArena& scratch,
                            cudaStream_t stream) {
  check_modes(d.modes, "s4d_carry_apply");
  const int64_t rm = int64_t{d.channels} * d.features * d.modes, total = d.batch * rm;
  if (total == 0 || d.length == 0) return;
  Complex* coeff = scratch.allocate_array<Complex>(size_t(total), "s4d_carry_apply coefficients");
  Complex* dta = scratch.allocate_array<Complex>(size_t(rm), "s4d_carry_apply dtA");
  s4d_carry_coeff_kernel<<<elementwise_blocks(total), 256, 0, stream>>>(d, p, state, coeff, dta);
  BRT_CUDA_CHECK_LAUNCH("s4d_carry_apply coefficients");
  const int64_t elems = int64_t{d.batch} * d.channels * d.length * d.features;
  s4d_carry_apply_kernel<<<elementwise_blocks(elems), 256, 0, stream>>>(d, coeff, dta, y);
  BRT_CUDA_CHECK_LAUNCH("s4d_carry_apply");
}

void launch_s4d_carry_apply_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                                     const double* state, const uint8_t* active,
                                     const float* dy, const ssm::S4dGrads<float>& g,
                                     DeviceArena& scratch, cudaStream_t stream) {
  check_modes(d.modes, "s4d_carry_apply_backward");
  const int R = d.channels * d.features;
  const int64_t rm = int64_t{R} * d.modes;
  if (rm == 0) return;
  double* parts = scratch.allocate_array<double>(size_t(rm), "s4d_carry_apply_backward dlog_dt");
  s4d_carry_grad_kernel<<<elementwise_blocks(rm, 128), 128, 0, stream>>>(d, p, state, active, dy,
                                                                         g, parts);
  BRT_CUDA_CHECK_LAUNCH("s4d_carry_apply_backward");
  if (g.log_dt) {
    s4d_carry_log_dt_kernel<<<elementwise_blocks(R), 256, 0, stream>>>(R, d.modes, parts, g.log_dt);
    BRT_CUDA_CHECK_LAUNCH("s4d_carry_apply_backward log_dt");
  }
}

}  // namespace brt::kernels::cuda
