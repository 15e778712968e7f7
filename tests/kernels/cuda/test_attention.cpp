// GPU window self-attention (model.md §3.2/§3.3) and cross-attention (model.md §3.4) against the CPU
// backend, forward and backward, plus bit-identical reruns. The reference is the CPU backend
// in float64 (Backend<double>): the scale and bias gradients are cancelling sums over every
// score, where the float CPU backend itself is off by ~1e-5 relative at these sizes, so only a
// float64 reference can hold the GPU to 1e-5. The GPU keeps only per-row log-sum-exps in
// `probs` (docs/gpu.md), so each backend's backward reads its own probs.
//
// dscale is Σ dl·raw over every score, a sum that cancels (Σ_j P(dP − δ) = 0 per row): its
// error is judged against the size of its terms, Σ |dl·raw| (uncancelled_*_dscale below, from
// the float64 reference's probabilities), not against the small cancelled result.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/reference.h"

namespace brt::kernels::cuda::test {
namespace {

struct AttentionGrads {
  std::vector<float> dq, dk, dv, dbias, dscale;
};

std::vector<double> widen(const std::vector<float>& x) { return {x.begin(), x.end()}; }
std::vector<float> narrow(const std::vector<double>& x) { return {x.begin(), x.end()}; }

// One score row's terms of dscale: P over its keys, raw_j = the unscaled logit, dP_j = ⟨dO, v_j⟩.
// Adds Σ_j |P_j (dP_j − δ) raw_j| with δ = Σ_j P_j dP_j.
double row_uncancelled(const std::vector<double>& p, const std::vector<double>& raw,
                       const std::vector<double>& dp) {
  double delta = 0, sum = 0;
  for (std::size_t j = 0; j < p.size(); ++j) delta += p[j] * dp[j];
  for (std::size_t j = 0; j < p.size(); ++j) sum += std::fabs(p[j] * (dp[j] - delta) * raw[j]);
  return sum;
}

double dot(const double* a, const double* b, int n) {
  double s = 0;
  for (int e = 0; e < n; ++e) s += a[e] * b[e];
  return s;
}

// Σ |dl·raw| per head of the window attention (model.md §3.2: logits = (q·k + bias)·scale).
std::vector<double> uncancelled_window_dscale(const WindowAttnDims& d, const std::vector<double>& q,
                                              const std::vector<double>& k, const std::vector<double>& v,
                                              const std::vector<double>& kc, const std::vector<double>& vc,
                                              const std::vector<double>& bias,
                                              const std::vector<double>& scale,
                                              const std::vector<double>& dout) {
  const int B = d.batch, N = d.seq, W = d.window, H = d.heads, dh = d.head_dim, A = H * dh, T = N / W;
  const auto ref = kernels::test::reference_window_attention(d, q, k, v, kc, vc, bias, scale);
  std::vector<double> total(std::size_t(H), 0.0);
  std::vector<double> p(2 * W), raw(2 * W), dp(2 * W);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h)
        for (int qi = 0; qi < W; ++qi) {
          const std::size_t qrow = (std::size_t(b) * N + t * W + qi) * A + h * dh;
          for (int j = 0; j < 2 * W; ++j) {
            const bool cached = j < W && t == 0;
            const std::size_t row = cached ? (std::size_t(b) * W + j) * A + h * dh
                                           : (std::size_t(b) * N + (t - 1) * W + j) * A + h * dh;
            const double* kv = cached ? &kc[row] : &k[row];
            const double* vv = cached ? &vc[row] : &v[row];
            p[j] = ref.probs[((std::size_t(b) * T + t) * H + h) * W * 2 * W + qi * 2 * W + j];
            const bool allowed = qi <= j && j <= qi + W - 1;
            raw[j] = allowed ? dot(&q[qrow], kv, dh) +
                                   bias[h * 32 + kernels::test::reference_t5_bucket(qi + W - j)]
                             : 0.0;
            dp[j] = dot(&dout[qrow], vv, dh);
          }
          total[h] += row_uncancelled(p, raw, dp);
        }
  return total;
}

// Σ |dl·raw| per head of the cross attention (model.md §3.4: logits = q·k·scale).
std::vector<double> uncancelled_cross_dscale(const CrossAttnDims& d, const std::vector<double>& q,
                                             const std::vector<double>& k, const std::vector<double>& v,
                                             const std::vector<double>& scale,
                                             const std::vector<double>& dout) {
  const int H = d.heads, dh = d.head_dim, A = H * dh;
  const auto ref = kernels::test::reference_cross_attention(d, q, k, v, scale, q.size());
  std::vector<double> total(std::size_t(H), 0.0);
  std::vector<double> p(d.keys), raw(d.keys), dp(d.keys);
  for (int b = 0; b < d.batch; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < d.queries; ++i) {
        const std::size_t qrow = std::size_t(b) * d.q_stride + std::size_t(i) * A + h * dh;
        for (int j = 0; j < d.keys; ++j) {
          const std::size_t krow = std::size_t(b) * d.kv_stride + std::size_t(j) * A + h * dh;
          p[j] = ref.probs[((std::size_t(b) * H + h) * d.queries + i) * d.keys + j];
          raw[j] = dot(&q[qrow], &k[krow], dh);
          dp[j] = dot(&dout[qrow], &v[krow], dh);
        }
        total[h] += row_uncancelled(p, raw, dp);
      }
  return total;
}

// dscale against the size of its terms: max_h |gpu_h − ref_h| / Σ|terms_h|, printed as a
// measurement and held to `tolerance`.
void expect_dscale_close(const std::vector<float>& gpu, const std::vector<float>& ref,
                         const std::vector<double>& initial, const std::vector<double>& terms,
                         double tolerance) {
  ASSERT_EQ(gpu.size(), ref.size());
  double worst = 0;
  for (std::size_t h = 0; h < ref.size(); ++h) {
    // The gradients accumulate into `initial`: compare the added parts' difference (the same).
    const double diff = std::fabs(double(gpu[h]) - double(ref[h]));
    const double size = terms[h] + std::fabs(initial[h]) * 1e-7;
    worst = std::max(worst, std::isfinite(diff) ? diff / size : INFINITY);
  }
  std::printf("dscale: max |gpu - ref| / sum|dl*raw| = %.3g (tolerance %.1g)\n", worst, tolerance);
  EXPECT_LE(worst, tolerance) << "dscale judged against the size of its uncancelled sum";
}

// Under BRT_SMALL_SHAPES=1 (compute-sanitizer runs) every test takes its smallest shape.
template <typename Dims>
Dims pick(const Dims& full, const Dims& small) {
  return small_shapes() ? small : full;
}

// The tolerances the attention checks hold the GPU to; TensorCore widens them.
class AttentionTest : public CudaTest {
 protected:
  double tolerance_ = kFp32Tolerance;
  double dscale_tolerance_ = kFp32Tolerance;

  // The GPU's backward (runs[0]) against the float64 reference's (`cpu`, both accumulated into
  // `initial`), and its rerun (runs[1]) bit for bit; dbias only `with_bias` (the window's).
  void expect_backward_matches(const AttentionGrads (&runs)[2], const AttentionGrads& cpu,
                               const AttentionGrads& initial,
                               const std::vector<double>& dscale_terms, bool with_bias,
                               const char* what) {
    EXPECT_REL_CLOSE(runs[0].dq, cpu.dq, tolerance_, "dq");
    EXPECT_REL_CLOSE(runs[0].dk, cpu.dk, tolerance_, "dk");
    EXPECT_REL_CLOSE(runs[0].dv, cpu.dv, tolerance_, "dv");
    if (with_bias) {
      EXPECT_REL_CLOSE(runs[0].dbias, cpu.dbias, tolerance_, "drel_bias");
    }
    expect_dscale_close(runs[0].dscale, cpu.dscale, widen(initial.dscale), dscale_terms,
                        dscale_tolerance_);
    EXPECT_TRUE(bit_identical(runs[0].dq, runs[1].dq) && bit_identical(runs[0].dk, runs[1].dk) &&
                bit_identical(runs[0].dv, runs[1].dv) &&
                (!with_bias || bit_identical(runs[0].dbias, runs[1].dbias)) &&
                bit_identical(runs[0].dscale, runs[1].dscale))
        << what << " attention backward not deterministic";
  }
};

// The bf16 backend, whose attention runs on the tensor cores: Base's checks against float64 at
// bf16's tolerance. bf16 operands carry 8 significant bits (relative rounding 2^-9 each): 3e-2 on
// the outputs, and 1e-2 of dscale's uncancelled size (each term rounded a few times, errors ~4e-3
// each).
template <typename Base>
class TensorCore : public Base {
 protected:
  TensorCore() {
    this->tolerance_ = 3e-2;
    this->dscale_tolerance_ = 1e-2;
  }
  CudaOptions options() const override {
    CudaOptions o;
    o.precision = Precision::kBf16;
    return o;
  }
};

class CudaWindowAttentionTest : public AttentionTest {
 protected:
  void check(const WindowAttnDims& d) {
    SCOPED_TRACE(rng_.trace() + " B=" + std::to_string(d.batch) + " N=" + std::to_string(d.seq) +
                 " W=" + std::to_string(d.window) + " H=" + std::to_string(d.heads) +
                 " dh=" + std::to_string(d.head_dim));
    const std::size_t act = std::size_t(d.batch) * d.seq * d.width();
    const std::size_t cache = std::size_t(d.batch) * d.window * d.width();
    const std::size_t probs = std::size_t(d.batch) * d.blocks() * d.heads * d.window * 2 * d.window;
    const auto q = rng_.normal(act, 0.4f), k = rng_.normal(act, 0.4f), v = rng_.normal(act);
    const auto kc = rng_.normal(cache, 0.4f), vc = rng_.normal(cache);
    const auto bias = rng_.normal(std::size_t(d.heads) * kT5Buckets, 0.5f);
    auto scale = rng_.normal(d.heads, 0.5f);
    for (float& s : scale) s = 1.5f + s;
    const auto dout = rng_.normal(act);
    AttentionGrads cpu{rng_.normal(act), rng_.normal(act), rng_.normal(act),
                       rng_.normal(bias.size()), rng_.normal(d.heads)};
    const AttentionGrads initial = cpu;
    std::vector<float> out;
    std::vector<double> dscale_terms;
    {
      const auto ref = make_cpu_backend<double>();
      const auto q8 = widen(q), k8 = widen(k), v8 = widen(v), kc8 = widen(kc), vc8 = widen(vc),
                 b8 = widen(bias), s8 = widen(scale), do8 = widen(dout);
      auto dq8 = widen(cpu.dq), dk8 = widen(cpu.dk), dv8 = widen(cpu.dv),
           db8 = widen(cpu.dbias), ds8 = widen(cpu.dscale);
      std::vector<double> out8(act), p8(probs);
      ref->window_attention_forward(d, q8.data(), k8.data(), v8.data(), kc8.data(), vc8.data(),
                                    b8.data(), s8.data(), out8.data(), p8.data());
      ref->window_attention_backward(d, q8.data(), k8.data(), v8.data(), kc8.data(), vc8.data(),
                                     b8.data(), s8.data(), p8.data(), do8.data(), dq8.data(),
                                     dk8.data(), dv8.data(), db8.data(), ds8.data());
      out = narrow(out8);
      cpu = {narrow(dq8), narrow(dk8), narrow(dv8), narrow(db8), narrow(ds8)};
      dscale_terms = uncancelled_window_dscale(d, q8, k8, v8, kc8, vc8, b8, s8, do8);
    }

    float *dq_ = upload(q), *dk_ = upload(k), *dv_ = upload(v), *dkc = upload(kc),
          *dvc = upload(vc), *dbias_ = upload(bias), *dscale_ = upload(scale),
          *ddout = upload(dout);
    float* d_out = poisoned(act);
    float* d_probs = poisoned(probs);
    gpu_->window_attention_forward(d, dq_, dk_, dv_, dkc, dvc, dbias_, dscale_, d_out, d_probs);
    EXPECT_REL_CLOSE(download(d_out, act), out, tolerance_, "window attention out");
    expect_out_for_products(d, dq_, dk_, dv_, dkc, dvc, dbias_, dscale_, d_out);

    AttentionGrads runs[2];
    for (AttentionGrads& run : runs) {
      float *g_dq = upload(initial.dq), *g_dk = upload(initial.dk), *g_dv = upload(initial.dv),
            *g_db = upload(initial.dbias), *g_ds = upload(initial.dscale);
      gpu_->window_attention_backward(d, dq_, dk_, dv_, dkc, dvc, dbias_, dscale_, d_probs, ddout,
                                      g_dq, g_dk, g_dv, g_db, g_ds);
      run = {download(g_dq, act), download(g_dk, act), download(g_dv, act),
             download(g_db, bias.size()), download(g_ds, d.heads)};
    }
    expect_backward_matches(runs, cpu, initial, dscale_terms, /*with_bias=*/true, "window");
    // window_attention_backward_write: dq, dk, dv written over poison with the values of the
    // accumulation into zeros, exactly (== : a zero's sign may differ); bias and scale accumulate.
    const std::vector<float> zeros(act, 0.0f);
    float *z_dq = upload(zeros), *z_dk = upload(zeros), *z_dv = upload(zeros), *z_db = upload(initial.dbias),
          *z_ds = upload(initial.dscale);
    gpu_->window_attention_backward(d, dq_, dk_, dv_, dkc, dvc, dbias_, dscale_, d_probs, ddout, z_dq, z_dk, z_dv,
                                    z_db, z_ds);
    float *w_dq = poisoned(act), *w_dk = poisoned(act), *w_dv = poisoned(act), *w_db = upload(initial.dbias),
          *w_ds = upload(initial.dscale);
    gpu_->window_attention_backward_write(d, dq_, dk_, dv_, dkc, dvc, dbias_, dscale_, d_probs, ddout, w_dq, w_dk,
                                          w_dv, w_db, w_ds);
    EXPECT_TRUE(download(w_dq, act) == download(z_dq, act)) << "dq written";
    EXPECT_TRUE(download(w_dk, act) == download(z_dk, act)) << "dk written";
    EXPECT_TRUE(download(w_dv, act) == download(z_dv, act)) << "dv written";
    EXPECT_TRUE(download(w_db, bias.size()) == download(z_db, bias.size())) << "drel_bias";
    EXPECT_TRUE(download(w_ds, d.heads) == download(z_ds, d.heads)) << "dscale";
    expect_dv_for_product(d, {dq_, dk_, dv_, dkc, dvc, dbias_, dscale_, d_probs, ddout}, download(w_dq, act),
                          download(w_dk, act), w_dv, initial);
  }

  struct BackwardInputs {
    const float *q, *k, *v, *kc, *vc, *bias, *scale, *probs, *dout;
  };
  // window_attention_backward_write_dv_for_product: dq and dk as the written ones; in bf16 dv
  // holds bf16 values, each the written dv (`dv_plain`) rounded to nearest even, and the
  // linear_backward that reads it as dy equals one reading the fp32 dv bit for bit, then lets go
  // of it; in fp32 the written dv, not held.
  void expect_dv_for_product(const WindowAttnDims& d, const BackwardInputs& in, const std::vector<float>& dq,
                             const std::vector<float>& dk, const float* dv_plain, const AttentionGrads& initial) {
    const int rows = d.batch * d.seq, A = d.width();
    const std::size_t act = std::size_t(rows) * A;
    float *g_dq = poisoned(act), *g_dk = poisoned(act), *g_dv = poisoned(act);
    float *g_db = upload(initial.dbias), *g_ds = upload(initial.dscale);
    gpu_->window_attention_backward_write_dv_for_product(d, in.q, in.k, in.v, in.kc, in.vc, in.bias, in.scale, in.probs,
                                                         in.dout, g_dq, g_dk, g_dv, g_db, g_ds);
    EXPECT_TRUE(download(g_dq, act) == dq) << "dq with dv for its product";
    EXPECT_TRUE(download(g_dk, act) == dk) << "dk with dv for its product";
    const auto want = download(dv_plain, act);
    const bool bf16 = options().precision == Precision::kBf16;
    ASSERT_EQ(holds_bf16_activation(*gpu_, g_dv, rows, A), bf16) << "held exactly in bf16";
    if (!bf16) {
      EXPECT_TRUE(download(g_dv, act) == want) << "dv for its product (fp32)";
      return;
    }
    EXPECT_EQ(bf16_values_not_rounded(download(g_dv, (act + 1) / 2), want, act), 0)
        << "bf16 values that are not the written dv rounded";
    expect_read_once_as_dy(g_dv, dv_plain, rows, 7, A);
  }

  // window_attention_forward_for_products: in bf16 out holds bf16 values, each the fp32 output
  // (`plain`, window_attention_forward's) rounded to nearest even, and a product reading it
  // equals one reading the fp32 output bit for bit; in fp32 the same output, not held.
  void expect_out_for_products(const WindowAttnDims& d, const float* q, const float* k, const float* v,
                               const float* kc, const float* vc, const float* bias, const float* scale,
                               const float* plain) {
    const int rows = d.batch * d.seq, A = d.width(), cols = 5;
    const std::size_t act = std::size_t(rows) * A, probs = std::size_t(d.batch) * d.blocks() * d.heads * d.window * 2 *
                                                          d.window;
    float *out = poisoned(act), *p = poisoned(probs);
    gpu_->window_attention_forward_for_products(d, q, k, v, kc, vc, bias, scale, out, p);
    const auto want = download(plain, act);
    const bool bf16 = options().precision == Precision::kBf16;
    ASSERT_EQ(holds_bf16_activation(*gpu_, out, rows, A), bf16) << "held exactly in bf16";
    if (!bf16) {
      EXPECT_TRUE(bit_identical(download(out, act), want)) << "out for products (fp32)";
      return;
    }
    EXPECT_EQ(bf16_values_not_rounded(download(out, (act + 1) / 2), want, act), 0)
        << "bf16 values that are not the fp32 output rounded";
    const float* w = upload(rng_.normal(std::size_t(A) * cols));
    float *z = poisoned(std::size_t(rows) * cols), *z_plain = poisoned(std::size_t(rows) * cols);
    gpu_->gemm(Trans::N, Trans::N, rows, cols, A, 1.0f, out, A, w, cols, 0.0f, z, cols);
    gpu_->gemm(Trans::N, Trans::N, rows, cols, A, 1.0f, plain, A, w, cols, 0.0f, z_plain, cols);
    EXPECT_TRUE(bit_identical(download(z, std::size_t(rows) * cols), download(z_plain, std::size_t(rows) * cols)))
        << "a product reading it";
  }
};

TEST_F(CudaWindowAttentionTest, SmallBlocksMatchCpu) { check({2, 64, 16, 2, 16}); }
TEST_F(CudaWindowAttentionTest, TransformerXlOneBlockOddHeadDimMatchesCpu) {
  check(pick<WindowAttnDims>({1, 48, 48, 3, 40}, {1, 24, 24, 3, 8}));
}
TEST_F(CudaWindowAttentionTest, WideWindowReachesLastBucketMatchesCpu) {
  check(pick<WindowAttnDims>({2, 256, 128, 2, 64}, {1, 128, 64, 1, 16}));
}

// The bf16 backend's window attention runs on the tensor cores (attention_tc.cu: cuBLAS
// strided-batched bf16 GEMMs, fp32 softmax between them): the same checks against float64 at
// bf16's tolerance (operands rounded to 8 significant bits), reruns bit-identical.
using CudaWindowAttentionTensorCoreTest = TensorCore<CudaWindowAttentionTest>;

TEST_F(CudaWindowAttentionTensorCoreTest, SmallBlocksMatchCpu) { check({2, 64, 16, 2, 16}); }
TEST_F(CudaWindowAttentionTensorCoreTest, OneBlockOddHeadDimMatchesCpu) {
  check(pick<WindowAttnDims>({1, 48, 48, 3, 40}, {1, 24, 24, 3, 8}));
}
TEST_F(CudaWindowAttentionTensorCoreTest, WideWindowMatchesCpu) {
  check(pick<WindowAttnDims>({2, 512, 128, 2, 64}, {1, 128, 64, 1, 16}));
}

class CudaCrossAttentionTest : public AttentionTest {
 protected:
  // q_pad / kv_pad: extra rows between batch entries (the strides address a larger buffer);
  // shared_kv: every batch entry reads the same K, V (kv_stride 0).
  void check(int batch, int nq, int nk, int H, int dh, bool causal, int q_pad, int kv_pad,
             bool shared_kv) {
    const int A = H * dh;
    const CrossAttnDims d{batch, nq, nk, H, dh, int64_t(nq + q_pad) * A,
                          shared_kv ? 0 : int64_t(nk + kv_pad) * A, causal};
    SCOPED_TRACE(rng_.trace() + " batch=" + std::to_string(batch) + " nq=" + std::to_string(nq) +
                 " nk=" + std::to_string(nk) + " causal=" + std::to_string(causal) +
                 " shared_kv=" + std::to_string(shared_kv));
    const std::size_t qsize = std::size_t(batch) * d.q_stride;
    const std::size_t kvsize = shared_kv ? std::size_t(nk) * A : std::size_t(batch) * d.kv_stride;
    const std::size_t probs = std::size_t(batch) * H * nq * nk;
    const auto q = rng_.normal(qsize, 0.4f), k = rng_.normal(kvsize, 0.4f), v = rng_.normal(kvsize);
    auto scale = rng_.normal(H, 0.5f);
    for (float& s : scale) s = 1.5f + s;
    const auto dout = rng_.normal(qsize);
    auto out = rng_.normal(qsize);  // gaps between batch entries must stay untouched
    AttentionGrads cpu{rng_.normal(qsize), rng_.normal(kvsize), rng_.normal(kvsize), {},
                       rng_.normal(H)};
    const AttentionGrads initial = cpu;
    std::vector<double> dscale_terms;
    float* d_out = upload(out);
    {
      const auto ref = make_cpu_backend<double>();
      const auto q8 = widen(q), k8 = widen(k), v8 = widen(v), s8 = widen(scale),
                 do8 = widen(dout);
      auto out8 = widen(out), dq8 = widen(cpu.dq), dk8 = widen(cpu.dk), dv8 = widen(cpu.dv),
           ds8 = widen(cpu.dscale);
      std::vector<double> p8(probs);
      ref->cross_attention_forward(d, q8.data(), k8.data(), v8.data(), s8.data(), out8.data(),
                                   p8.data());
      ref->cross_attention_backward(d, q8.data(), k8.data(), v8.data(), s8.data(), p8.data(),
                                    do8.data(), dq8.data(), dk8.data(), dv8.data(), ds8.data());
      out = narrow(out8);
      cpu = {narrow(dq8), narrow(dk8), narrow(dv8), {}, narrow(ds8)};
      dscale_terms = uncancelled_cross_dscale(d, q8, k8, v8, s8, do8);
    }
    float *dq_ = upload(q), *dk_ = upload(k), *dv_ = upload(v), *ds_ = upload(scale),
          *ddout = upload(dout);
    float* d_probs = poisoned(probs);
    gpu_->cross_attention_forward(d, dq_, dk_, dv_, ds_, d_out, d_probs);
    EXPECT_REL_CLOSE(download(d_out, qsize), out, tolerance_, "cross attention out");
    AttentionGrads runs[2];
    for (AttentionGrads& run : runs) {
      float *g_dq = upload(initial.dq), *g_dk = upload(initial.dk), *g_dv = upload(initial.dv),
            *g_ds = upload(initial.dscale);
      gpu_->cross_attention_backward(d, dq_, dk_, dv_, ds_, d_probs, ddout, g_dq, g_dk, g_dv,
                                     g_ds);
      run = {download(g_dq, qsize), download(g_dk, kvsize), download(g_dv, kvsize), {},
             download(g_ds, H)};
    }
    expect_backward_matches(runs, cpu, initial, dscale_terms, /*with_bias=*/false, "cross");
  }
};

TEST_F(CudaCrossAttentionTest, UnmaskedMatchesCpu) { check(3, 24, 40, 2, 16, false, 0, 0, false); }
TEST_F(CudaCrossAttentionTest, CausalWithPaddedStridesMatchesCpu) {
  check(2, 33, 33, 2, 40, true, 5, 3, false);
}
TEST_F(CudaCrossAttentionTest, SharedKeysAndValuesMatchCpu) {
  check(3, 20, 12, 2, 16, false, 0, 0, true);
}

// The bf16 backend's cross-attention on the tensor cores (cross_attention_tc.cu).
using CudaCrossAttentionTensorCoreTest = TensorCore<CudaCrossAttentionTest>;

TEST_F(CudaCrossAttentionTensorCoreTest, UnmaskedMatchesCpu) { check(3, 24, 40, 2, 16, false, 0, 0, false); }
TEST_F(CudaCrossAttentionTensorCoreTest, CausalWithPaddedStridesMatchesCpu) {
  check(2, 33, 33, 3, 40, true, 7, 5, false);
}
TEST_F(CudaCrossAttentionTensorCoreTest, SharedKeysAndValuesMatchCpu) {
  check(4, 16, 24, 2, 32, false, 0, 0, true);
}

}  // namespace
}  // namespace brt::kernels::cuda::test
