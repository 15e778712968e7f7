// Row-major CBLAS gemm for float and double. Inside an OpenMP parallel region the OpenMP
// build of OpenBLAS runs single-threaded (it checks omp_in_parallel()), which is what the
// attention kernels rely on when they call gemm per (batch, head, panel) tile.
#pragma once

#include <cblas.h>

#include "kernels/backend.h"

namespace brt::kernels::cpu {

inline CBLAS_TRANSPOSE to_cblas(Trans t) { return t == Trans::N ? CblasNoTrans : CblasTrans; }

inline void blas_gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A,
                      int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  cblas_sgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), M, N, K, alpha, A, lda, B, ldb, beta,
              C, ldc);
}

inline void blas_gemm(Trans ta, Trans tb, int M, int N, int K, double alpha, const double* A,
                      int lda, const double* B, int ldb, double beta, double* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  cblas_dgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), M, N, K, alpha, A, lda, B, ldb, beta,
              C, ldc);
}

}  // namespace brt::kernels::cpu
