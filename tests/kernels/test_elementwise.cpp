// gemm, the element-wise helpers, embedding (model.md §1) and ReLU (model.md §4).
#include <cblas.h>
#include <omp.h>

#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"

namespace brt::kernels::test {
namespace {

template <typename T>
void check_gemm(double tol) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  auto be = make_cpu_backend<T>();
  const int M = 13, N = 9, K = 7, pad = 3;
  for (Trans ta : {Trans::N, Trans::T}) {
    for (Trans tb : {Trans::N, Trans::T}) {
      // Stored shapes with row strides wider than the rows (lda > columns).
      const int a_rows = ta == Trans::N ? M : K, a_cols = ta == Trans::N ? K : M;
      const int b_rows = tb == Trans::N ? K : N, b_cols = tb == Trans::N ? N : K;
      const int lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
      const auto a = rng.normal(static_cast<std::size_t>(a_rows) * lda, 1.0);
      const auto b = rng.normal(static_cast<std::size_t>(b_rows) * ldb, 1.0);
      const auto c0 = rng.normal(static_cast<std::size_t>(M) * ldc, 1.0);
      const double alpha = 0.75, beta = -0.5;
      std::vector<double> expected(c0);
      for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
          double s = 0;
          for (int p = 0; p < K; ++p) {
            const double av = ta == Trans::N ? a[i * lda + p] : a[p * lda + i];
            const double bv = tb == Trans::N ? b[p * ldb + j] : b[j * ldb + p];
            s += av * bv;
          }
          expected[i * ldc + j] = alpha * s + beta * c0[i * ldc + j];
        }
      }
      const auto at = cast_to<T>(a), bt = cast_to<T>(b);
      auto c = cast_to<T>(c0);
      be->gemm(ta, tb, M, N, K, T(alpha), at.data(), lda, bt.data(), ldb, T(beta), c.data(), ldc);
      expect_close(c, expected, tol, "gemm");
    }
  }
  std::vector<T> buf(64);
  EXPECT_THROW(be->gemm(Trans::N, Trans::N, 4, 4, 4, T(1), buf.data(), 3, buf.data(), 4, T(0),
                        buf.data(), 4),
               std::runtime_error);
}

// The attention kernels call gemm inside OpenMP regions; only OpenBLAS's OpenMP build then
// runs single-threaded rather than spawning threads that fight the OpenMP team.
TEST(Gemm, OpenBlasIsTheOpenMpBuild) {
  EXPECT_EQ(openblas_get_parallel(), 2) << cpu::blas_description();
  EXPECT_NE(cpu::blas_description().find("OpenMP build: yes"), std::string::npos);
}

TEST(Gemm, MatchesNaiveProductDouble) { check_gemm<double>(1e-13); }
TEST(Gemm, MatchesNaiveProductFloat) { check_gemm<float>(1e-5); }

// Sizes straddle the serial/parallel threshold so both code paths run.
TEST(Elementwise, FillCopyAddScale) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  auto be = make_cpu_backend<double>();
  for (int64_t n : {int64_t{5}, int64_t{100003}}) {
    const auto x = rng.normal(n, 1.0), y0 = rng.normal(n, 1.0);
    std::vector<double> y(y0);
    be->add_inplace(y.data(), x.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], y0[i] + x[i]);
    be->scale_inplace(y.data(), n, 0.5);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], (y0[i] + x[i]) * 0.5);
    be->copy(x.data(), n, y.data());
    EXPECT_EQ(y, x);
    be->fill(y.data(), n, 3.25);
    for (double e : y) ASSERT_EQ(e, 3.25);
  }
}

TEST(Elementwise, ColumnSumAndBroadcast) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  auto be = make_cpu_backend<double>();
  for (auto [n, D] : {std::pair{3, 5}, std::pair{700, 200}}) {
    const auto dz = rng.normal(static_cast<std::size_t>(n) * D, 1.0);
    const auto db0 = rng.normal(D, 1.0);
    std::vector<double> expected(db0), db(db0);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < D; ++j) expected[j] += dz[i * D + j];
    }
    be->column_sum_accumulate(dz.data(), n, D, db.data());
    expect_close(db, expected, 1e-13, "column_sum");

    const int rows_table = 3;
    const auto table = rng.normal(static_cast<std::size_t>(rows_table) * D, 1.0);
    std::vector<double> out(dz), want(dz);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < D; ++j) want[i * D + j] += table[(i % rows_table) * D + j];
    }
    be->add_rows_broadcast(out.data(), table.data(), n, rows_table, D);
    expect_close(out, want, 1e-15, "add_rows_broadcast");
  }
}

// n tokens drawn uniformly from [0, V).
std::vector<int32_t> random_tokens(Rng& rng, int n, int V) {
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = rng.uniform_int(0, V - 1);
  return tokens;
}

TEST(Embedding, ForwardGathersAndBackwardMatchesFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  auto be = make_cpu_backend<double>();
  const int V = 7, D = 5, n = 12;
  std::vector<int32_t> tokens = random_tokens(rng, n, V);
  tokens[3] = tokens[8] = 2;  // repeated tokens accumulate into one row
  std::vector<double> table = rng.normal(static_cast<std::size_t>(V) * D, 1.0);
  std::vector<double> out(static_cast<std::size_t>(n) * D, -1.0);
  be->embedding_forward(tokens.data(), n, table.data(), D, out.data());
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < D; ++j) ASSERT_EQ(out[i * D + j], table[tokens[i] * D + j]);
  }
  const auto weights = rng.normal(out.size(), 1.0);
  std::vector<double> dtable(table.size(), 0.0);
  be->embedding_backward(tokens.data(), n, weights.data(), D, dtable.data());
  const auto objective = [&] {
    be->embedding_forward(tokens.data(), n, table.data(), D, out.data());
    return dot(out, weights);
  };
  expect_gradient(objective, &table, dtable, "table");
}

TEST(Embedding, BackwardLargeIsThreadCountIndependent) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  auto be = make_cpu_backend<float>();
  const int V = 50, D = 300, n = 2000;
  const std::vector<int32_t> tokens = random_tokens(rng, n, V);
  const auto dout = cast_to<float>(rng.normal(static_cast<std::size_t>(n) * D, 1.0));
  std::vector<double> expected(static_cast<std::size_t>(V) * D, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < D; ++j) expected[tokens[i] * D + j] += dout[i * D + j];
  }
  std::vector<float> a(expected.size(), 0.0f), b(expected.size(), 0.0f);
  be->embedding_backward(tokens.data(), n, dout.data(), D, a.data());
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  be->embedding_backward(tokens.data(), n, dout.data(), D, b.data());
  omp_set_num_threads(threads);
  expect_close(a, expected, 1e-5, "dtable");
  EXPECT_EQ(a, b);
}

TEST(Relu, ForwardAndBackward) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  auto be = make_cpu_backend<double>();
  const int64_t n = 40;
  std::vector<double> x = rng.normal(n, 1.0);
  for (double& e : x) e += e > 0 ? 0.01 : -0.01;  // keep clear of the kink for differences
  std::vector<double> y(n);
  be->relu_forward(x.data(), n, y.data());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] > 0 ? x[i] : 0.0);
  const auto weights = rng.normal(n, 1.0);
  std::vector<double> dx(n, 7.0);  // written, not accumulated
  be->relu_backward(y.data(), weights.data(), n, dx.data());
  const auto objective = [&] {
    be->relu_forward(x.data(), n, y.data());
    return dot(y, weights);
  };
  expect_gradient(objective, &x, dx, "x");
  be->relu_forward(x.data(), n, y.data());
  std::vector<double> inplace(x);
  be->relu_forward(inplace.data(), n, inplace.data());  // y may alias x
  EXPECT_EQ(inplace, y);
  std::vector<double> dy_inplace(weights);
  be->relu_backward(y.data(), dy_inplace.data(), n, dy_inplace.data());  // dx may alias dy
  EXPECT_EQ(dy_inplace, dx);
}

}  // namespace
}  // namespace brt::kernels::test
