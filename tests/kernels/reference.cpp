#include "reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace brt::kernels::test {

int reference_t5_bucket(int distance) {
  static const int kFirstDistance[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                         11, 12, 13, 14, 15, 16, 19, 21, 24, 27, 31,
                                         35, 40, 46, 52, 59, 67, 77, 87, 99, 113};
  int bucket = 0;
  for (int b = 0; b < 32; ++b) {
    if (distance >= kFirstDistance[b]) bucket = b;
  }
  return bucket;
}

namespace {
// Softmax over the entries of `logits` where `allowed` is true; others get probability 0.
std::vector<double> masked_softmax(const std::vector<double>& logits,
                                   const std::vector<bool>& allowed) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < logits.size(); ++j) {
    if (allowed[j]) m = std::max(m, logits[j]);
  }
  std::vector<double> p(logits.size(), 0.0);
  double sum = 0;
  for (std::size_t j = 0; j < logits.size(); ++j) {
    if (allowed[j]) sum += (p[j] = std::exp(logits[j] - m));
  }
  for (double& x : p) x /= sum;
  return p;
}
}  // namespace

AttentionResult reference_window_attention(const WindowAttnDims& d, const std::vector<double>& q,
                                           const std::vector<double>& k,
                                           const std::vector<double>& v,
                                           const std::vector<double>& k_cache,
                                           const std::vector<double>& v_cache,
                                           const std::vector<double>& rel_bias,
                                           const std::vector<double>& scale) {
  const int B = d.batch, N = d.seq, W = d.window, H = d.heads, dh = d.head_dim, A = H * dh;
  const int T = N / W;
  AttentionResult r;
  r.out.assign(static_cast<std::size_t>(B) * N * A, 0.0);
  r.probs.assign(static_cast<std::size_t>(B) * T * H * W * 2 * W, 0.0);
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < H; ++h) {
        for (int qi = 0; qi < W; ++qi) {
          const double* qv = &q[(static_cast<std::size_t>(b) * N + t * W + qi) * A + h * dh];
          std::vector<double> logits(2 * W, 0.0);
          std::vector<bool> allowed(2 * W, false);
          std::vector<const double*> vrow(2 * W);
          for (int j = 0; j < 2 * W; ++j) {
            // Key window row j: previous block (cache for t = 0), then the block itself.
            const double* kv;
            if (j < W && t == 0) {
              kv = &k_cache[(static_cast<std::size_t>(b) * W + j) * A + h * dh];
              vrow[j] = &v_cache[(static_cast<std::size_t>(b) * W + j) * A + h * dh];
            } else {
              const std::size_t row = static_cast<std::size_t>(b) * N + (t - 1) * W + j;
              kv = &k[row * A + h * dh];
              vrow[j] = &v[row * A + h * dh];
            }
            allowed[j] = qi <= j && j <= qi + W - 1;
            if (!allowed[j]) continue;
            double s = 0;
            for (int e = 0; e < dh; ++e) s += qv[e] * kv[e];
            const int distance = qi + W - j;
            logits[j] = (s + rel_bias[h * 32 + reference_t5_bucket(distance)]) * scale[h];
          }
          const std::vector<double> p = masked_softmax(logits, allowed);
          const std::size_t tile =
              ((static_cast<std::size_t>(b) * T + t) * H + h) * W * 2 * W + qi * 2 * W;
          double* o = &r.out[(static_cast<std::size_t>(b) * N + t * W + qi) * A + h * dh];
          for (int j = 0; j < 2 * W; ++j) {
            r.probs[tile + j] = p[j];
            for (int e = 0; e < dh; ++e) o[e] += p[j] * vrow[j][e];
          }
        }
      }
    }
  }
  return r;
}

AttentionResult reference_cross_attention(const CrossAttnDims& d, const std::vector<double>& q,
                                          const std::vector<double>& k,
                                          const std::vector<double>& v,
                                          const std::vector<double>& scale,
                                          std::size_t out_size) {
  const int H = d.heads, dh = d.head_dim, A = H * dh, nq = d.queries, nk = d.keys;
  AttentionResult r;
  r.out.assign(out_size, 0.0);
  r.probs.assign(static_cast<std::size_t>(d.batch) * H * nq * nk, 0.0);
  for (int b = 0; b < d.batch; ++b) {
    for (int h = 0; h < H; ++h) {
      for (int i = 0; i < nq; ++i) {
        const double* qv = &q[b * d.q_stride + static_cast<std::size_t>(i) * A + h * dh];
        std::vector<double> logits(nk, 0.0);
        std::vector<bool> allowed(nk, false);
        for (int j = 0; j < nk; ++j) {
          allowed[j] = !d.causal || j <= i;
          const double* kv = &k[b * d.kv_stride + static_cast<std::size_t>(j) * A + h * dh];
          double s = 0;
          for (int e = 0; e < dh; ++e) s += qv[e] * kv[e];
          logits[j] = scale[h] * s;
        }
        const std::vector<double> p = masked_softmax(logits, allowed);
        double* o = &r.out[b * d.q_stride + static_cast<std::size_t>(i) * A + h * dh];
        for (int e = 0; e < dh; ++e) o[e] = 0;
        for (int j = 0; j < nk; ++j) {
          r.probs[((static_cast<std::size_t>(b) * H + h) * nq + i) * nk + j] = p[j];
          const double* vv = &v[b * d.kv_stride + static_cast<std::size_t>(j) * A + h * dh];
          for (int e = 0; e < dh; ++e) o[e] += p[j] * vv[e];
        }
      }
    }
  }
  return r;
}

}  // namespace brt::kernels::test
