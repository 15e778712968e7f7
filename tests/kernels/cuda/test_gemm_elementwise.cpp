// GPU gemm (fp32 and bf16), element-wise helpers, column sums and embedding against the CPU
// backend on fresh random inputs; determinism of the reductions (two runs bit-identical).
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/kernels/cuda/cuda_test_util.h"

namespace brt::kernels::cuda::test {
namespace {


class CudaGemmTest : public CudaTest {
 public:
  void check_all(double tol) {
    for (Trans ta : {Trans::N, Trans::T}) {
      for (Trans tb : {Trans::N, Trans::T}) {
        SCOPED_TRACE(std::string("ta=") + (ta == Trans::N ? "N" : "T") +
                     " tb=" + (tb == Trans::N ? "N" : "T"));
        // Odd sizes and padded strides catch transposition and leading-dimension mistakes.
        const int M = 67, N = 45, K = 131, pad = 3;
        const int a_rows = ta == Trans::N ? M : K, a_cols = ta == Trans::N ? K : M;
        const int b_rows = tb == Trans::N ? K : N, b_cols = tb == Trans::N ? N : K;
        const int lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
        const auto A = rng_.normal(std::size_t(a_rows) * lda);
        const auto B = rng_.normal(std::size_t(b_rows) * ldb);
        auto C = rng_.normal(std::size_t(M) * ldc);
        float* dA = upload(A);
        float* dB = upload(B);
        float* dC = upload(C);
        gpu_->gemm(ta, tb, M, N, K, 0.7f, dA, lda, dB, ldb, -0.4f, dC, ldc);
        cpu_->gemm(ta, tb, M, N, K, 0.7f, A.data(), lda, B.data(), ldb, -0.4f, C.data(), ldc);
        EXPECT_REL_CLOSE(download(dC, C.size()), C, tol, "gemm");
      }
    }
  }
};

TEST_F(CudaGemmTest, Fp32MatchesCpuForAllTranspositions) {
  SCOPED_TRACE(rng_.trace());
  check_all(kFp32Tolerance);
}

class CudaGemmBf16Test : public CudaGemmTest {
 protected:
  CudaOptions options() const override {
    CudaOptions o;
    o.precision = Precision::kBf16;
    return o;
  }
  // An MLP's operands (model.md §4), seeded: x [n, in], w1 [in, hidden], w2 [hidden, out], an
  // output gradient dy [n, out] and an extra hidden gradient [n, hidden]; host and device.
  struct MlpOperands {
    int n, in, hidden, out;
    std::vector<float> x, w1, w2, dy, extra;
    const float *d_x, *d_w1, *d_w2, *d_dy, *d_extra;
  };
  MlpOperands mlp_operands(int n, int in, int hidden, int out) {
    MlpOperands o{n, in, hidden, out, rng_.normal(std::size_t(n) * in), rng_.normal(std::size_t(in) * hidden),
                  rng_.normal(std::size_t(hidden) * out), rng_.normal(std::size_t(n) * out),
                  rng_.normal(std::size_t(n) * hidden), nullptr, nullptr, nullptr, nullptr, nullptr};
    o.d_x = upload(o.x), o.d_w1 = upload(o.w1), o.d_w2 = upload(o.w2), o.d_dy = upload(o.dy);
    o.d_extra = upload(o.extra);
    return o;
  }
};

TEST_F(CudaGemmBf16Test, Bf16OperandsMatchCpuWithinBf16Rounding) {
  SCOPED_TRACE(rng_.trace());
  check_all(kBf16Tolerance);
}

// linear_backward in bf16 rounds dy once for its two products: bit-identical to the two gemm
// calls it replaces (Backend's own linear_backward), with and without dx, accumulating and not.
TEST_F(CudaGemmBf16Test, LinearBackwardEqualsItsTwoGemmsBitForBit) {
  SCOPED_TRACE(rng_.trace());
  const int n = 37, in = 29, out = 53;
  const auto x = rng_.normal(std::size_t(n) * in), w = rng_.normal(std::size_t(in) * out),
             dy = rng_.normal(std::size_t(n) * out), dx0 = rng_.normal(std::size_t(n) * in),
             dw0 = rng_.normal(std::size_t(in) * out);
  const float *d_x = upload(x), *d_w = upload(w), *d_dy = upload(dy);
  for (const float beta : {0.0f, 1.0f}) {
    for (const bool with_dx : {true, false}) {
      float *fused_dx = upload(dx0), *fused_dw = upload(dw0), *plain_dx = upload(dx0), *plain_dw = upload(dw0);
      gpu_->linear_backward(d_x, n, in, d_w, out, d_dy, with_dx ? fused_dx : nullptr, fused_dw, beta);
      gpu_->Backend<float>::linear_backward(d_x, n, in, d_w, out, d_dy, with_dx ? plain_dx : nullptr, plain_dw, beta);
      EXPECT_TRUE(bit_identical(download(fused_dx, dx0.size()), download(plain_dx, dx0.size())))
          << "dx, beta " << beta << (with_dx ? "" : " (not asked: unchanged)");
      EXPECT_TRUE(bit_identical(download(fused_dw, dw0.size()), download(plain_dw, dw0.size()))) << "dw, beta " << beta;
    }
  }
  // And within bf16 rounding of the CPU's.
  auto dx = dx0, dw = dw0;
  float *g_dx = upload(dx0), *g_dw = upload(dw0);
  gpu_->linear_backward(d_x, n, in, d_w, out, d_dy, g_dx, g_dw, 1.0f);
  cpu_->linear_backward(x.data(), n, in, w.data(), out, dy.data(), dx.data(), dw.data(), 1.0f);
  EXPECT_REL_CLOSE(download(g_dx, dx.size()), dx, kBf16Tolerance, "dx");
  EXPECT_REL_CLOSE(download(g_dw, dw.size()), dw, kBf16Tolerance, "dw");
}

// linear_forward_shared rounds x once for its products: bit-identical to a gemm each (the
// default), with the weights read from the shadow or rounded per product.
TEST_F(CudaGemmBf16Test, LinearForwardSharedEqualsAGemmEachBitForBit) {
  SCOPED_TRACE(rng_.trace());
  const int n = 37, in = 32, out = 24, count = 3;
  const auto x = rng_.normal(std::size_t(n) * in), weights = rng_.normal(std::size_t(count) * in * out);
  const float *d_x = upload(x), *d_weights = upload(weights);
  const float* w[count];
  float *shared[count], *plain[count];
  for (int j = 0; j < count; ++j) {
    w[j] = d_weights + std::size_t(j) * in * out;
    shared[j] = poisoned(std::size_t(n) * out);
    plain[j] = poisoned(std::size_t(n) * out);
  }
  for (const bool shadow : {false, true}) {
    gpu_->weights_fixed(shadow ? d_weights : nullptr, shadow ? int64_t(weights.size()) : 0);
    gpu_->linear_forward_shared(d_x, n, in, count, w, out, shared);
    gpu_->Backend<float>::linear_forward_shared(d_x, n, in, count, w, out, plain);
    for (int j = 0; j < count; ++j)
      EXPECT_TRUE(bit_identical(download(shared[j], std::size_t(n) * out), download(plain[j], std::size_t(n) * out)))
          << "product " << j << (shadow ? ", weights from the shadow" : "");
  }
  gpu_->weights_fixed(nullptr, 0);
  std::vector<float> y(std::size_t(n) * out);
  cpu_->gemm(Trans::N, Trans::N, n, out, in, 1.0f, x.data(), in, weights.data() + std::size_t(2) * in * out, out, 0.0f,
             y.data(), out);
  EXPECT_REL_CLOSE(download(shared[2], y.size()), y, kBf16Tolerance, "against the CPU");
}

// The weight shadow (Backend::weights_fixed): a product whose operand lies in the weights reads
// their bf16 copy made at that call, and gets the result of rounding per call bit for bit (gemm;
// linear_backward's dx). It is the copy that is read: weights changed behind it give the old
// result until weights_fixed runs again, while a weight at an offset the shadow cannot serve
// 16-byte aligned (kernels/cuda/weight_shadow.h) is rounded per call and follows at once.
TEST_F(CudaGemmBf16Test, WeightShadowEqualsRoundingPerCallBitForBit) {
  SCOPED_TRACE(rng_.trace());
  const int n = 37, in = 29, out = 53, size = in * out;
  const int64_t aligned = 8, unaligned = aligned + size + 3;  // elements into the weights
  const auto weights = rng_.normal(std::size_t(unaligned + size)), changed = rng_.normal(weights.size());
  const auto x = rng_.normal(std::size_t(n) * in), dy = rng_.normal(std::size_t(n) * out);
  float* d_weights = upload(weights);
  const float *d_x = upload(x), *d_dy = upload(dy);
  using Results = std::vector<std::vector<float>>;
  // y = x·w, then linear_backward's dx and dw, for the weight at `offset`.
  auto products = [&](int64_t offset) {
    const float* w = d_weights + offset;
    float *y = poisoned(std::size_t(n) * out), *dx = poisoned(std::size_t(n) * in);
    float* dw = upload(std::vector<float>(std::size_t(size), 0.0f));
    gpu_->gemm(Trans::N, Trans::N, n, out, in, 1.0f, d_x, in, w, out, 0.0f, y, out);
    gpu_->linear_backward(d_x, n, in, w, out, d_dy, dx, dw, 0.0f);
    return Results{download(y, std::size_t(n) * out), download(dx, std::size_t(n) * in), download(dw, std::size_t(size))};
  };
  auto same = [](const Results& a, const Results& b) {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!bit_identical(a[i], b[i])) return false;
    return true;
  };
  const auto bind = [&] { gpu_->weights_fixed(d_weights, int64_t(weights.size())); };
  const auto unbind = [&] { gpu_->weights_fixed(nullptr, 0); };
  Results before[2];
  for (int k = 0; k < 2; ++k) {
    const int64_t offset = k == 0 ? aligned : unaligned;
    unbind();
    before[k] = products(offset);
    bind();
    EXPECT_TRUE(same(products(offset), before[k])) << "offset " << offset;
  }
  copy_to_device(d_weights, changed.data(), changed.size() * sizeof(float), stream_handle(*gpu_));
  const Results stale = products(aligned), followed = products(unaligned);
  unbind();
  const Results after_aligned = products(aligned), after_unaligned = products(unaligned);
  EXPECT_FALSE(same(after_aligned, before[0])) << "the changed weights change the products";
  EXPECT_TRUE(same(stale, before[0])) << "the aligned weight is read from the shadow";
  EXPECT_TRUE(same(followed, after_unaligned)) << "the unaligned weight is rounded per call";
  bind();
  EXPECT_TRUE(same(products(aligned), after_aligned)) << "weights_fixed again rounds the new weights";
  unbind();
}

// The MLP's ReLU in the products' epilogues (gemm/epilogue_gemm.h): linear_relu_forward and
// relu_linear_backward (its mask from that forward; with and without dx_add) against the same
// calls' unfused default (the products, then the ReLU kernels) and the CPU. dw is the same cuBLAS
// call either way (bit-identical); y and dx come from another cuBLAS entry point on a GPU, so
// within fp32 rounding of the unfused path. EMU_CUBLASLT_NO_EPILOGUE=1 runs the fallbacks.
TEST_F(CudaGemmBf16Test, ReluEpiloguesMatchTheUnfusedProductsAndTheCpu) {
  SCOPED_TRACE(rng_.trace());
  const MlpOperands o = mlp_operands(37, 29, 53, 31);  // forward [n, in]·[in, hidden]; backward of [hidden, out]
  const int n = o.n, in = o.in, hidden = o.hidden, out = o.out;
  const std::size_t nh = std::size_t(n) * hidden;
  auto* mask = arena_.allocate(std::size_t(relu_mask_bytes(n, hidden)), "relu mask");
  float *m = poisoned(nh), *m_plain = poisoned(nh);
  gpu_->linear_relu_forward(o.d_x, n, in, o.d_w1, hidden, m, mask, false);
  gpu_->Backend<float>::linear_relu_forward(o.d_x, n, in, o.d_w1, hidden, m_plain, nullptr, false);
  const auto hm = download(m, nh);
  EXPECT_REL_CLOSE(hm, download(m_plain, nh), 1e-6, "relu(x·w1) against the unfused path");
  std::vector<float> cpu_m(nh);
  cpu_->linear_relu_forward(o.x.data(), n, in, o.w1.data(), hidden, cpu_m.data(), nullptr, false);
  EXPECT_REL_CLOSE(hm, cpu_m, kBf16Tolerance, "relu(x·w1) against the CPU");
  for (const bool with_extra : {false, true}) {
    SCOPED_TRACE(with_extra ? "with dx_add" : "without dx_add");
    const float* add = with_extra ? o.d_extra : nullptr;
    float *dx = poisoned(nh), *dx_plain = poisoned(nh);
    float *dw = upload(std::vector<float>(std::size_t(hidden) * out, 0.5f)), *dw_plain = upload(std::vector<float>(std::size_t(hidden) * out, 0.5f));
    gpu_->relu_linear_backward(m, mask, n, hidden, o.d_w2, out, o.d_dy, add, dx, dw);
    gpu_->Backend<float>::relu_linear_backward(m, nullptr, n, hidden, o.d_w2, out, o.d_dy, add, dx_plain, dw_plain);
    const auto hdx = download(dx, nh);
    EXPECT_REL_CLOSE(hdx, download(dx_plain, nh), 1e-6, "dx against the unfused path");
    EXPECT_TRUE(bit_identical(download(dw, std::size_t(hidden) * out), download(dw_plain, std::size_t(hidden) * out))) << "dw";
    std::vector<float> cpu_dx(nh), cpu_dw(std::size_t(hidden) * out, 0.5f);
    cpu_->relu_linear_backward(hm.data(), nullptr, n, hidden, o.w2.data(), out, o.dy.data(),  // the GPU's ReLU
                               with_extra ? o.extra.data() : nullptr, cpu_dx.data(), cpu_dw.data());
    EXPECT_REL_CLOSE(hdx, cpu_dx, kBf16Tolerance, "dx against the CPU");
    for (std::size_t i = 0; i < nh; ++i) {
      if (!(hm[i] > 0.0f)) {
        ASSERT_EQ(hdx[i], 0.0f) << "the gradient where the ReLU was off, element " << i;
      }
    }
  }
  // Which path ran (a fallback is correct too; the GPU check's log shows the device's answer).
  std::printf("cuBLASLt products: %s\n", describe_epilogues(*gpu_).c_str());
}

// The MLP's hidden kept in bf16 for its products (linear_relu_forward's y_for_products): where
// the epilogue runs, m's memory holds bf16(relu(x·w1)) and the products that read it (the next
// product, forward; relu_linear_backward's dw) read it without a conversion, the same operand a
// conversion of the fp32 m would give (so the same results: within 1e-6 on a GPU, where cuBLASLt
// may pick another kernel for a bf16 output; bit for bit in the emulator); a product reading it
// with another shape throws; the model's end (weights_fixed(nullptr, 0)) ends the holding.
// Under EMU_CUBLASLT_NO_EPILOGUE=1 nothing is held and the same products run on the fp32 m; under
// =bf16 (no epilogue with a bf16 output) nothing is held and the ReLU stays in the fp32 epilogue.
TEST_F(CudaGemmBf16Test, HiddenKeptInBf16IsReadByItsProductsAsTheirRounding) {
  SCOPED_TRACE(rng_.trace());
  const MlpOperands o = mlp_operands(37, 29, 53, 31);
  const int n = o.n, in = o.in, hidden = o.hidden, out = o.out;
  const float* d_res = upload(rng_.normal(std::size_t(n) * out));
  const std::size_t nh = std::size_t(n) * hidden, ny = std::size_t(n) * out, nw = std::size_t(hidden) * out;
  const std::size_t mask_bytes = std::size_t(relu_mask_bytes(n, hidden));
  void *mask = arena_.allocate(mask_bytes, "relu mask"), *mask_plain = arena_.allocate(mask_bytes, "relu mask");
  float *m = poisoned(nh), *m_plain = poisoned(nh);
  gpu_->linear_relu_forward(o.d_x, n, in, o.d_w1, hidden, m, mask, true);
  gpu_->linear_relu_forward(o.d_x, n, in, o.d_w1, hidden, m_plain, mask_plain, false);
  const bool held = holds_bf16_activation(*gpu_, m, n, hidden);
  EXPECT_FALSE(holds_bf16_activation(*gpu_, m_plain, n, hidden)) << "y_for_products false: fp32";
  std::printf("the hidden in bf16: %s (%s)\n", held ? "held" : "not held", describe_epilogues(*gpu_).c_str());
  float *y = poisoned(ny), *y_plain = poisoned(ny);
  gpu_->linear_forward_residual(m, n, hidden, o.d_w2, out, d_res, y);
  gpu_->linear_forward_residual(m_plain, n, hidden, o.d_w2, out, d_res, y_plain);
  EXPECT_REL_CLOSE(download(y, ny), download(y_plain, ny), 1e-6, "the next product forward");
  float *dx = poisoned(nh), *dx_plain = poisoned(nh);
  float *dw = upload(std::vector<float>(nw, 0.5f)), *dw_plain = upload(std::vector<float>(nw, 0.5f));
  gpu_->relu_linear_backward(m, mask, n, hidden, o.d_w2, out, o.d_dy, nullptr, dx, dw);
  gpu_->relu_linear_backward(m_plain, mask_plain, n, hidden, o.d_w2, out, o.d_dy, nullptr, dx_plain, dw_plain);
  EXPECT_REL_CLOSE(download(dx, nh), download(dx_plain, nh), 1e-6, "the gradient before the ReLU");
  EXPECT_REL_CLOSE(download(dw, nw), download(dw_plain, nw), 1e-6, "dw");
  if (held) {
    float* other = poisoned(std::size_t(n - 1) * out);
    EXPECT_THROW(gpu_->gemm(Trans::N, Trans::N, n - 1, out, hidden, 1.0f, m, hidden, o.d_w2, out, 0.0f, other, out),
                 std::logic_error)
        << "a product reading the held hidden with another shape";
  }
  gpu_->weights_fixed(nullptr, 0);
  EXPECT_FALSE(holds_bf16_activation(*gpu_, m, n, hidden)) << "weights_fixed ends the holding";
}

// RMSNorm for products (rmsnorm_forward_for_products): in bf16 y holds bf16 values, each the
// fp32 normalised value rounded to nearest even (bit for bit what a product's conversion of
// rmsnorm_forward's y gives), rstd as rmsnorm_forward's, and a product reading it equals one
// reading the fp32 y bit for bit (the same operand).
TEST_F(CudaGemmBf16Test, RmsNormForProductsWritesTheRoundingItsProductsRead) {
  SCOPED_TRACE(rng_.trace());
  const int n = 37, D = 48, out = 21;
  const auto x = rng_.normal(std::size_t(n) * D, 2.0f), gamma = rng_.normal(D), w = rng_.normal(std::size_t(D) * out);
  const float *d_x = upload(x), *d_gamma = upload(gamma), *d_w = upload(w);
  const std::size_t nd = std::size_t(n) * D, ny = std::size_t(n) * out;
  float *y = poisoned(nd), *y_plain = poisoned(nd), *rstd = poisoned(n), *rstd_plain = poisoned(n);
  gpu_->rmsnorm_forward_for_products(d_x, d_gamma, n, D, y, rstd);
  gpu_->rmsnorm_forward(d_x, d_gamma, n, D, y_plain, rstd_plain);
  ASSERT_TRUE(holds_bf16_activation(*gpu_, y, n, D));
  EXPECT_FALSE(holds_bf16_activation(*gpu_, y_plain, n, D));
  EXPECT_TRUE(bit_identical(download(rstd, n), download(rstd_plain, n))) << "rstd";
  EXPECT_EQ(bf16_values_not_rounded(download(y, (nd + 1) / 2), download(y_plain, nd), nd), 0)
      << "bf16 values that are not the fp32 y rounded";
  float *z = poisoned(ny), *z_plain = poisoned(ny);
  gpu_->gemm(Trans::N, Trans::N, n, out, D, 1.0f, y, D, d_w, out, 0.0f, z, out);
  gpu_->gemm(Trans::N, Trans::N, n, out, D, 1.0f, y_plain, D, d_w, out, 0.0f, z_plain, out);
  EXPECT_TRUE(bit_identical(download(z, ny), download(z_plain, ny))) << "a product reading it";
}

// The head norm's gradient for its projection (head_l2norm_backward_for_product): in bf16 dx holds
// bf16 values, each head_l2norm_backward's fp32 value rounded to nearest even; the
// linear_backward that reads it as dy equals one reading the fp32 dx bit for bit (the same
// operand) and lets go of it, so the buffer reads as fp32 afterwards.
TEST_F(CudaGemmBf16Test, HeadNormGradientForItsProductIsReadOnceAsItsRounding) {
  SCOPED_TRACE(rng_.trace());
  const int n = 37, H = 3, dh = 16, A = H * dh, in = 29;
  const std::size_t na = std::size_t(n) * A;
  const float *d_x = upload(rng_.normal(na)), *d_dy = upload(rng_.normal(na));
  float *y = poisoned(na), *rnorm = poisoned(std::size_t(n) * H);
  gpu_->head_l2norm_forward(d_x, n, H, dh, y, rnorm);
  float *draw = poisoned(na), *draw_plain = poisoned(na);
  gpu_->head_l2norm_backward_for_product(y, rnorm, d_dy, n, H, dh, draw);
  gpu_->head_l2norm_backward(y, rnorm, d_dy, n, H, dh, draw_plain);
  ASSERT_TRUE(holds_bf16_activation(*gpu_, draw, n, A));
  EXPECT_FALSE(holds_bf16_activation(*gpu_, draw_plain, n, A));
  EXPECT_EQ(bf16_values_not_rounded(download(draw, (na + 1) / 2), download(draw_plain, na), na), 0)
      << "bf16 values that are not the fp32 gradient rounded";
  expect_read_once_as_dy(draw, draw_plain, n, in, A);
}

// The MLP's backward through both products (mlp_products_backward): with the epilogue's mask and
// no dm_extra the gradient before the ReLU is written by DRELU in bf16 and read as it is by W1's
// two products; against the same call's default (relu_linear_backward, then linear_backward: dm
// in fp32, rounded by linear_backward) within 1e-6 (bit for bit in the emulator), with the hidden
// held in bf16 or not; with dm_extra the default itself; the CPU within bf16 rounding.
TEST_F(CudaGemmBf16Test, MlpBackwardThroughBothProductsMatchesItsTwoCalls) {
  SCOPED_TRACE(rng_.trace());
  const MlpOperands o = mlp_operands(37, 29, 53, 29);  // du: the operands' dy
  const int n = o.n, in = o.in, hidden = o.hidden, out = o.out;
  const std::size_t nh = std::size_t(n) * hidden, nx = std::size_t(n) * in;
  const std::size_t n1 = std::size_t(in) * hidden, n2 = std::size_t(hidden) * out;
  // The CPU reads the GPU's hidden (the same ReLU pattern; its products round what they read).
  float* m_fp32 = poisoned(nh);
  void* mask_fp32 = arena_.allocate(std::size_t(relu_mask_bytes(n, hidden)), "mask");
  gpu_->linear_relu_forward(o.d_x, n, in, o.d_w1, hidden, m_fp32, mask_fp32, false);
  const auto hm = download(m_fp32, nh);
  for (const bool held : {false, true})
    for (const bool with_extra : {false, true}) {
      SCOPED_TRACE(std::string(held ? "hidden in bf16" : "hidden in fp32") + (with_extra ? ", dm_extra" : ""));
      void* mask = arena_.allocate(std::size_t(relu_mask_bytes(n, hidden)), "relu mask");
      float* m = poisoned(nh);
      gpu_->linear_relu_forward(o.d_x, n, in, o.d_w1, hidden, m, mask, held);
      const float* add = with_extra ? o.d_extra : nullptr;
      float *dm = poisoned(nh), *dx = poisoned(nx), *dw1 = upload(std::vector<float>(n1, 0.5f)),
            *dw2 = upload(std::vector<float>(n2, 0.25f));
      float *dm_d = poisoned(nh), *dx_d = poisoned(nx), *dw1_d = upload(std::vector<float>(n1, 0.5f)),
            *dw2_d = upload(std::vector<float>(n2, 0.25f));
      gpu_->mlp_products_backward(o.d_x, o.d_w1, m, mask, n, in, hidden, o.d_w2, out, o.d_dy, add, dm, dx, dw1, dw2);
      gpu_->Backend<float>::mlp_products_backward(o.d_x, o.d_w1, m, mask, n, in, hidden, o.d_w2, out, o.d_dy, add, dm_d,
                                                  dx_d, dw1_d, dw2_d);
      const auto hx = download(dx, nx), hw1 = download(dw1, n1), hw2 = download(dw2, n2);
      EXPECT_REL_CLOSE(hx, download(dx_d, nx), 1e-6, "dx against the two calls");
      EXPECT_REL_CLOSE(hw1, download(dw1_d, n1), 1e-6, "dw1 against the two calls");
      EXPECT_REL_CLOSE(hw2, download(dw2_d, n2), 1e-6, "dw2 against the two calls");
      std::vector<float> cpu_dm(nh), cpu_dx(nx), cpu_dw1(n1, 0.5f), cpu_dw2(n2, 0.25f);
      cpu_->mlp_products_backward(o.x.data(), o.w1.data(), hm.data(), nullptr, n, in, hidden, o.w2.data(), out,
                                  o.dy.data(), with_extra ? o.extra.data() : nullptr, cpu_dm.data(), cpu_dx.data(),
                                  cpu_dw1.data(), cpu_dw2.data());
      EXPECT_REL_CLOSE(hx, cpu_dx, kBf16Tolerance, "dx against the CPU");
      EXPECT_REL_CLOSE(hw1, cpu_dw1, kBf16Tolerance, "dw1 against the CPU");
      EXPECT_REL_CLOSE(hw2, cpu_dw2, kBf16Tolerance, "dw2 against the CPU");
    }
}

// A product onto the residual stream (gemm/epilogue_gemm.h): linear_forward_residual reads the
// residual as the product's C and writes y, against the same call's default (a copy, then the
// product with beta 1; bit-identical in the emulator, within fp32 rounding on a GPU, where
// cuBLASLt may pick another kernel) and the CPU; the residual untouched; in place (residual = y)
// the default. EMU_CUBLASLT_NO_EPILOGUE=1 leaves the residual product to cuBLASLt (not an
// epilogue), so it runs there too.
TEST_F(CudaGemmBf16Test, ResidualProductMatchesTheCopyAndProductAndTheCpu) {
  SCOPED_TRACE(rng_.trace());
  const int n = 37, in = 29, out = 31;
  const std::size_t ny = std::size_t(n) * out;
  const auto x = rng_.normal(std::size_t(n) * in), w = rng_.normal(std::size_t(in) * out), res = rng_.normal(ny);
  const float *d_x = upload(x), *d_w = upload(w), *d_res = upload(res);
  float *y = poisoned(ny), *y_plain = poisoned(ny);
  gpu_->linear_forward_residual(d_x, n, in, d_w, out, d_res, y);
  gpu_->Backend<float>::linear_forward_residual(d_x, n, in, d_w, out, d_res, y_plain);
  const auto hy = download(y, ny);
  EXPECT_REL_CLOSE(hy, download(y_plain, ny), 1e-6, "y against the copy and the product");
  EXPECT_TRUE(bit_identical(download(d_res, ny), res)) << "the residual is only read";
  std::vector<float> cpu_y(ny);
  cpu_->linear_forward_residual(x.data(), n, in, w.data(), out, res.data(), cpu_y.data());
  EXPECT_REL_CLOSE(hy, cpu_y, kBf16Tolerance, "y against the CPU");
  float* in_place = upload(res);
  gpu_->linear_forward_residual(d_x, n, in, d_w, out, in_place, in_place);
  EXPECT_TRUE(bit_identical(download(in_place, ny), download(y_plain, ny))) << "residual = y: the product with beta 1";
  std::printf("cuBLASLt products: %s\n", describe_epilogues(*gpu_).c_str());
}

using CudaElementwiseTest = CudaTest;

TEST_F(CudaElementwiseTest, FillCopyAddScaleReluMatchCpu) {
  SCOPED_TRACE(rng_.trace());
  const int64_t n = 100003;
  const auto x = rng_.normal(n);
  auto y = rng_.normal(n);
  float* dx = upload(x);
  float* dy = upload(y);
  float* dz = poisoned(n);
  gpu_->copy(dx, n, dz);
  EXPECT_TRUE(bit_identical(download(dz, n), x)) << "copy";
  gpu_->fill(dz, n, 2.5f);
  EXPECT_EQ(download(dz, n), std::vector<float>(n, 2.5f)) << "fill";
  gpu_->add_inplace(dy, dx, n);
  gpu_->scale_inplace(dy, n, -1.5f);
  cpu_->add_inplace(y.data(), x.data(), n);
  cpu_->scale_inplace(y.data(), n, -1.5f);
  EXPECT_TRUE(bit_identical(download(dy, n), y)) << "add_inplace + scale_inplace";
  std::vector<float> r(n), dr = rng_.normal(n);
  const auto g = rng_.normal(n);
  float* d_r = poisoned(n);
  float* d_dr = upload(dr);
  gpu_->relu_forward(dx, n, d_r);
  gpu_->relu_backward(d_r, upload(g), n, d_dr);
  cpu_->relu_forward(x.data(), n, r.data());
  cpu_->relu_backward(r.data(), g.data(), n, dr.data());
  EXPECT_TRUE(bit_identical(download(d_r, n), r)) << "relu_forward";
  EXPECT_TRUE(bit_identical(download(d_dr, n), dr)) << "relu_backward";
  float* d_g = upload(g);
  gpu_->relu_backward(d_r, d_g, n, d_g);  // dx may alias dy
  EXPECT_TRUE(bit_identical(download(d_g, n), dr)) << "relu_backward in place";
}

TEST_F(CudaElementwiseTest, ColumnSumAndBroadcastMatchCpuAndAreDeterministic) {
  SCOPED_TRACE(rng_.trace());
  const int n = 3001, D = 77, rows_table = 7;
  const auto dz = rng_.normal(std::size_t(n) * D);
  auto db = rng_.normal(D);
  const auto table = rng_.normal(std::size_t(rows_table) * D);
  auto out = rng_.normal(std::size_t(n) * D);
  float* d_dz = upload(dz);
  float* d_db = upload(db);
  float* d_db2 = upload(db);
  float* d_out = upload(out);
  gpu_->column_sum_accumulate(d_dz, n, D, d_db);
  gpu_->column_sum_accumulate(d_dz, n, D, d_db2);
  gpu_->add_rows_broadcast(d_out, upload(table), n, rows_table, D);
  cpu_->column_sum_accumulate(dz.data(), n, D, db.data());
  cpu_->add_rows_broadcast(out.data(), table.data(), n, rows_table, D);
  const auto got = download(d_db, D);
  EXPECT_REL_CLOSE(got, db, kFp32Tolerance, "column_sum_accumulate");
  EXPECT_TRUE(bit_identical(got, download(d_db2, D))) << "column sum not deterministic";
  EXPECT_TRUE(bit_identical(download(d_out, out.size()), out)) << "add_rows_broadcast";
}

TEST_F(CudaElementwiseTest, EmbeddingMatchesCpuWithRepeatedTokens) {
  SCOPED_TRACE(rng_.trace());
  const int V = 50, D = 96, n = 2000;  // many repeats per row: the owner sums them in order
  const auto tokens = rng_.ints(n, 0, V - 1);
  const auto table = rng_.normal(std::size_t(V) * D);
  const auto dout = rng_.normal(std::size_t(n) * D);
  auto dtable = rng_.normal(std::size_t(V) * D);
  int32_t* d_tokens = upload(tokens);
  float* d_out = poisoned(std::size_t(n) * D);
  float* d_dtable = upload(dtable);
  float* d_dtable2 = upload(dtable);
  float* d_dout = upload(dout);
  gpu_->embedding_forward(d_tokens, n, upload(table), D, d_out);
  gpu_->embedding_backward(d_tokens, n, d_dout, D, d_dtable);
  gpu_->embedding_backward(d_tokens, n, d_dout, D, d_dtable2);
  std::vector<float> out(std::size_t(n) * D);
  cpu_->embedding_forward(tokens.data(), n, table.data(), D, out.data());
  cpu_->embedding_backward(tokens.data(), n, dout.data(), D, dtable.data());
  EXPECT_TRUE(bit_identical(download(d_out, out.size()), out)) << "embedding_forward";
  const auto got = download(d_dtable, dtable.size());
  // Same order of additions as the CPU (row order per table row): bit-identical.
  EXPECT_TRUE(bit_identical(got, dtable)) << "embedding_backward vs CPU";
  EXPECT_TRUE(bit_identical(got, download(d_dtable2, dtable.size())))
      << "embedding_backward not deterministic";
}

}  // namespace
}  // namespace brt::kernels::cuda::test
