// Sliding-window token self-attention with the T5 relative bias (model.md §3.2, §3.3).
// Tiling and layout: window_geometry.h. Forward parallelises over (batch, block, head, panel)
// tiles; backward over (batch, head) with the blocks in order inside, because window rows of
// block t receive key/value gradients from block t and from block t+1.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/attention_common.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu_parallel.h"
#include "kernels/cpu/window_geometry.h"

namespace brt::kernels::cpu {

namespace {

// rev_bias[h*W + m] = rel_bias[h, bucket(W - m)]: the bias of the live entry m of a query row
// (window key q + m sits at distance q + W - (q + m) = W - m, model.md §3.3).
template <typename T>
void fill_reversed_bias(const WindowGeometry& g, const T* rel_bias, T* rev_bias, int* bucket) {
  for (int m = 0; m < g.W; ++m) bucket[m] = t5_bucket(g.W - m);
  for (int h = 0; h < g.H; ++h) {
    for (int m = 0; m < g.W; ++m) rev_bias[h * g.W + m] = rel_bias[h * kT5Buckets + bucket[m]];
  }
}

// One query row of a panel, in place: live[m] holds the raw score Q.K of window key q + m;
// it becomes softmax((raw + bias) * s). The masked band entries before and after the W live
// ones (band_before and band_after of them) are set to exact zeros.
template <typename T>
void softmax_row(T* live, int W, int band_before, int band_after, const T* rev_bias, T s) {
  for (int j = -band_before; j < 0; ++j) live[j] = T(0);
  for (int j = W; j < W + band_after; ++j) live[j] = T(0);
  T row_max = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : row_max)
  for (int m = 0; m < W; ++m) {
    live[m] = (live[m] + rev_bias[m]) * s;
    row_max = live[m] > row_max ? live[m] : row_max;
  }
  T sum = 0;  // terms in (0, 1], at least one equal to 1: T is accurate enough
#pragma omp simd reduction(+ : sum)
  for (int m = 0; m < W; ++m) {
    live[m] = exp_t(live[m] - row_max);
    sum += live[m];
  }
  const T inv = T(1) / sum;
#pragma omp simd
  for (int m = 0; m < W; ++m) live[m] *= inv;
}

// Backward's per-(b, h) partials: 32 bias buckets then the scale.
constexpr int kPartial = kT5Buckets + 1;

// The panel's probs rows [r0, r0 + c), band columns from r0, as a contiguous [c, band] copy.
template <typename T>
inline void copy_band_probs(const T* tile, int r0, int c, int W, int band, T* band_probs) {
  for (int r = 0; r < c; ++r) {
    std::memcpy(band_probs + int64_t{r} * band, tile + int64_t{r0 + r} * (2 * W) + r0,
                sizeof(T) * band);
  }
}

// dP = dout . Vw^T into dlogit [c, band] and dVw += P^T . dout over the panel's band parts.
template <typename T>
inline void probs_and_value_grads(const WindowGeometry& g, const BandParts& parts, int b, int t,
                                  int r0, int64_t qrow, int hoff, const T* dout, const T* v,
                                  const T* v_cache, const T* band_probs, T* dlogit, T* dv) {
  const int A = g.A, c = g.panel, dh = g.dh, band = g.band;
  for (int i = 0; i < parts.count; ++i) {
    const int j0 = parts.begin[i], len = parts.end[i] - j0;
    const int64_t wrow = g.window_row(b, t, j0) + hoff;
    blas_gemm(Trans::N, Trans::T, c, len, dh, T(1), dout + qrow, A,
              (parts.cache[i] ? v_cache : v) + wrow, A, T(0), dlogit + (j0 - r0), band);
    if (!parts.cache[i]) {  // the cache is detached: no gradient
      blas_gemm(Trans::T, Trans::N, len, dh, c, T(1), band_probs + (j0 - r0), band,
                dout + qrow, A, T(1), dv + wrow, A);
    }
  }
}

// dl = P * (dP - <P, dP>) in place over each row's live entries (the masked band entries set
// to zero), and panel_by_distance[m] += dl of live offset m.
template <typename T>
inline void softmax_backward_panel(const T* band_probs, T* dlogit, T* panel_by_distance, int c,
                                   int W, int band) {
  for (int r = 0; r < c; ++r) {
    const T* prow = band_probs + int64_t{r} * band + r;  // live entries
    T* drow = dlogit + int64_t{r} * band;
    for (int j = 0; j < r; ++j) drow[j] = T(0);
    for (int j = r + W; j < band; ++j) drow[j] = T(0);
    T* dlive = drow + r;
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int m = 0; m < W; ++m) dot += prow[m] * dlive[m];
#pragma omp simd
    for (int m = 0; m < W; ++m) {
      dlive[m] = prow[m] * (dlive[m] - dot);
      panel_by_distance[m] += dlive[m];
    }
  }
}

// grad_q = dl . Kw [c, dh] and dKw += s * dl^T . Q over the panel's band parts.
template <typename T>
inline void query_and_key_grads(const WindowGeometry& g, const BandParts& parts, int b, int t,
                                int r0, int64_t qrow, int hoff, T s, const T* q, const T* k,
                                const T* k_cache, const T* dlogit, T* grad_q, T* dk) {
  const int A = g.A, c = g.panel, dh = g.dh, band = g.band;
  for (int i = 0; i < parts.count; ++i) {
    const int j0 = parts.begin[i], len = parts.end[i] - j0;
    const int64_t wrow = g.window_row(b, t, j0) + hoff;
    blas_gemm(Trans::N, Trans::N, c, dh, len, T(1), dlogit + (j0 - r0), band,
              (parts.cache[i] ? k_cache : k) + wrow, A, i == 0 ? T(0) : T(1), grad_q, dh);
    if (!parts.cache[i]) {
      blas_gemm(Trans::T, Trans::N, len, dh, c, s, dlogit + (j0 - r0), band, q + qrow, A,
                T(1), dk + wrow, A);
    }
  }
}

// Task (b, h)'s partials: dbias[bucket] = s * sum dl per bucket, then
// dscale = sum dl * raw + sum dl * bias.
template <typename T>
inline void write_task_partials(double* partial, const double* by_distance, const int* bucket,
                                const T* rb, int W, T s, double dscale_raw) {
  for (int i = 0; i < kPartial; ++i) partial[i] = 0;
  double dscale_bias = 0;
  for (int m = 0; m < W; ++m) {
    partial[bucket[m]] += by_distance[m] * static_cast<double>(s);
    dscale_bias += by_distance[m] * static_cast<double>(rb[m]);
  }
  partial[kT5Buckets] = dscale_raw + dscale_bias;
}

// Sums the (b, h) partials over b in order into drel_bias [H, buckets] and dscale [H].
template <typename T>
inline void add_partials(const double* partials, int B, int H, T* drel_bias, T* dscale) {
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < kPartial; ++i) {
      double sum = 0;
      for (int b = 0; b < B; ++b) sum += partials[(int64_t{b} * H + h) * kPartial + i];
      if (i < kT5Buckets) {
        drel_bias[h * kT5Buckets + i] += static_cast<T>(sum);
      } else {
        dscale[h] += static_cast<T>(sum);
      }
    }
  }
}

}  // namespace

template <typename T>
void WindowAttentionOps<T>::forward(Workspace<T>& ws, const CpuOptions& opt,
                                    const WindowAttnDims& d, const T* q, const T* k, const T* v,
                                    const T* k_cache, const T* v_cache, const T* rel_bias,
                                    const T* scale, T* out, T* probs) {
  const WindowGeometry g(d, opt.attention_panel_rows, "window_attention_forward");
  T* rev_bias = ws.shared_values(static_cast<std::size_t>(g.H) * g.W);
  fill_reversed_bias(g, rel_bias, rev_bias, ws.shared_ints(g.W));
  const int A = g.A, W = g.W, c = g.panel, dh = g.dh;
  const int64_t tasks = int64_t{g.B} * g.blocks * g.H * g.panels;
  // The panel's scores live in a contiguous per-thread tile [c, band] (cache-hot, unlike the
  // probs tile whose 2W-element rows alias in cache) and are copied out once, normalised.
  ws.prepare_threads(omp_get_max_threads(), static_cast<std::size_t>(c) * g.band, 0);

#pragma omp parallel for schedule(static) if (g.multiply_adds() >= kParallelMinGemmWork)
  for (int64_t task = 0; task < tasks; ++task) {
    const int p = static_cast<int>(task % g.panels);
    const int h = static_cast<int>(task / g.panels % g.H);
    const int t = static_cast<int>(task / (int64_t{g.panels} * g.H) % g.blocks);
    const int b = static_cast<int>(task / (int64_t{g.panels} * g.H * g.blocks));
    const int r0 = p * c;
    const int hoff = h * dh;
    const int band = g.band;
    const T s = scale[h];
    const T* q_panel = q + g.query_row(b, t, r0) + hoff;
    T* scores = ws.thread_slot(omp_get_thread_num()).values.data();
    const BandParts parts(g, t, r0, r0 + band);

    for (int i = 0; i < parts.count; ++i) {
      const T* keys = (parts.cache[i] ? k_cache : k) + g.window_row(b, t, parts.begin[i]) + hoff;
      blas_gemm(Trans::N, Trans::T, c, parts.end[i] - parts.begin[i], dh, T(1), q_panel, A,
                keys, A, T(0), scores + (parts.begin[i] - r0), band);
    }
    T* tile = probs + g.probs_tile(b, t, h);
    for (int r = 0; r < c; ++r) {
      T* live = scores + int64_t{r} * band + r;  // row r0 + r sees band columns [r, r + W)
      softmax_row(live, W, r, band - r - W, rev_bias + int64_t{h} * W, s);
      T* out_row = tile + int64_t{r0 + r} * (2 * W);  // sees window keys [r0 + r, r0 + r + W)
      const int first = r0 + r;
      std::memset(out_row, 0, sizeof(T) * first);
      std::memcpy(out_row + first, live, sizeof(T) * W);
      std::memset(out_row + first + W, 0, sizeof(T) * (W - first));
    }
    // out = P . Vw over the band (masked entries are exact zeros).
    T* out_panel = out + g.query_row(b, t, r0) + hoff;
    for (int i = 0; i < parts.count; ++i) {
      const T* values =
          (parts.cache[i] ? v_cache : v) + g.window_row(b, t, parts.begin[i]) + hoff;
      blas_gemm(Trans::N, Trans::N, c, dh, parts.end[i] - parts.begin[i], T(1),
                scores + (parts.begin[i] - r0), band, values, A, i == 0 ? T(0) : T(1),
                out_panel, A);
    }
  }
}

// With l = (raw + bias) * s the logits and P = softmax(l):
//   dl = P * (dP - <P, dP>),  dP = dout . Vw^T,  dVw += P^T . dout,
//   dQ += s * dl . Kw,  dKw += s * dl^T . Q,  dbias[bucket] += s * sum dl,
//   dscale += sum dl * (raw + bias), with sum dl * raw = sum_q <Q_q, (dl . Kw)_q>.
template <typename T>
void WindowAttentionOps<T>::backward(Workspace<T>& ws, const CpuOptions& opt,
                                     const WindowAttnDims& d, const T* q, const T* k,
                                     const T* v, const T* k_cache, const T* v_cache,
                                     const T* rel_bias, const T* scale, const T* probs,
                                     const T* dout, T* dq, T* dk, T* dv, T* drel_bias,
                                     T* dscale) {
  const WindowGeometry g(d, opt.attention_panel_rows, "window_attention_backward");
  const int A = g.A, W = g.W, c = g.panel, dh = g.dh, band = g.band;
  T* rev_bias = ws.shared_values(static_cast<std::size_t>(g.H) * W);
  int* bucket = ws.shared_ints(W);
  fill_reversed_bias(g, rel_bias, rev_bias, bucket);
  // Per-(b, h) partials: 32 bias buckets then the scale, summed over b in order below.
  double* partials = ws.shared_sums(static_cast<std::size_t>(g.B) * g.H * kPartial);
  const std::size_t dlogit_elems = static_cast<std::size_t>(c) * band;
  const std::size_t grad_q_elems = static_cast<std::size_t>(c) * dh;
  ws.prepare_threads(omp_get_max_threads(), 2 * dlogit_elems + grad_q_elems + W, W);
  const int tasks = g.B * g.H;

#pragma omp parallel for schedule(static) if (g.multiply_adds() >= kParallelMinGemmWork)
  for (int task = 0; task < tasks; ++task) {
    const int b = task / g.H;
    const int h = task % g.H;
    const int hoff = h * dh;
    const T s = scale[h];
    const T* rb = rev_bias + int64_t{h} * W;
    auto& slot = ws.thread_slot(omp_get_thread_num());
    T* dlogit = slot.values.data();        // [c, band]: dP, then dl in place
    T* band_probs = dlogit + dlogit_elems;  // [c, band]: the panel's probs (contiguous copy)
    T* grad_q = band_probs + dlogit_elems;  // [c, dh]: dl . Kw
    T* panel_by_distance = grad_q + grad_q_elems;  // [W]: this panel's sum of dl per offset m
    double* by_distance = slot.sums.data();  // sum of dl per live offset m (distance W - m)
    for (int m = 0; m < W; ++m) by_distance[m] = 0;
    double dscale_raw = 0;

    for (int t = 0; t < g.blocks; ++t) {
      const T* tile = probs + g.probs_tile(b, t, h);
      for (int p = 0; p < g.panels; ++p) {
        const int r0 = p * c;
        const int64_t qrow = g.query_row(b, t, r0) + hoff;
        const BandParts parts(g, t, r0, r0 + band);
        for (int m = 0; m < W; ++m) panel_by_distance[m] = T(0);
        copy_band_probs(tile, r0, c, W, band, band_probs);

        probs_and_value_grads(g, parts, b, t, r0, qrow, hoff, dout, v, v_cache, band_probs,
                              dlogit, dv);
        softmax_backward_panel(band_probs, dlogit, panel_by_distance, c, W, band);
        for (int m = 0; m < W; ++m) by_distance[m] += static_cast<double>(panel_by_distance[m]);
        query_and_key_grads(g, parts, b, t, r0, qrow, hoff, s, q, k, k_cache, dlogit, grad_q, dk);
        dscale_raw += accumulate_query_grad(q + qrow, dq + qrow, grad_q, c, dh, A, s);
      }
    }
    double* partial = partials + int64_t{task} * kPartial;
    write_task_partials(partial, by_distance, bucket, rb, W, s, dscale_raw);
  }

  add_partials(partials, g.B, g.H, drel_bias, dscale);
}

template struct WindowAttentionOps<float>;
template struct WindowAttentionOps<double>;

}  // namespace brt::kernels::cpu
