// The counting backend's bf16 conversions with the weight shadow (Backend::weights_fixed,
// kernels/cuda/weight_shadow.h): the weights are counted as converted once, in one launch per
// run, and a product's operand is counted as converted unless it reads the shadow (wholly inside
// the weights, contiguous rows, 16-byte aligned in bf16). The emulator's launch count of a
// step (tests/cuda_emulation/launches.cpp) checks the same rule against the CUDA backend.
#include <gtest/gtest.h>

#include <stdexcept>

#include "kernels/counting_backend.h"
#include "kernels/meta_memory.h"

namespace brt::kernels {
namespace {

class CountingConversions : public ::testing::Test {
 protected:
  MetaMemory meta_;
  CountingBackend<float> be_{meta_};
  float* buffer(std::size_t n) { return static_cast<float*>(meta_.allocate(n * sizeof(float), "test")); }
  // Conversions (elements, launches) counted since the last call.
  std::pair<double, int64_t> since() {
    const auto c = be_.bf16_conversions();
    const std::pair<double, int64_t> d{c.elements - last_.first, c.launches - last_.second};
    last_ = {c.elements, c.launches};
    return d;
  }
  std::pair<double, int64_t> last_{0.0, 0};
};

TEST_F(CountingConversions, WeightOperandsReadTheShadowOthersAreConvertedPerProduct) {
  const int M = 4, N = 10, K = 8, n_weights = 1000;
  float *w = buffer(n_weights), *act = buffer(1000), *out = buffer(1000);
  using P = std::pair<double, int64_t>;
  be_.gemm(Trans::N, Trans::N, M, N, K, 1.0f, act, K, w + 8, N, 0.0f, out, N);
  EXPECT_EQ(since(), P(M * K + K * N, 2)) << "nothing bound: both operands";
  be_.weights_fixed(w, n_weights);
  EXPECT_EQ(since(), P(n_weights, 1)) << "the shadow: the weights once";
  be_.gemm(Trans::N, Trans::N, M, N, K, 1.0f, act, K, w + 8, N, 0.0f, out, N);
  EXPECT_EQ(since(), P(M * K, 1)) << "an aligned weight reads the shadow";
  be_.gemm(Trans::N, Trans::T, M, N, K, 1.0f, act, K, w + 16, K, 0.0f, out, N);
  EXPECT_EQ(since(), P(M * K, 1)) << "transposed, the same";
  be_.gemm(Trans::N, Trans::N, M, N, K, 1.0f, act, K, w + 3, N, 0.0f, out, N);
  EXPECT_EQ(since(), P(M * K + K * N, 2)) << "unaligned in bf16";
  be_.gemm(Trans::N, Trans::N, M, N, K, 1.0f, act, K, w + 8, N + 2, 0.0f, out, N);
  EXPECT_EQ(since(), P(M * K + K * N, 2)) << "rows not contiguous";
  be_.gemm(Trans::N, Trans::N, M, N, K, 1.0f, act, K, w + n_weights - 40, N, 0.0f, out, N);
  EXPECT_EQ(since(), P(M * K + K * N, 2)) << "running past the weights' end";
  be_.linear_backward(act, M, K, w + 8, N, act + 200, out, out + 200, 1.0f);
  EXPECT_EQ(since(), P(M * N + M * K, 2)) << "linear_backward: dy and x, not w";
  be_.weights_fixed(nullptr, 0);
  EXPECT_EQ(since(), P(0, 0));
  be_.gemm(Trans::N, Trans::N, M, N, K, 1.0f, act, K, w + 8, N, 0.0f, out, N);
  EXPECT_EQ(since(), P(M * K + K * N, 2)) << "released: per product again";
}

// linear_relu_forward's y_for_products (kernels/cuda/bf16_activations.h): the hidden is written
// in bf16 and its products convert nothing until weights_fixed(nullptr, 0) (the model's end), not
// a forward's weights_fixed(values); without the flag it is
// converted per product as any activation; read with another shape, the contract is broken.
TEST_F(CountingConversions, AHiddenKeptInBf16IsNotConvertedByItsProducts) {
  const int n = 4, in = 8, F = 16, D = 8;
  float *x = buffer(n * in), *w1 = buffer(in * F), *w2 = buffer(F * D), *m = buffer(n * F), *out = buffer(n * D);
  auto* mask = meta_.allocate(std::size_t(relu_mask_bytes(n, F)), "mask");
  using P = std::pair<double, int64_t>;
  be_.linear_relu_forward(x, n, in, w1, F, m, mask, true);
  EXPECT_EQ(since(), P(n * in + in * F, 2)) << "the first product's operands";
  be_.linear_forward_residual(m, n, F, w2, D, out, out);
  EXPECT_EQ(since(), P(F * D, 1)) << "the hidden read as it is: only the weight converted";
  EXPECT_THROW(be_.gemm(Trans::N, Trans::N, n - 1, D, F, 1.0f, m, F, w2, D, 0.0f, out, D), std::logic_error);
  EXPECT_THROW(be_.gemm(Trans::N, Trans::N, 1, D, F, 1.0f, m + F, F, w2, D, 0.0f, out, D), std::logic_error)
      << "a row from inside the held hidden";
  be_.weights_fixed(w2, F * D);
  be_.linear_forward_residual(m, n, F, w2, D, out, out);
  EXPECT_EQ(since().first, F * D) << "a forward's weights_fixed keeps it (its shadow converted, the hidden not)";
  be_.weights_fixed(nullptr, 0);
  be_.linear_forward_residual(m, n, F, w2, D, out, out);
  EXPECT_EQ(since(), P(n * F + F * D, 2)) << "after weights_fixed the hidden is fp32 again";
  be_.linear_relu_forward(x, n, in, w1, F, m, mask, false);
  since();
  be_.linear_forward_residual(m, n, F, w2, D, out, out);
  EXPECT_EQ(since(), P(n * F + F * D, 2)) << "without y_for_products: converted per product";
}

}  // namespace
}  // namespace brt::kernels
