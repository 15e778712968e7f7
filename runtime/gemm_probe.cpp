#include "runtime/gemm_probe.h"

#include <cblas.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>

namespace brt::runtime {

namespace {

uint64_t fnv1a(uint64_t h, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

// Uniform in [-1, 1) from a 64-bit LCG: the same inputs on every machine.
template <typename T>
std::vector<T> seeded(size_t n, unsigned seed) {
  std::vector<T> v(n);
  uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = T(double(s >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
  return v;
}

CBLAS_TRANSPOSE cblas_trans(char t) { return t == 'T' ? CblasTrans : CblasNoTrans; }

// C = op(A) op(B) by the library and the float64/long double reference with its bound.
template <typename T>
CaseCheck check_case(const GemmProbeCase& c, unsigned seed) {
  const int m = c.m, n = c.n, k = c.k;
  const std::vector<T> a = seeded<T>(size_t(m) * k, seed), b = seeded<T>(size_t(k) * n, seed + 100);
  std::vector<T> out(size_t(m) * n, T(0));
  const int lda = c.trans_a == 'T' ? m : k, ldb = c.trans_b == 'T' ? k : n;
  auto at = [&](int i, int p) { return c.trans_a == 'T' ? a[size_t(p) * m + i] : a[size_t(i) * k + p]; };
  auto bt = [&](int p, int j) { return c.trans_b == 'T' ? b[size_t(j) * k + p] : b[size_t(p) * n + j]; };
  if constexpr (sizeof(T) == 8) {
    cblas_dgemm(CblasRowMajor, cblas_trans(c.trans_a), cblas_trans(c.trans_b), m, n, k, 1.0, (const double*)a.data(),
                lda, (const double*)b.data(), ldb, 0.0, (double*)out.data(), n);
  } else if (c.gemv) {
    // y = op(A) x with A stored m x k (trans N) or k x m (trans T); x = b's first column.
    std::vector<float> x(static_cast<size_t>(k));
    for (int p = 0; p < k; ++p) x[size_t(p)] = float(bt(p, 0));
    const int rows = c.trans_a == 'T' ? k : m, cols = c.trans_a == 'T' ? m : k;
    cblas_sgemv(CblasRowMajor, cblas_trans(c.trans_a), rows, cols, 1.0f, (const float*)a.data(), cols, x.data(), 1,
                0.0f, (float*)out.data(), 1);
  } else {
    cblas_sgemm(CblasRowMajor, cblas_trans(c.trans_a), cblas_trans(c.trans_b), m, n, k, 1.0f, (const float*)a.data(),
                lda, (const float*)b.data(), ldb, 0.0f, (float*)out.data(), n);
  }
  const double u = sizeof(T) == 8 ? 0x1.0p-53 : 0x1.0p-24;
  const double gamma = (k + 2) * u / (1 - (k + 2) * u);
  CaseCheck check;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      long double ref = 0, mag = 0;
      for (int p = 0; p < k; ++p) {
        const long double x = at(i, p), y = bt(p, j);
        ref += x * y;
        mag += std::fabs(x * y);
      }
      const double bound = gamma * double(mag) + 1e-300;
      const double err = std::fabs(double(out[size_t(i) * n + j] - ref));
      check.worst_ratio = std::max(check.worst_ratio, std::isfinite(err) ? err / bound : INFINITY);
    }
  check.hash = fnv1a(1469598103934665603ull, out.data(), out.size() * sizeof(T));
  return check;
}

}  // namespace

const std::vector<GemmProbeCase>& gemm_probe_cases() {
  static const std::vector<GemmProbeCase> cases = {
      {'N', 'N', 33, 47, 1000, false, false},  // odd edges, K over several blocks
      {'N', 'T', 64, 96, 2000, false, false},  // x·Wᵀ (the projections' form)
      {'T', 'N', 96, 64, 700, false, false},   // dW = dYᵀ·X
      {'N', 'N', 8, 8, 64, false, false},      // a small product (OpenBLAS's small-matrix path)
      {'N', 'N', 1, 300, 900, false, false},   // one row: may run as gemv
      {'N', 'N', 300, 1, 900, false, false},
      {'N', 'N', 500, 1, 700, false, true},    // sgemv, both forms
      {'T', 'N', 500, 1, 700, false, true},
      {'N', 'T', 40, 40, 2000, true, false},   // dgemm (train.precision = fp64)
  };
  return cases;
}

CaseCheck run_probe_case(const GemmProbeCase& c, unsigned seed) {
  return c.fp64 ? check_case<double>(c, seed) : check_case<float>(c, seed);
}

GemmProbe run_gemm_probe() {
  uint64_t hash = 1469598103934665603ull;
  double worst = 0;
  std::string failed;
  const auto& cases = gemm_probe_cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    const GemmProbeCase& c = cases[i];
    const CaseCheck r = run_probe_case(c, unsigned(i));
    hash = fnv1a(hash, &r.hash, sizeof r.hash);
    worst = std::max(worst, r.worst_ratio);
    if (!(r.worst_ratio <= 1.0) && failed.empty()) {
      char what[160];
      std::snprintf(what, sizeof what, "%s %c%c %dx%dx%d is %.3g times its rounding bound off a reference",
                    c.gemv ? "sgemv" : c.fp64 ? "dgemm" : "sgemm", c.trans_a, c.trans_b, c.m, c.n, c.k, r.worst_ratio);
      failed = what;
    }
  }
  GemmProbe probe;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hash);
  probe.hash = hex;
  char ok[96];
  std::snprintf(ok, sizeof ok, "ok (worst %.3g of the rounding bound, %zu products)", worst, cases.size());
  probe.check = failed.empty() ? std::string(ok) : "FAILED: " + failed;
  return probe;
}

}  // namespace brt::runtime
