// The BST SSM's backend calls besides the convolution (kernels/cuda/ssm/ssm.cu, model.md §7.1, §7.3)
// against the CPU backend on fresh random inputs: strided row copies (bit-identical), the S4D
// carry's update (double state), response (accumulated into random y) and parameter gradient
// (accumulated into random gradients, one stream inactive), and a bit-identical rerun; S4D
// kernel generation and its backward (L past the CPU's 1024-tap re-anchoring); plus the
// backend's convolver (make_fft_conv) against the CPU one; the implicit filter network
// (model.md §7.1 unstructured) run wholly on the device against the CPU backend's.
#include <cmath>
#include <vector>

#include "kernels/implicit_filter.h"
#include "tests/kernels/cuda/cuda_test_util.h"

namespace brt::kernels::cuda::test {
namespace {

using CudaSsmTest = CudaTest;

TEST_F(CudaSsmTest, CopyRowsIsExact) {
  SCOPED_TRACE(rng_.trace());
  const auto src = rng_.normal(7 * 13);
  std::vector<float> dst(7 * 10, 0.0f);
  float *d_src = upload(src), *d_dst = upload(dst);
  gpu_->copy_rows(d_src + 2, 13, 7, 5, d_dst + 1, 10);
  cpu_->copy_rows(src.data() + 2, 13, 7, 5, dst.data() + 1, 10);
  EXPECT_TRUE(bit_identical(download(d_dst, dst.size()), dst));
}

TEST_F(CudaSsmTest, S4dCarryMatchesCpu) {
  SCOPED_TRACE(rng_.trace());
  const ssm::S4dCarryDims d{2, 3, 5, 4, 37};  // B, C, Ds, M, L
  const std::size_t R = std::size_t(d.channels) * d.features, RM = R * d.modes;
  std::vector<float> log_dt(R), a_re(RM, std::log(0.5f)), a_im(RM), c_re = rng_.normal(RM),
      c_im = rng_.normal(RM);
  const auto unit = rng_.normal(R);
  for (std::size_t r = 0; r < R; ++r) log_dt[r] = -4.6f + 0.5f * std::tanh(unit[r]);
  for (std::size_t i = 0; i < RM; ++i) a_im[i] = 3.14159265f * float(i % std::size_t(d.modes));
  std::vector<double> state(std::size_t(d.batch) * RM * 2);
  const auto s = rng_.normal(state.size());
  for (std::size_t i = 0; i < state.size(); ++i) state[i] = s[i];
  const auto u = rng_.normal(std::size_t(d.batch) * d.length * d.features);
  const auto dy = rng_.normal(std::size_t(d.batch) * d.channels * d.length * d.features);
  auto y = rng_.normal(dy.size());
  std::vector<std::vector<float>> grads = {rng_.normal(R), rng_.normal(RM), rng_.normal(RM),
                                           rng_.normal(RM), rng_.normal(RM)};
  const std::vector<uint8_t> active = {1, 0};

  const ssm::S4dParams<float> p_dev{upload(log_dt), upload(a_re), upload(a_im), upload(c_re),
                                    upload(c_im)};
  const float *d_u = upload(u), *d_dy = upload(dy);
  const uint8_t* d_active = upload(active);
  std::vector<float> runs[2][7];
  for (auto& run : runs) {
    double* d_state = upload(state);
    float* d_y = upload(y);
    std::vector<float*> d_g;
    for (const auto& g : grads) d_g.push_back(upload(g));
    gpu_->s4d_carry_apply(d, p_dev, d_state, d_y);
    gpu_->s4d_carry_apply_backward(d, p_dev, d_state, d_active, d_dy,
                                   {d_g[0], d_g[1], d_g[2], d_g[3], d_g[4]});
    gpu_->s4d_carry_update(d, p_dev, d_u, d_state);
    run[0] = download(d_y, y.size());
    for (int i = 0; i < 5; ++i) run[1 + i] = download(d_g[size_t(i)], grads[size_t(i)].size());
    const auto st = download(d_state, state.size());
    run[6].assign(st.begin(), st.end());  // (float view of the state for the rerun check)
  }
  const ssm::S4dParams<float> p{log_dt.data(), a_re.data(), a_im.data(), c_re.data(), c_im.data()};
  cpu_->s4d_carry_apply(d, p, state.data(), y.data());
  cpu_->s4d_carry_apply_backward(d, p, state.data(), active.data(), dy.data(),
                                 {grads[0].data(), grads[1].data(), grads[2].data(),
                                  grads[3].data(), grads[4].data()});
  cpu_->s4d_carry_update(d, p, u.data(), state.data());
  EXPECT_REL_CLOSE(runs[0][0], y, kFp32Tolerance, "y + carry response");
  const char* names[5] = {"dlog_dt", "da_re", "da_im", "dc_re", "dc_im"};
  for (int i = 0; i < 5; ++i) EXPECT_REL_CLOSE(runs[0][1 + i], grads[size_t(i)], kFp32Tolerance, names[i]);
  const std::vector<float> state_f(state.begin(), state.end());
  EXPECT_REL_CLOSE(runs[0][6], state_f, kFp32Tolerance, "updated state");
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(bit_identical(runs[0][i], runs[1][i])) << "rerun differs in " << i;
}

TEST_F(CudaSsmTest, S4dKernelGenerationMatchesCpu) {
  SCOPED_TRACE(rng_.trace());
  const ssm::S4dDims d{6, 8, 1500};  // R filters, M modes, L taps
  const std::size_t R = std::size_t(d.filters), RM = R * std::size_t(d.modes);
  std::vector<float> log_dt(R), a_re(RM), a_im(RM), c_re = rng_.normal(RM), c_im = rng_.normal(RM);
  const auto unit = rng_.normal(R + RM);
  for (std::size_t r = 0; r < R; ++r) log_dt[r] = -4.6f + 0.5f * std::tanh(unit[r]);
  for (std::size_t i = 0; i < RM; ++i) {
    a_re[i] = std::log(0.5f) + 0.3f * std::tanh(unit[R + i]);
    a_im[i] = 3.14159265f * float(i % std::size_t(d.modes));
  }
  const auto dkernel = rng_.normal(R * std::size_t(d.length));
  std::vector<std::vector<float>> grads = {rng_.normal(R), rng_.normal(RM), rng_.normal(RM),
                                           rng_.normal(RM), rng_.normal(RM)};
  const ssm::S4dParams<float> p_dev{upload(log_dt), upload(a_re), upload(a_im), upload(c_re),
                                    upload(c_im)};
  const float* d_dk = upload(dkernel);
  std::vector<float> runs[2][6];
  for (auto& run : runs) {
    std::vector<float*> d_g;
    for (const auto& g : grads) d_g.push_back(upload(g));
    float* d_kernel = poisoned(dkernel.size());
    gpu_->s4d_kernel_forward(d, p_dev, d_kernel);
    gpu_->s4d_kernel_backward(d, p_dev, d_dk, {d_g[0], d_g[1], d_g[2], d_g[3], d_g[4]});
    run[0] = download(d_kernel, dkernel.size());
    for (int i = 0; i < 5; ++i) run[1 + i] = download(d_g[size_t(i)], grads[size_t(i)].size());
  }
  const ssm::S4dParams<float> p{log_dt.data(), a_re.data(), a_im.data(), c_re.data(), c_im.data()};
  std::vector<float> kernel(dkernel.size());
  cpu_->s4d_kernel_forward(d, p, kernel.data());
  cpu_->s4d_kernel_backward(d, p, dkernel.data(), {grads[0].data(), grads[1].data(),
                                                   grads[2].data(), grads[3].data(), grads[4].data()});
  EXPECT_REL_CLOSE(runs[0][0], kernel, kFp32Tolerance, "K");
  const char* names[5] = {"dlog_dt", "da_re", "da_im", "dc_re", "dc_im"};
  for (int i = 0; i < 5; ++i) EXPECT_REL_CLOSE(runs[0][1 + i], grads[size_t(i)], kFp32Tolerance, names[i]);
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(bit_identical(runs[0][i], runs[1][i])) << "rerun differs in " << i;
}

TEST_F(CudaSsmTest, BackendConvolverMatchesCpu) {
  SCOPED_TRACE(rng_.trace());
  const ssm::FftConvDims d{2, 2, 40, 3};
  auto gpu_conv = gpu_->make_fft_conv(d.length, d.channels, d.batch, d.features);
  auto cpu_conv = cpu_->make_fft_conv(d.length, d.channels, d.batch, d.features);
  const auto u = rng_.normal(std::size_t(d.batch) * d.length * d.features);
  const auto k = rng_.normal(std::size_t(d.channels) * d.features * d.length);
  const auto dskip = rng_.normal(std::size_t(d.channels) * d.features);
  std::vector<float> y(std::size_t(d.batch) * d.channels * d.length * d.features);
  float* d_y = poisoned(y.size());
  gpu_conv->forward(d, upload(k), upload(u), upload(dskip), d_y);
  cpu_conv->forward(d, k.data(), u.data(), dskip.data(), y.data());
  EXPECT_REL_CLOSE(download(d_y, y.size()), y, kFp32Tolerance, "y");
}

// The filter network as device calls (cuBLAS gemm, sine_forward/backward, the decay, column
// sums) vs the CPU backend's: K, and every parameter gradient accumulated into random values;
// a rerun bit-identical.
TEST_F(CudaSsmTest, ImplicitFilterNetworkOnTheDeviceMatchesCpu) {
  SCOPED_TRACE(rng_.trace());
  const int L = 300, R = 6, O = 64;
  const std::vector<std::size_t> sizes = {3 * O, O, O * O, O, O * O, O, O, std::size_t(O) * R};
  std::vector<std::vector<float>> values, grads;
  for (std::size_t n : sizes) {
    values.push_back(rng_.normal(n, 0.3f));
    grads.push_back(rng_.normal(n));
  }
  for (auto& w : values[6]) w += 1.0f;  // ω around its init 1
  const auto dkernel = rng_.normal(std::size_t(R) * L);
  auto params = [](const std::vector<const float*>& v) {
    return ssm::ImplicitFilterParams<float>{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
  };
  auto grads_of = [](const std::vector<float*>& g) {
    return ssm::ImplicitFilterGrads<float>{g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]};
  };
  std::vector<float> runs[2][9];
  for (auto& run : runs) {
    ssm::ImplicitFilter<float> net(*gpu_, L, R, O);
    std::vector<const float*> d_v;
    std::vector<float*> d_g;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      d_v.push_back(upload(values[i]));
      d_g.push_back(upload(grads[i]));
    }
    float* d_k = poisoned(dkernel.size());
    float* d_dk = upload(dkernel);
    net.forward(params(d_v), d_k);
    net.backward(params(d_v), d_dk, grads_of(d_g));
    run[0] = download(d_k, dkernel.size());
    for (std::size_t i = 0; i < sizes.size(); ++i) run[1 + i] = download(d_g[i], sizes[i]);
  }
  ssm::ImplicitFilter<float> net(*cpu_, L, R, O);
  std::vector<const float*> h_v;
  std::vector<float*> h_g;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    h_v.push_back(values[i].data());
    h_g.push_back(grads[i].data());
  }
  std::vector<float> kernel(dkernel.size()), dk = dkernel;
  net.forward(params(h_v), kernel.data());
  net.backward(params(h_v), dk.data(), grads_of(h_g));
  EXPECT_REL_CLOSE(runs[0][0], kernel, kFp32Tolerance, "K");
  const char* names[8] = {"dw0", "db0", "dw1", "db1", "dw2", "db2", "dfreq", "dw_out"};
  for (int i = 0; i < 8; ++i)
    EXPECT_REL_CLOSE(runs[0][1 + i], grads[std::size_t(i)], kFp32Tolerance, names[i]);
  for (int i = 0; i < 9; ++i) EXPECT_TRUE(bit_identical(runs[0][i], runs[1][i])) << "rerun differs in " << i;
}

}  // namespace
}  // namespace brt::kernels::cuda::test
