#include "runtime/gemm_peak.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "kernels/backend.h"

namespace brt::runtime {

GemmPeak measure_sgemm_peak(int n, int calls) {
  auto be = kernels::make_cpu_backend<float>();
  const size_t nn = size_t(n) * n;
  std::vector<float> a(nn, 0.5f), b(nn, 0.25f), c(nn, 0.0f);
  for (size_t i = 0; i < nn; ++i) a[i] = float(i % 17) * 0.01f, b[i] = float(i % 13) * 0.02f;
  be->gemm(kernels::Trans::N, kernels::Trans::N, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  std::vector<double> rates;
  for (int i = 0; i < calls; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    be->gemm(kernels::Trans::N, kernels::Trans::N, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(2.0 * double(n) * n * n / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  GemmPeak p;
  p.gflops = rates[rates.size() / 2];
  p.best_gflops = rates.back();
  p.size = n;
  p.calls = calls;
  p.threads = omp_get_max_threads();
  return p;
}

}  // namespace brt::runtime
