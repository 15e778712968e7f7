// RMSNorm (model.md §2) and the per-head L2 normalisation of queries and keys (model.md §3.1).
#include <cmath>

#include "kernels/cpu/ops.h"
#include "kernels/cpu_parallel.h"

namespace brt::kernels::cpu {

namespace {
constexpr double kRmsEps = 1e-6;  // model.md §2
constexpr double kL2Eps = 1e-6;   // model.md §3.1
}  // namespace

// y = x * rsqrt(mean(x^2) + 1e-6) * gamma; the mean is accumulated in double.
template <typename T>
void NormOps<T>::rmsnorm_forward(const T* x, const T* gamma, int n, int D, T* y, T* rstd) {
#pragma omp parallel for schedule(static) if (int64_t{n} * D >= kParallelMinWork)
  for (int i = 0; i < n; ++i) {
    const T* xr = x + static_cast<int64_t>(i) * D;
    T* yr = y + static_cast<int64_t>(i) * D;
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int j = 0; j < D; ++j) ss += static_cast<double>(xr[j]) * xr[j];
    const T r = static_cast<T>(1.0 / std::sqrt(ss / D + kRmsEps));
    rstd[i] = r;
#pragma omp simd
    for (int j = 0; j < D; ++j) yr[j] = xr[j] * r * gamma[j];
  }
}

// With r = rstd: dx_j += r*gamma_j*dy_j - x_j * r^3/D * sum_k gamma_k dy_k x_k;
// dgamma_j += sum_i dy_ij x_ij r_i (a separate column pass keeps it deterministic).
template <typename T>
void NormOps<T>::rmsnorm_backward(const T* x, const T* gamma, const T* rstd, const T* dy, int n,
                                  int D, T* dx, T* dgamma) {
  rmsnorm_backward_residual(x, gamma, rstd, dy, nullptr, true, n, D, dx, dgamma);
}

// dx = base + (r*gamma_j*dy_j - x_j*coef), base as kernels/backend.h says: the additions of
// fill / copy / add_inplace followed by the accumulating form, in the same order, so the one
// pass equals them bit for bit.
template <typename T>
void NormOps<T>::rmsnorm_backward_residual(const T* x, const T* gamma, const T* rstd, const T* dy,
                                           const T* residual, bool accumulate, int n, int D, T* dx,
                                           T* dgamma) {
#pragma omp parallel for schedule(static) if (int64_t{n} * D >= kParallelMinWork)
  for (int i = 0; i < n; ++i) {
    const int64_t row = static_cast<int64_t>(i) * D;
    const T* xr = x + row;
    const T* dyr = dy + row;
    T* dxr = dx + row;
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < D; ++j) dot += static_cast<double>(gamma[j]) * dyr[j] * xr[j];
    const T r = rstd[i];
    const T coef = static_cast<T>(dot * static_cast<double>(r) * r * r / D);
    const T* res = residual != nullptr ? residual + row : nullptr;
    if (accumulate && res != nullptr) {
#pragma omp simd
      for (int j = 0; j < D; ++j) dxr[j] = (dxr[j] + res[j]) + (r * gamma[j] * dyr[j] - xr[j] * coef);
    } else if (accumulate) {
#pragma omp simd
      for (int j = 0; j < D; ++j) dxr[j] += r * gamma[j] * dyr[j] - xr[j] * coef;
    } else if (res != nullptr) {
#pragma omp simd
      for (int j = 0; j < D; ++j) dxr[j] = res[j] + (r * gamma[j] * dyr[j] - xr[j] * coef);
    } else {
#pragma omp simd
      for (int j = 0; j < D; ++j) dxr[j] = T(0) + (r * gamma[j] * dyr[j] - xr[j] * coef);  // 0 + t: as the fill
    }
  }
  column_reduce_accumulate(n, D, dgamma, [=](int i, int j) {
    const int64_t at = static_cast<int64_t>(i) * D + j;
    return dy[at] * x[at] * rstd[i];
  });
}

template <typename T>
void NormOps<T>::head_l2norm_forward(const T* x, int n, int H, int dh, T* y, T* rnorm) {
  const int64_t rows = int64_t{n} * H;  // one (position, head) pair per "row" of dh
#pragma omp parallel for schedule(static) if (rows * dh >= kParallelMinWork)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * dh;
    T* yr = y + r * dh;
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int j = 0; j < dh; ++j) ss += static_cast<double>(xr[j]) * xr[j];
    const T rn = static_cast<T>(1.0 / std::sqrt(ss + kL2Eps));
    rnorm[r] = rn;
#pragma omp simd
    for (int j = 0; j < dh; ++j) yr[j] = xr[j] * rn;  // y may alias x: element-wise is safe
  }
}

// dx = rnorm * (dy - y * <y, dy>) per (position, head), written.
template <typename T>
void NormOps<T>::head_l2norm_backward(const T* y, const T* rnorm, const T* dy, int n, int H,
                                      int dh, T* dx) {
  const int64_t rows = int64_t{n} * H;
#pragma omp parallel for schedule(static) if (rows * dh >= kParallelMinWork)
  for (int64_t r = 0; r < rows; ++r) {
    const T* yr = y + r * dh;
    const T* dyr = dy + r * dh;
    T* dxr = dx + r * dh;
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < dh; ++j) dot += static_cast<double>(yr[j]) * dyr[j];
    const T rn = rnorm[r];
    const T d = static_cast<T>(dot);
#pragma omp simd
    for (int j = 0; j < dh; ++j) dxr[j] = rn * (dyr[j] - yr[j] * d);
  }
}

template struct NormOps<float>;
template struct NormOps<double>;

}  // namespace brt::kernels::cpu
