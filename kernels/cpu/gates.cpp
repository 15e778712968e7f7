// Recurrent-state gates (model.md §5.3).
#include <algorithm>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu_parallel.h"

namespace brt::kernels::cpu {

// 'fixed': g = sigmoid(bias[d]); out = carry*g + u*(1-g). Threads own column chunks so each
// gate value is computed once per call, and dbias (backward) sums rows in a fixed order.
template <typename T>
void GateOps<T>::fixed_forward(const T* carry, const T* u, const T* bias, int n, int D, T* out) {
  const int chunks = (D + kColumnChunk - 1) / kColumnChunk;
#pragma omp parallel for schedule(static) if (int64_t{n} * D >= kParallelMinWork && chunks > 1)
  for (int c = 0; c < chunks; ++c) {
    const int j0 = c * kColumnChunk;
    const int width = std::min(D - j0, kColumnChunk);
    T g[kColumnChunk];
    for (int j = 0; j < width; ++j) g[j] = sigmoid(bias[j0 + j]);
    for (int i = 0; i < n; ++i) {
      const int64_t o = static_cast<int64_t>(i) * D + j0;
#pragma omp simd
      for (int j = 0; j < width; ++j) out[o + j] = carry[o + j] * g[j] + u[o + j] * (T(1) - g[j]);
    }
  }
}

// dcarry += dout*g; du += dout*(1-g); dbias += sum_i dout*(carry-u)*g*(1-g).
template <typename T>
void GateOps<T>::fixed_backward(const T* carry, const T* u, const T* bias, const T* dout, int n,
                                int D, T* dcarry, T* du, T* dbias) {
  const int chunks = (D + kColumnChunk - 1) / kColumnChunk;
#pragma omp parallel for schedule(static) if (int64_t{n} * D >= kParallelMinWork && chunks > 1)
  for (int c = 0; c < chunks; ++c) {
    const int j0 = c * kColumnChunk;
    const int width = std::min(D - j0, kColumnChunk);
    T g[kColumnChunk];
    double dg[kColumnChunk] = {};  // d out / d g summed over rows
    for (int j = 0; j < width; ++j) g[j] = sigmoid(bias[j0 + j]);
    for (int i = 0; i < n; ++i) {
      const int64_t o = static_cast<int64_t>(i) * D + j0;
#pragma omp simd
      for (int j = 0; j < width; ++j) {
        const T d = dout[o + j];
        dcarry[o + j] += d * g[j];
        du[o + j] += d * (T(1) - g[j]);
        dg[j] += static_cast<double>(d * (carry[o + j] - u[o + j]));
      }
    }
    for (int j = 0; j < width; ++j) {
      dbias[j0 + j] += static_cast<T>(dg[j] * g[j] * (1.0 - g[j]));
    }
  }
}

// 'lstm': f = sigmoid(zf + 1), i = sigmoid(zi - 1), out = carry*f + u*i.
template <typename T>
void GateOps<T>::lstm_forward(const T* carry, const T* u, const T* zf, const T* zi, int n,
                              int D, T* out, T* f, T* i) {
  const int64_t total = int64_t{n} * D;
#pragma omp parallel for schedule(static) if (total >= kParallelMinWork)
  for (int64_t e = 0; e < total; ++e) {
    const T fe = sigmoid(zf[e] + T(1));
    const T ie = sigmoid(zi[e] - T(1));
    f[e] = fe;
    i[e] = ie;
    out[e] = carry[e] * fe + u[e] * ie;
  }
}

// dcarry += dout*f; du += dout*i; dzf += dout*carry*f(1-f); dzi += dout*u*i(1-i).
template <typename T>
void GateOps<T>::lstm_backward(const T* carry, const T* u, const T* f, const T* i,
                               const T* dout, int n, int D, T* dcarry, T* du, T* dzf, T* dzi) {
  const int64_t total = int64_t{n} * D;
#pragma omp parallel for simd schedule(static) if (total >= kParallelMinWork)
  for (int64_t e = 0; e < total; ++e) {
    const T g = dout[e];
    dcarry[e] += g * f[e];
    du[e] += g * i[e];
    dzf[e] += g * carry[e] * f[e] * (T(1) - f[e]);
    dzi[e] += g * u[e] * i[e] * (T(1) - i[e]);
  }
}

template struct GateOps<float>;
template struct GateOps<double>;

}  // namespace brt::kernels::cpu
