// The SSM kernels allocate only in their constructors (backend.h: no allocation in steady
// state): repeated forward/backward calls perform no C++ heap allocation. Counted by replacing
// the global operator new for this test binary. (FFTW's buffers come from fftw_malloc, made
// once in FftConv's constructor.)
#include <atomic>
#include <cstdlib>
#include <new>

#include "kernels/backend.h"
#include "kernels/ssm/fft_conv.h"
#include "kernels/implicit_filter.h"
#include "kernels/ssm/s4d_kernel.h"
#include "tests/kernels/ssm/ssm_test_util.h"

#include "tests/common/allocation_counter.h"

namespace brt::kernels::test {
namespace {

TEST(SsmNoAllocation, SteadyStateCallsDoNotAllocate) {
  const int B = 2, C = 2, F = 8, L = 512, M = 8, R = C * F, O = 16;
  const auto vec = [](std::size_t n, float v) { return std::vector<float>(n, v); };
  auto u = vec(B * L * F, 0.3f), y = vec(B * C * L * F, 0.f), dy = vec(B * C * L * F, 0.1f),
       du = vec(B * L * F, 0.f), k = vec(R * L, 0.f), dk = vec(R * L, 0.f), ds = vec(R, 0.5f),
       dds = vec(R, 0.f);
  auto log_dt = vec(R, -3.f), a_re = vec(R * M, 0.f), a_im = vec(R * M, 0.f),
       c_re = vec(R * M, 0.5f), c_im = vec(R * M, -0.5f), g_dt = vec(R, 0.f),
       g_ar = vec(R * M, 0.f), g_ai = vec(R * M, 0.f), g_cr = vec(R * M, 0.f),
       g_ci = vec(R * M, 0.f);
  ssm::s4d_lin_init_modes(R, M, a_re.data(), a_im.data());
  std::vector<double> state(static_cast<std::size_t>(B) * R * M * 2, 0.0);
  const ssm::S4dParams<float> sp{log_dt.data(), a_re.data(), a_im.data(), c_re.data(), c_im.data()};
  const ssm::S4dGrads<float> sg{g_dt.data(), g_ar.data(), g_ai.data(), g_cr.data(), g_ci.data()};
  auto w0 = vec(3 * O, 0.1f), b0 = vec(O, 0.f), w1 = vec(O * O, 0.1f), b1 = vec(O, 0.f),
       w2 = vec(O * O, 0.1f), b2 = vec(O, 0.f), freq = vec(O, 1.f), wo = vec(O * R, 0.1f);
  auto gw0 = w0, gb0 = b0, gw1 = w1, gb1 = b1, gw2 = w2, gb2 = b2, gf = freq, gwo = wo;
  const ssm::ImplicitFilterParams<float> fp{w0.data(), b0.data(), w1.data(),   b1.data(),
                                            w2.data(), b2.data(), freq.data(), wo.data()};
  const ssm::ImplicitFilterGrads<float> fg{gw0.data(), gb0.data(), gw1.data(), gb1.data(),
                                           gw2.data(), gb2.data(), gf.data(),  gwo.data()};

  ssm::FftConv<float> conv(L, C);
  const auto cpu = make_cpu_backend<float>();
  ssm::ImplicitFilter<float> filter(*cpu, L, R, O);
  const ssm::FftConvDims d{B, C, L, F};
  const ssm::S4dCarryDims cd{B, C, F, M, L};
  const auto run_all = [&] {
    ssm::s4d_kernel_forward<float>({R, M, L}, sp, k.data());
    conv.forward(d, k.data(), u.data(), ds.data(), y.data());
    ssm::s4d_carry_apply<float>(cd, sp, state.data(), y.data());
    ssm::s4d_carry_update<float>(cd, sp, u.data(), state.data());
    conv.backward(d, k.data(), u.data(), ds.data(), dy.data(), du.data(), dk.data(), dds.data());
    ssm::s4d_kernel_backward<float>({R, M, L}, sp, dk.data(), sg);
    filter.forward(fp, k.data());
    filter.backward(fp, dk.data(), fg);
  };
  run_all();  // warm-up: OpenMP and OpenBLAS thread pools start here
  const long before = brt::testing::heap_allocations().load();
  run_all();
  run_all();
  EXPECT_EQ(brt::testing::heap_allocations().load() - before, 0);
}

}  // namespace
}  // namespace brt::kernels::test
