// cuFFT convolution (kernels/cuda/ssm/fft_conv.h, model.md §7.1) against the CPU FftConv<float> on
// fresh random inputs: forward, backward (accumulating into random gradients), with and
// without the skip term, a call smaller than the plan, and a bit-identical rerun.
#include <vector>

#include "kernels/cuda/ssm/fft_conv.h"
#include "tests/kernels/cuda/cuda_test_util.h"

namespace brt::kernels::cuda::test {
namespace {

using CudaFftConvTest = CudaTest;

TEST_F(CudaFftConvTest, ForwardBackwardMatchCpuFftConv) {
  SCOPED_TRACE(rng_.trace());
  const int B = 2, C = 3, L = 97, F = 6;
  CudaFftConv gpu_conv(L, C, /*max_batch=*/3, /*max_features=*/8);  // larger than the call
  ssm::FftConv<float> cpu_conv(L, C);
  EXPECT_EQ(gpu_conv.n_fft(), cpu_conv.n_fft());
  for (bool with_skip : {true, false}) {
    SCOPED_TRACE(with_skip ? "with dskip" : "without dskip");
    const ssm::FftConvDims d{B, C, L, F};
    const auto u = rng_.normal(std::size_t(B) * L * F), k = rng_.normal(std::size_t(C) * F * L);
    const auto dskip = rng_.normal(std::size_t(C) * F);
    const auto dy = rng_.normal(std::size_t(B) * C * L * F);
    auto du = rng_.normal(u.size()), dk = rng_.normal(k.size()), ddskip = rng_.normal(dskip.size());
    std::vector<float> y(dy.size());
    const float* skip_host = with_skip ? dskip.data() : nullptr;
    float *d_u = upload(u), *d_k = upload(k), *d_dy = upload(dy);
    float* d_skip = with_skip ? upload(dskip) : nullptr;
    float* d_y = poisoned(y.size());
    std::vector<float> runs[2][3];
    for (auto& run : runs) {
      float *d_du = upload(du), *d_dk = upload(dk), *d_dds = upload(ddskip);
      gpu_conv.forward(d, d_k, d_u, d_skip, d_y);
      gpu_conv.backward(d, d_k, d_u, d_skip, d_dy, d_du, d_dk, d_dds);
      run[0] = download(d_du, du.size());
      run[1] = download(d_dk, dk.size());
      run[2] = download(d_dds, ddskip.size());
    }
    cpu_conv.forward(d, k.data(), u.data(), skip_host, y.data());
    cpu_conv.backward(d, k.data(), u.data(), skip_host, dy.data(), du.data(), dk.data(),
                      ddskip.data());
    EXPECT_REL_CLOSE(download(d_y, y.size()), y, kFp32Tolerance, "y");
    EXPECT_REL_CLOSE(runs[0][0], du, kFp32Tolerance, "du");
    EXPECT_REL_CLOSE(runs[0][1], dk, kFp32Tolerance, "dk");
    EXPECT_REL_CLOSE(runs[0][2], ddskip, kFp32Tolerance, "ddskip");
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(bit_identical(runs[0][i], runs[1][i])) << "rerun differs in output " << i;
    }
  }
}

TEST_F(CudaFftConvTest, DimsOutsideThePlanAreRefused) {
  CudaFftConv conv(16, 2, 2, 4);
  EXPECT_THROW(conv.forward({3, 2, 16, 4}, nullptr, nullptr, nullptr, nullptr), std::runtime_error);
  EXPECT_THROW(conv.forward({1, 2, 17, 4}, nullptr, nullptr, nullptr, nullptr), std::runtime_error);
}

}  // namespace
}  // namespace brt::kernels::cuda::test
