// The BLAS core this process runs (whatever OPENBLAS_CORETYPE or OpenBLAS's detection chose;
// docs/reliability.md "Which BLAS core") computes correct sgemm/sgemv/dgemm results for the
// products the models make (kernels/cpu/blas.h; model.md §9 shapes, reduced in M so the
// reference stays fast): projections x·Wᵀ (K = D up to 2048, N = the MLP's 4D and the
// vocabulary's wide N), weight gradients dYᵀ·X, attention tiles (K = head dim or 2W), thin
// products, beta = 1 accumulation (backward) and odd edges.
//
// Contract: each element within gamma_(K+2) * sum_k |a_ik b_kj| (+ |beta c|'s rounding) of a
// long-double reference, the rigorous bound on fp32 (u = 2^-24) or fp64 (2^-53) dot products in
// any summation order — a core that breaks it computes wrong results. Run under every core the
// CPU supports by ctest -L portability (tests/numerics/run_under_cores.sh).
#include <cblas.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/gemm_probe.h"

namespace {

struct Product {
  const char* what;
  char ta, tb;
  int m, n, k;
  float beta;
};

template <typename T>
std::vector<T> uniform(size_t n, uint64_t seed) {
  std::vector<T> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = T(double(s >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
  return v;
}

// Worst |C - reference| / bound over the product's outputs.
template <typename T>
double worst_ratio(const Product& p, uint64_t seed) {
  const std::vector<T> a = uniform<T>(size_t(p.m) * p.k, seed), b = uniform<T>(size_t(p.k) * p.n, seed + 1);
  const std::vector<T> c0 = uniform<T>(size_t(p.m) * p.n, seed + 2);
  std::vector<T> c = c0;
  const int lda = p.ta == 'T' ? p.m : p.k, ldb = p.tb == 'T' ? p.k : p.n;
  const auto ta = p.ta == 'T' ? CblasTrans : CblasNoTrans, tb = p.tb == 'T' ? CblasTrans : CblasNoTrans;
  if constexpr (sizeof(T) == 4)
    cblas_sgemm(CblasRowMajor, ta, tb, p.m, p.n, p.k, 1.0f, a.data(), lda, b.data(), ldb, p.beta, c.data(), p.n);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, p.m, p.n, p.k, 1.0, a.data(), lda, b.data(), ldb, p.beta, c.data(), p.n);
  const double u = sizeof(T) == 8 ? 0x1.0p-53 : 0x1.0p-24, gamma = (p.k + 3) * u / (1 - (p.k + 3) * u);
  double worst = 0;
  for (int i = 0; i < p.m; ++i)
    for (int j = 0; j < p.n; ++j) {
      long double ref = (long double)p.beta * c0[size_t(i) * p.n + j], mag = std::fabs(ref);
      for (int q = 0; q < p.k; ++q) {
        const long double x = p.ta == 'T' ? a[size_t(q) * p.m + i] : a[size_t(i) * p.k + q];
        const long double y = p.tb == 'T' ? b[size_t(j) * p.k + q] : b[size_t(q) * p.n + j];
        ref += x * y;
        mag += std::fabs(x * y);
      }
      const double err = std::fabs(double(c[size_t(i) * p.n + j] - ref));
      worst = std::max(worst, std::isfinite(err) ? err / (gamma * double(mag) + 1e-300) : INFINITY);
    }
  return worst;
}

const Product kProducts[] = {
    {"projection x·Wᵀ, D 512", 'N', 'T', 64, 512, 512, 0.0f},
    {"projection x·Wᵀ, D 2048 (1.3b)", 'N', 'T', 16, 256, 2048, 0.0f},
    {"MLP up x·W1ᵀ, 4D", 'N', 'T', 32, 2048, 512, 0.0f},
    {"LM head, vocab 32128", 'N', 'T', 4, 32128, 128, 0.0f},
    {"input gradient dY·W (beta 1)", 'N', 'N', 64, 512, 512, 1.0f},
    {"weight gradient dYᵀ·X (beta 1)", 'T', 'N', 256, 128, 512, 1.0f},
    {"attention scores Q·Kᵀ, head 64, 2W 256", 'N', 'T', 128, 256, 64, 0.0f},
    {"attention values P·V, 2W 1024", 'N', 'N', 64, 64, 1024, 0.0f},
    {"attention dP = dO·Vᵀ", 'N', 'T', 128, 256, 32, 0.0f},
    {"both transposed", 'T', 'T', 96, 80, 300, 1.0f},
    {"odd edges", 'N', 'N', 33, 47, 1001, 0.0f},
    {"small (small-matrix kernels)", 'N', 'N', 8, 8, 16, 1.0f},
    {"one row (gemv route)", 'N', 'T', 1, 700, 900, 0.0f},
    {"one column (gemv route)", 'N', 'N', 700, 1, 900, 1.0f},
};

class BlasCore : public ::testing::TestWithParam<Product> {};

TEST_P(BlasCore, SgemmWithinFp32RoundingOfTheReference) {
  const Product& p = GetParam();
  const double r = worst_ratio<float>(p, 7);
  EXPECT_LE(r, 1.0) << p.what << " under OpenBLAS core " << openblas_get_corename() << ": " << r
                    << " times the fp32 rounding bound";
}

TEST_P(BlasCore, DgemmWithinFp64RoundingOfTheReference) {
  Product p = GetParam();
  if (p.n > 4096) p.n = 4096;  // the float64 reference of the widest product is enough at 4096
  const double r = worst_ratio<double>(p, 11);
  EXPECT_LE(r, 1.0) << p.what << " under OpenBLAS core " << openblas_get_corename() << ": " << r
                    << " times the fp64 rounding bound";
}

INSTANTIATE_TEST_SUITE_P(ModelProducts, BlasCore, ::testing::ValuesIn(kProducts));

// sgemv itself, both forms and beta 1, lengths across OpenBLAS's blocking.
TEST(BlasCoreGemv, SgemvWithinFp32RoundingOfTheReference) {
  for (const int rows : {7, 300, 2048})
    for (const int cols : {5, 512, 3000})
      for (const auto trans : {CblasNoTrans, CblasTrans}) {
        const std::vector<float> a = uniform<float>(size_t(rows) * cols, 3);
        const int in = trans == CblasNoTrans ? cols : rows, out = trans == CblasNoTrans ? rows : cols;
        const std::vector<float> x = uniform<float>(size_t(in), 4), y0 = uniform<float>(size_t(out), 5);
        std::vector<float> y = y0;
        cblas_sgemv(CblasRowMajor, trans, rows, cols, 1.0f, a.data(), cols, x.data(), 1, 1.0f, y.data(), 1);
        const double gamma = (in + 3) * 0x1.0p-24;
        for (int i = 0; i < out; ++i) {
          long double ref = y0[size_t(i)], mag = std::fabs(ref);
          for (int q = 0; q < in; ++q) {
            const long double e = trans == CblasNoTrans ? a[size_t(i) * cols + q] : a[size_t(q) * cols + i];
            ref += e * x[size_t(q)];
            mag += std::fabs(e * x[size_t(q)]);
          }
          ASSERT_LE(std::fabs(double(y[size_t(i)] - ref)), gamma * double(mag))
              << "sgemv " << (trans == CblasNoTrans ? "N" : "T") << " " << rows << "x" << cols << " element " << i
              << " under OpenBLAS core " << openblas_get_corename();
        }
      }
}

// The start-up probe (runtime/gemm_probe.h) passes its own check under this core, and its bits
// are a function of the core and threads alone: two runs in one process give the same hash.
TEST(BlasCoreProbe, PassesItsCheckAndIsRepeatable) {
  const brt::runtime::GemmProbe a = brt::runtime::run_gemm_probe(), b = brt::runtime::run_gemm_probe();
  EXPECT_EQ(a.check.rfind("ok", 0), 0u) << a.check;
  EXPECT_EQ(a.hash, b.hash);
}

}  // namespace
