// Context parallelism's S4D state passing on the device (kernels/ssm/s4d_state_passing.h has the
// formulas; the CPU version is kernels/ssm/s4d_state_passing.cpp). Double throughout, like the
// carry it extends. Each output element is owned by one thread and summed in a fixed order
// (streams, channels, modes and taps in index order; no atomics): deterministic. The powers are
// evaluated directly, exp(l·ΔA), where the CPU walks them: the two agree to rounding.
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/ssm/s4d_device.cuh"

namespace brt::kernels::cuda {

namespace {

__device__ inline Complex cconj(Complex z) { return {z.re, -z.im}; }
__device__ inline Complex load(const double* v) { return {v[0], v[1]}; }

// One thread per (b, r, n): x ← w^L·x + h, or conj(w^L)·x + h.
__global__ void s4d_state_advance_kernel(ssm::S4dCarryDims d, ssm::S4dParams<float> p, const double* h,
                                         double* x, bool adjoint) {
  const int R = d.channels * d.features, M = d.modes;
  const int64_t total = int64_t{d.batch} * R * M;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int n = static_cast<int>(i % M), r = static_cast<int>((i / M) % R);
    const Mode m = load_mode(p, M, r, n);
    Complex z = cexp({d.length * m.dta.re, d.length * m.dta.im});
    if (adjoint) z = cconj(z);
    const Complex zx = cmul(z, load(x + 2 * i));
    x[2 * i] = zx.re + h[2 * i];
    x[2 * i + 1] = zx.im + h[2 * i + 1];
  }
}

// One thread per (b, r, n): g = 2·conj(C̃·Σ_t dy_t·w^{t+1}), the sum by Horner from the end.
__global__ void s4d_state_apply_grad_kernel(ssm::S4dCarryDims d, ssm::S4dParams<float> p, const float* dy,
                                            double* g) {
  const int F = d.features, C = d.channels, R = C * F, M = d.modes, L = d.length;
  const int64_t total = int64_t{d.batch} * R * M;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int n = static_cast<int>(i % M), r = static_cast<int>((i / M) % R);
    const int64_t b = i / (int64_t{M} * R);
    const Mode m = load_mode(p, M, r, n);
    const float* dyc = dy + ((b * C + r / F) * L) * F + r % F;
    double ar = 0, ai = 0;
    for (int t = L - 1; t >= 0; --t) {
      const double re = ar + static_cast<double>(dyc[int64_t{t} * F]), im = ai;
      ar = m.w.re * re - m.w.im * im;
      ai = m.w.re * im + m.w.im * re;
    }
    const Complex z = cconj(cmul(cmul(m.c, m.zoh), {ar, ai}));
    g[2 * i] = 2.0 * z.re;
    g[2 * i + 1] = 2.0 * z.im;
  }
}

// The chain from P = Σ_b conj(G)·∂Q/∂(ΔA) to the mode's parameters (s4d_state_passing.cpp
// add_delta_a_grads): a_re and a_im here, the Δ part into parts[r, n] for the fold.
__device__ void add_delta_a_grads(const Mode& m, Complex P, const ssm::S4dGrads<float>& g, int64_t i,
                                  double* parts) {
  if (g.log_neg_a_re) g.log_neg_a_re[i] += static_cast<float>(P.re * m.dta.re);
  if (g.a_im) g.a_im[i] += static_cast<float>(-m.dt * P.im);
  parts[i] = cmul(P, m.dta).re;
}

// One thread per (r, n): P = Σ_b conj(gnext)·L·w^L·x_prev.
__global__ void s4d_state_advance_backward_kernel(ssm::S4dCarryDims d, ssm::S4dParams<float> p,
                                                  const double* x_prev, const double* gnext,
                                                  ssm::S4dGrads<float> g, double* parts) {
  const int R = d.channels * d.features, M = d.modes, L = d.length;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < int64_t{R} * M;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int r = static_cast<int>(i / M), n = static_cast<int>(i % M);
    const Mode m = load_mode(p, M, r, n);
    const Complex zl0 = cexp({L * m.dta.re, L * m.dta.im});
    const Complex zl{double(L) * zl0.re, double(L) * zl0.im};
    Complex sum{0, 0};
    for (int b = 0; b < d.batch; ++b) {
      const int64_t at = ((int64_t{b} * R + r) * M + n) * 2;
      const Complex term = cmul(cmul(cconj(load(gnext + at)), zl), load(x_prev + at));
      sum.re += term.re;
      sum.im += term.im;
    }
    add_delta_a_grads(m, sum, g, i, parts);
  }
}

// One thread per du element (b, τ, f): du += Σ_c (Σ_n Re(conj(dh)·w^{L−1−τ})), each channel's
// sum added in float as on the CPU.
__global__ void s4d_summary_du_kernel(ssm::S4dCarryDims d, ssm::S4dParams<float> p, const double* dh,
                                      float* du) {
  const int F = d.features, C = d.channels, R = C * F, M = d.modes, L = d.length;
  const int64_t total = int64_t{d.batch} * L * F;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int f = static_cast<int>(e % F), tau = static_cast<int>((e / F) % L);
    const int64_t b = e / (int64_t{F} * L);
    const double l = L - 1 - tau;
    float acc = du[e];
    for (int c = 0; c < C; ++c) {
      const int r = c * F + f;
      const double* dhs = dh + (b * R + r) * M * 2;
      double s = 0;
      for (int n = 0; n < M; ++n) {
        const Mode m = load_mode(p, M, r, n);
        s += cmul(cconj(load(dhs + 2 * n)), cexp({l * m.dta.re, l * m.dta.im})).re;
      }
      acc += static_cast<float>(s);
    }
    du[e] = acc;
  }
}

// One thread per (r, n): ∂h/∂(ΔA) = q(L−1) with s(t) = w·s(t−1) + u_t, q(t) = w·(q(t−1) + s(t−1)),
// per stream in order; P = Σ_b conj(dh)·q.
__global__ void s4d_summary_params_kernel(ssm::S4dCarryDims d, ssm::S4dParams<float> p, const float* u,
                                          const double* dh, ssm::S4dGrads<float> g, double* parts) {
  const int F = d.features, R = d.channels * F, M = d.modes, L = d.length;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < int64_t{R} * M;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int r = static_cast<int>(i / M), n = static_cast<int>(i % M);
    const Mode m = load_mode(p, M, r, n);
    Complex P{0, 0};
    for (int b = 0; b < d.batch; ++b) {
      double sr = 0, si = 0, qr = 0, qi = 0;
      const float* ub = u + int64_t{b} * L * F + r % F;
      for (int t = 0; t < L; ++t) {
        const double ut = static_cast<double>(ub[int64_t{t} * F]);
        const double ar = qr + sr, ai = qi + si;
        qr = m.w.re * ar - m.w.im * ai;
        qi = m.w.re * ai + m.w.im * ar;
        const double s_re = m.w.re * sr - m.w.im * si + ut;
        si = m.w.re * si + m.w.im * sr;
        sr = s_re;
      }
      const Complex term = cmul(cconj(load(dh + ((int64_t{b} * R + r) * M + n) * 2)), {qr, qi});
      P.re += term.re;
      P.im += term.im;
    }
    add_delta_a_grads(m, P, g, i, parts);
  }
}

// dlog_dt from the per-mode parts (modes in order), when the caller wants it.
void fold_log_dt(int filters, int modes, const double* parts, float* dlog_dt, cudaStream_t stream,
                 const char* who) {
  if (dlog_dt == nullptr) return;
  s4d_carry_log_dt_kernel<<<elementwise_blocks(filters), 256, 0, stream>>>(filters, modes, parts, dlog_dt);
  BRT_CUDA_CHECK_LAUNCH(who);
}

}  // namespace

void launch_s4d_state_advance(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p, const double* h,
                              double* x, bool adjoint, cudaStream_t stream) {
  check_modes(d.modes, "s4d_state_advance");
  const int64_t total = int64_t{d.batch} * d.filters() * d.modes;
  if (total == 0) return;
  s4d_state_advance_kernel<<<elementwise_blocks(total), 256, 0, stream>>>(d, p, h, x, adjoint);
  BRT_CUDA_CHECK_LAUNCH("s4d_state_advance");
}

void launch_s4d_state_apply_grad(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p, const float* dy,
                                 double* g, cudaStream_t stream) {
  check_modes(d.modes, "s4d_state_apply_grad");
  const int64_t total = int64_t{d.batch} * d.filters() * d.modes;
  if (total == 0) return;
  s4d_state_apply_grad_kernel<<<elementwise_blocks(total, 128), 128, 0, stream>>>(d, p, dy, g);
  BRT_CUDA_CHECK_LAUNCH("s4d_state_apply_grad");
}

void launch_s4d_state_advance_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                                       const double* x_prev, const double* gnext, const ssm::S4dGrads<float>& g,
                                       DeviceArena& scratch, cudaStream_t stream) {
  check_modes(d.modes, "s4d_state_advance_backward");
  const int64_t rm = int64_t{d.filters()} * d.modes;
  if (rm == 0) return;
  double* parts = scratch.allocate_array<double>(size_t(rm), "s4d_state_advance_backward dlog_dt");
  s4d_state_advance_backward_kernel<<<elementwise_blocks(rm, 128), 128, 0, stream>>>(d, p, x_prev, gnext, g,
                                                                                       parts);
  BRT_CUDA_CHECK_LAUNCH("s4d_state_advance_backward");
  fold_log_dt(d.filters(), d.modes, parts, g.log_dt, stream, "s4d_state_advance_backward log_dt");
}

void launch_s4d_summary_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p, const float* u,
                                 const double* dh, float* du, const ssm::S4dGrads<float>& g, DeviceArena& scratch,
                                 cudaStream_t stream) {
  check_modes(d.modes, "s4d_summary_backward");
  const int64_t rm = int64_t{d.filters()} * d.modes, elems = int64_t{d.batch} * d.length * d.features;
  if (rm == 0 || d.length == 0) return;
  s4d_summary_du_kernel<<<elementwise_blocks(elems), 256, 0, stream>>>(d, p, dh, du);
  BRT_CUDA_CHECK_LAUNCH("s4d_summary_backward (du)");
  double* parts = scratch.allocate_array<double>(size_t(rm), "s4d_summary_backward dlog_dt");
  s4d_summary_params_kernel<<<elementwise_blocks(rm, 128), 128, 0, stream>>>(d, p, u, dh, g, parts);
  BRT_CUDA_CHECK_LAUNCH("s4d_summary_backward (parameters)");
  fold_log_dt(d.filters(), d.modes, parts, g.log_dt, stream, "s4d_summary_backward log_dt");
}

}  // namespace brt::kernels::cuda
