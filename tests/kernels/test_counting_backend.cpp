// The counting backend's bf16 conversions with the weight shadow (Backend::weights_fixed,
// kernels/cuda/weight_shadow.h): the weights are counted as converted once, in one launch per
// run, and a product's operand is counted as converted unless it reads the shadow (wholly inside
// the weights, contiguous rows, 16-byte aligned in bf16). The emulator's launch count of a
// step (tests/cuda_emulation/launches.cpp) checks the same rule against the CUDA backend.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace brt::kernels
