// Cross-attention without position bias, optionally causal (model.md §3.4, §7.2): batched
// problems addressed by strides (CrossAttnDims). Forward parallelises over
// (batch, head, query panel); backward over heads only, with batch entries in order inside,
// so K/V gradients stay race-free even when batch entries share K and V (kv_stride == 0)
// and the scale gradient needs no cross-thread reduction.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/cpu/attention_common.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu_parallel.h"

namespace brt::kernels::cpu {

namespace {

void validate(const CrossAttnDims& d, const char* who) {
  if (d.batch <= 0 || d.queries <= 0 || d.keys <= 0 || d.heads <= 0 || d.head_dim <= 0 ||
      d.q_stride < 0 || d.kv_stride < 0) {
    throw std::runtime_error(std::string("kernels/cpu ") + who + ": invalid dims batch=" +
                             std::to_string(d.batch) + " queries=" + std::to_string(d.queries) +
                             " keys=" + std::to_string(d.keys) + " heads=" +
                             std::to_string(d.heads) + " head_dim=" +
                             std::to_string(d.head_dim));
  }
}

// Keys visible to query row i: all, or 0..i when causal.
inline int visible_keys(const CrossAttnDims& d, int i) {
  return d.causal ? std::min(i + 1, d.keys) : d.keys;
}

// Multiply-adds of one forward: sizes the OpenMP decision.
inline int64_t multiply_adds(const CrossAttnDims& d) {
  return int64_t{d.batch} * d.heads * d.queries * d.keys * 2 * d.head_dim;
}

}  // namespace

template <typename T>
void CrossAttentionOps<T>::forward(const CpuOptions& opt, const CrossAttnDims& d, const T* q,
                                   const T* k, const T* v, const T* scale, T* out, T* probs) {
  validate(d, "cross_attention_forward");
  const int A = d.width(), nq = d.queries, nk = d.keys, dh = d.head_dim;
  const int c = std::max(1, std::min(opt.cross_panel_rows, nq));
  const int panels = (nq + c - 1) / c;
  const int64_t tasks = int64_t{d.batch} * d.heads * panels;

#pragma omp parallel for schedule(static) if (multiply_adds(d) >= kParallelMinGemmWork)
  for (int64_t task = 0; task < tasks; ++task) {
    const int p = static_cast<int>(task % panels);
    const int h = static_cast<int>(task / panels % d.heads);
    const int b = static_cast<int>(task / (int64_t{panels} * d.heads));
    const int i0 = p * c;
    const int rows = std::min(c, nq - i0);
    const int cols = visible_keys(d, i0 + rows - 1);  // keys any row of the panel sees
    const int64_t qoff = b * d.q_stride + int64_t{i0} * A + h * dh;
    const int64_t kvoff = b * d.kv_stride + h * dh;
    T* panel_probs = probs + ((int64_t{b} * d.heads + h) * nq + i0) * nk;
    const T s = scale[h];

    blas_gemm(Trans::N, Trans::T, rows, cols, dh, s, q + qoff, A, k + kvoff, A, T(0),
              panel_probs, nk);
    for (int r = 0; r < rows; ++r) {
      T* row = panel_probs + int64_t{r} * nk;
      const int live = visible_keys(d, i0 + r);
      for (int j = live; j < nk; ++j) row[j] = T(0);
      T row_max = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : row_max)
      for (int j = 0; j < live; ++j) row_max = row[j] > row_max ? row[j] : row_max;
      double sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < live; ++j) {
        row[j] = exp_t(row[j] - row_max);
        sum += static_cast<double>(row[j]);
      }
      const T inv = static_cast<T>(1.0 / sum);
#pragma omp simd
      for (int j = 0; j < live; ++j) row[j] *= inv;
    }
    blas_gemm(Trans::N, Trans::N, rows, dh, cols, T(1), panel_probs, nk, v + kvoff, A, T(0),
              out + qoff, A);
  }
}

// l = s * Q.K^T, P = softmax(l): dl = P * (dP - <P, dP>), dP = dout . V^T, dV += P^T . dout,
// dQ += s * dl . K, dK += s * dl^T . Q, dscale += sum dl * Q.K^T = sum_i <Q_i, (dl . K)_i>.
template <typename T>
void CrossAttentionOps<T>::backward(Workspace<T>& ws, const CpuOptions& opt,
                                    const CrossAttnDims& d, const T* q, const T* k, const T* v,
                                    const T* scale, const T* probs, const T* dout, T* dq, T* dk,
                                    T* dv, T* dscale) {
  validate(d, "cross_attention_backward");
  const int A = d.width(), nq = d.queries, nk = d.keys, dh = d.head_dim;
  const int c = std::max(1, std::min(opt.cross_panel_rows, nq));
  const int panels = (nq + c - 1) / c;
  const std::size_t dlogit_elems = static_cast<std::size_t>(c) * nk;
  ws.prepare_threads(omp_get_max_threads(), dlogit_elems + static_cast<std::size_t>(c) * dh, 0);

#pragma omp parallel for schedule(static) if (multiply_adds(d) >= kParallelMinGemmWork)
  for (int h = 0; h < d.heads; ++h) {
    auto& slot = ws.thread_slot(omp_get_thread_num());
    T* dlogit = slot.values.data();             // [rows, cols]
    T* grad_q = dlogit + dlogit_elems;          // [rows, dh]
    const T s = scale[h];
    double dscale_sum = 0;
    for (int b = 0; b < d.batch; ++b) {
      const int64_t kvoff = b * d.kv_stride + h * dh;
      for (int p = 0; p < panels; ++p) {
        const int i0 = p * c;
        const int rows = std::min(c, nq - i0);
        const int cols = visible_keys(d, i0 + rows - 1);
        const int64_t qoff = b * d.q_stride + int64_t{i0} * A + h * dh;
        const T* panel_probs = probs + ((int64_t{b} * d.heads + h) * nq + i0) * nk;

        blas_gemm(Trans::N, Trans::T, rows, cols, dh, T(1), dout + qoff, A, v + kvoff, A, T(0),
                  dlogit, cols);
        blas_gemm(Trans::T, Trans::N, cols, dh, rows, T(1), panel_probs, nk, dout + qoff, A,
                  T(1), dv + kvoff, A);
        for (int r = 0; r < rows; ++r) {
          const T* prow = panel_probs + int64_t{r} * nk;
          T* drow = dlogit + int64_t{r} * cols;
          const int live = visible_keys(d, i0 + r);
          double dot = 0;
#pragma omp simd reduction(+ : dot)
          for (int j = 0; j < live; ++j) dot += static_cast<double>(prow[j]) * drow[j];
          const T dot_t = static_cast<T>(dot);
#pragma omp simd
          for (int j = 0; j < live; ++j) drow[j] = prow[j] * (drow[j] - dot_t);
          for (int j = live; j < cols; ++j) drow[j] = T(0);
        }
        blas_gemm(Trans::N, Trans::N, rows, dh, cols, T(1), dlogit, cols, k + kvoff, A, T(0),
                  grad_q, dh);
        blas_gemm(Trans::T, Trans::N, cols, dh, rows, s, dlogit, cols, q + qoff, A, T(1),
                  dk + kvoff, A);
        dscale_sum += accumulate_query_grad(q + qoff, dq + qoff, grad_q, rows, dh, A, s);
      }
    }
    dscale[h] += static_cast<T>(dscale_sum);
  }
}

template struct CrossAttentionOps<float>;
template struct CrossAttentionOps<double>;

}  // namespace brt::kernels::cpu
