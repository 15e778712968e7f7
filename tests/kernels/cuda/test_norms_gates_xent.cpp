// GPU RMSNorm, head L2 norm, gates and the fused softmax cross-entropy against the CPU
// backend, forward and backward (backward accumulates into random initial gradients, or overwrites
// them where the op writes: head_l2norm_backward).
#include <cstring>
#include <string>
#include <vector>

#include "tests/kernels/cuda/cuda_test_util.h"

namespace brt::kernels::cuda::test {
namespace {

using CudaNormTest = CudaTest;

TEST_F(CudaNormTest, RmsNormForwardBackwardMatchCpu) {
  SCOPED_TRACE(rng_.trace());
  const int n = 301, D = 333;
  const auto x = rng_.normal(std::size_t(n) * D, 2.0f);
  const auto gamma = rng_.normal(D);
  const auto dy = rng_.normal(x.size());
  auto dx = rng_.normal(x.size());
  auto dgamma = rng_.normal(D);
  std::vector<float> y(x.size()), rstd(n);
  float *d_x = upload(x), *d_gamma = upload(gamma), *d_y = poisoned(y.size()),
        *d_rstd = poisoned(n), *d_dx = upload(dx), *d_dgamma = upload(dgamma);
  gpu_->rmsnorm_forward(d_x, d_gamma, n, D, d_y, d_rstd);
  gpu_->rmsnorm_backward(d_x, d_gamma, d_rstd, upload(dy), n, D, d_dx, d_dgamma);
  cpu_->rmsnorm_forward(x.data(), gamma.data(), n, D, y.data(), rstd.data());
  cpu_->rmsnorm_backward(x.data(), gamma.data(), rstd.data(), dy.data(), n, D, dx.data(),
                         dgamma.data());
  EXPECT_REL_CLOSE(download(d_y, y.size()), y, kFp32Tolerance, "rmsnorm y");
  EXPECT_REL_CLOSE(download(d_rstd, n), rstd, kFp32Tolerance, "rmsnorm rstd");
  EXPECT_REL_CLOSE(download(d_dx, dx.size()), dx, kFp32Tolerance, "rmsnorm dx");
  EXPECT_REL_CLOSE(download(d_dgamma, D), dgamma, kFp32Tolerance, "rmsnorm dgamma");
}

// rmsnorm_backward_residual's one kernel equals its definition on the device (fill / copy /
// add_inplace, then rmsnorm_backward: bit for bit, the same additions in the same order) and
// the CPU's one pass to fp32 rounding (the row dots sum in another order), in all four forms.
TEST_F(CudaNormTest, RmsNormBackwardIntoTheResidualEqualsItsDefinition) {
  SCOPED_TRACE(rng_.trace());
  const int n = 67, D = 333;
  const std::size_t size = std::size_t(n) * D;
  const auto x = rng_.normal(size, 2.0f), gamma = rng_.normal(D), dy = rng_.normal(size);
  const auto residual = rng_.normal(size), dx0 = rng_.normal(size), dgamma0 = rng_.normal(D);
  std::vector<float> y(size), rstd(n);
  cpu_->rmsnorm_forward(x.data(), gamma.data(), n, D, y.data(), rstd.data());
  float *d_x = upload(x), *d_gamma = upload(gamma), *d_dy = upload(dy), *d_res = upload(residual);
  float *d_y = poisoned(size), *d_rstd = poisoned(n);
  gpu_->rmsnorm_forward(d_x, d_gamma, n, D, d_y, d_rstd);
  for (const bool accumulate : {false, true})
    for (const bool with_residual : {false, true}) {
      SCOPED_TRACE(std::string(accumulate ? "accumulate" : "write") + (with_residual ? ", residual" : ", none"));
      const float* g_res = with_residual ? d_res : nullptr;
      float *d_dx = upload(dx0), *d_dgamma = upload(dgamma0), *d_dx_def = upload(dx0), *d_dgamma_def = upload(dgamma0);
      gpu_->rmsnorm_backward_residual(d_x, d_gamma, d_rstd, d_dy, g_res, accumulate, n, D, d_dx, d_dgamma);
      gpu_->Backend<float>::rmsnorm_backward_residual(d_x, d_gamma, d_rstd, d_dy, g_res, accumulate, n, D,
                                                      d_dx_def, d_dgamma_def);
      const auto dx = download(d_dx, size), dx_def = download(d_dx_def, size);
      const auto dgamma = download(d_dgamma, D), dgamma_def = download(d_dgamma_def, D);
      EXPECT_EQ(std::memcmp(dx.data(), dx_def.data(), size * sizeof(float)), 0) << "dx";
      EXPECT_EQ(std::memcmp(dgamma.data(), dgamma_def.data(), D * sizeof(float)), 0) << "dgamma";
      auto dx_cpu = dx0, dgamma_cpu = dgamma0;
      cpu_->rmsnorm_backward_residual(x.data(), gamma.data(), rstd.data(), dy.data(),
                                      with_residual ? residual.data() : nullptr, accumulate, n, D,
                                      dx_cpu.data(), dgamma_cpu.data());
      EXPECT_REL_CLOSE(dx, dx_cpu, kFp32Tolerance, "dx");
      EXPECT_REL_CLOSE(dgamma, dgamma_cpu, kFp32Tolerance, "dgamma");
    }
}

TEST_F(CudaNormTest, HeadL2NormForwardBackwardMatchCpu) {
  SCOPED_TRACE(rng_.trace());
  const int n = 257, H = 3, dh = 40;
  const std::size_t size = std::size_t(n) * H * dh;
  const auto x = rng_.normal(size);
  const auto dy = rng_.normal(size);
  auto dx = rng_.normal(size);  // overwritten by both backends
  std::vector<float> y(size), rnorm(std::size_t(n) * H);
  float *d_y = poisoned(size), *d_rnorm = poisoned(rnorm.size()), *d_dx = upload(dx);
  gpu_->head_l2norm_forward(upload(x), n, H, dh, d_y, d_rnorm);
  gpu_->head_l2norm_backward(d_y, d_rnorm, upload(dy), n, H, dh, d_dx);
  cpu_->head_l2norm_forward(x.data(), n, H, dh, y.data(), rnorm.data());
  cpu_->head_l2norm_backward(y.data(), rnorm.data(), dy.data(), n, H, dh, dx.data());
  EXPECT_REL_CLOSE(download(d_y, size), y, kFp32Tolerance, "head_l2norm y");
  EXPECT_REL_CLOSE(download(d_rnorm, rnorm.size()), rnorm, kFp32Tolerance, "head_l2norm rnorm");
  EXPECT_REL_CLOSE(download(d_dx, size), dx, kFp32Tolerance, "head_l2norm dx");
}

using CudaGateTest = CudaTest;

TEST_F(CudaGateTest, FixedGateForwardBackwardMatchCpu) {
  SCOPED_TRACE(rng_.trace());
  const int n = 1000, D = 130;
  const std::size_t size = std::size_t(n) * D;
  const auto carry = rng_.normal(size), u = rng_.normal(size), dout = rng_.normal(size);
  const auto bias = rng_.normal(D);
  auto dcarry = rng_.normal(size), du = rng_.normal(size), dbias = rng_.normal(D);
  std::vector<float> out(size);
  float *d_carry = upload(carry), *d_u = upload(u), *d_bias = upload(bias);
  float *d_out = poisoned(size), *d_dcarry = upload(dcarry), *d_du = upload(du),
        *d_dbias = upload(dbias);
  gpu_->fixed_gate_forward(d_carry, d_u, d_bias, n, D, d_out);
  gpu_->fixed_gate_backward(d_carry, d_u, d_bias, upload(dout), n, D, d_dcarry, d_du, d_dbias);
  cpu_->fixed_gate_forward(carry.data(), u.data(), bias.data(), n, D, out.data());
  cpu_->fixed_gate_backward(carry.data(), u.data(), bias.data(), dout.data(), n, D,
                            dcarry.data(), du.data(), dbias.data());
  EXPECT_REL_CLOSE(download(d_out, size), out, kFp32Tolerance, "fixed gate out");
  EXPECT_REL_CLOSE(download(d_dcarry, size), dcarry, kFp32Tolerance, "fixed gate dcarry");
  EXPECT_REL_CLOSE(download(d_du, size), du, kFp32Tolerance, "fixed gate du");
  EXPECT_REL_CLOSE(download(d_dbias, D), dbias, kFp32Tolerance, "fixed gate dbias");
}

TEST_F(CudaGateTest, LstmGateForwardBackwardMatchCpu) {
  SCOPED_TRACE(rng_.trace());
  const int n = 500, D = 70;
  const std::size_t size = std::size_t(n) * D;
  const auto carry = rng_.normal(size), u = rng_.normal(size), zf = rng_.normal(size),
             zi = rng_.normal(size), dout = rng_.normal(size);
  auto dcarry = rng_.normal(size), du = rng_.normal(size), dzf = rng_.normal(size),
       dzi = rng_.normal(size);
  std::vector<float> out(size), f(size), i(size);
  float *d_carry = upload(carry), *d_u = upload(u);
  float *d_out = poisoned(size), *d_f = poisoned(size), *d_i = poisoned(size);
  float *d_dcarry = upload(dcarry), *d_du = upload(du), *d_dzf = upload(dzf),
        *d_dzi = upload(dzi);
  gpu_->lstm_gate_forward(d_carry, d_u, upload(zf), upload(zi), n, D, d_out, d_f, d_i);
  gpu_->lstm_gate_backward(d_carry, d_u, d_f, d_i, upload(dout), n, D, d_dcarry, d_du, d_dzf,
                           d_dzi);
  cpu_->lstm_gate_forward(carry.data(), u.data(), zf.data(), zi.data(), n, D, out.data(),
                          f.data(), i.data());
  cpu_->lstm_gate_backward(carry.data(), u.data(), f.data(), i.data(), dout.data(), n, D,
                           dcarry.data(), du.data(), dzf.data(), dzi.data());
  EXPECT_REL_CLOSE(download(d_out, size), out, kFp32Tolerance, "lstm out");
  EXPECT_REL_CLOSE(download(d_f, size), f, kFp32Tolerance, "lstm f");
  EXPECT_REL_CLOSE(download(d_i, size), i, kFp32Tolerance, "lstm i");
  EXPECT_REL_CLOSE(download(d_dcarry, size), dcarry, kFp32Tolerance, "lstm dcarry");
  EXPECT_REL_CLOSE(download(d_du, size), du, kFp32Tolerance, "lstm du");
  EXPECT_REL_CLOSE(download(d_dzf, size), dzf, kFp32Tolerance, "lstm dzf");
  EXPECT_REL_CLOSE(download(d_dzi, size), dzi, kFp32Tolerance, "lstm dzi");
}

using CudaXentTest = CudaTest;

TEST_F(CudaXentTest, FusedSoftmaxCrossEntropyMatchesCpuInPlaceAndIsDeterministic) {
  SCOPED_TRACE(rng_.trace());
  const int n = 37, V = 5003;
  const auto logits = rng_.normal(std::size_t(n) * V, 3.0f);
  const auto targets = rng_.ints(n, 0, V - 1);
  std::vector<uint8_t> mask(n, 1);
  for (int r = 0; r < n; r += 5) mask[r] = 0;
  std::vector<float> dlogits(logits.size()), row_loss(n);
  const double cpu_total = cpu_->softmax_xent_forward_backward(
      logits.data(), targets.data(), mask.data(), n, V, 0.25f, dlogits.data(), row_loss.data());
  int32_t* d_targets = upload(targets);
  uint8_t* d_mask = upload(mask);
  float* d_logits = upload(logits);  // dlogits aliases logits (allowed by backend.h)
  float* d_loss = poisoned(n);
  const double gpu_total = gpu_->softmax_xent_forward_backward(d_logits, d_targets, d_mask, n, V,
                                                               0.25f, d_logits, d_loss);
  EXPECT_NEAR(gpu_total, cpu_total, 1e-5 * std::abs(cpu_total));
  EXPECT_REL_CLOSE(download(d_logits, logits.size()), dlogits, kFp32Tolerance, "dlogits");
  EXPECT_REL_CLOSE(download(d_loss, n), row_loss, kFp32Tolerance, "row_loss");
  float* d_logits2 = upload(logits);
  const double again = gpu_->softmax_xent_forward_backward(d_logits2, d_targets, d_mask, n, V,
                                                           0.25f, d_logits2, d_loss);
  EXPECT_EQ(again, gpu_total) << "loss sum not deterministic";
}

TEST_F(CudaXentTest, TargetOutsideVocabularyThrowsNamingTheRow) {
  const int n = 4, V = 10;
  const auto logits = rng_.normal(std::size_t(n) * V);
  const std::vector<int32_t> targets = {1, 2, 10, 3};
  const std::vector<uint8_t> mask(n, 1);
  float* d_logits = upload(logits);
  float* d_loss = poisoned(n);
  try {
    gpu_->softmax_xent_forward_backward(d_logits, upload(targets), upload(mask), n, V, 1.0f,
                                        d_logits, d_loss);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("row 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace brt::kernels::cuda::test
