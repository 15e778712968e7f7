// Helpers for the GPU tests: a fixture that skips without a CUDA device, device buffers from
// one arena, fresh random inputs (seed in every failure), and CPU-vs-GPU comparisons by
// relative norm error ||gpu - cpu|| / ||cpu|| (METHOD: the measure that ignores where the
// summation order differs, but not a wrong or unwritten element).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device/device_arena.h"
#include "tests/kernels/cuda/gpu_required.h"

namespace brt::kernels::cuda::test {

constexpr double kFp32Tolerance = 1e-5;  // fp32 kernels vs the CPU backend
constexpr double kBf16Tolerance = 1e-2;  // bf16-operand gemm vs fp32 CPU gemm

// Upload/download ordered on `stream` (the backend's: its kernels run on a non-blocking stream,
// which never waits for the legacy default stream, so a plain cudaMemcpy could land after the
// kernel that reads it), then a wait for that stream: test code only.
void copy_to_device(void* dst, const void* src, std::size_t bytes, CUstream_st* stream);
void copy_to_host(void* dst, const void* src, std::size_t bytes, CUstream_st* stream);

// Random inputs from the test's seed (gpu_required.h: a fixed list, BRT_TEST_SEED overrides),
// printed when the generator is made and named by trace() in every failure.
class Rng {
 public:
  Rng() : Rng(test_seed()) {}
  explicit Rng(uint32_t seed) : seed_(seed), gen_(seed_) {}
  uint32_t seed() const { return seed_; }
  std::string trace() const { return "random seed " + std::to_string(seed_); }
  std::vector<float> normal(std::size_t n, float sd = 1.0f) {
    std::normal_distribution<float> dist(0.0f, sd);
    std::vector<float> out(n);
    for (float& x : out) x = dist(gen_);
    return out;
  }
  std::vector<int32_t> ints(std::size_t n, int lo, int hi) {
    std::uniform_int_distribution<int> dist(lo, hi);
    std::vector<int32_t> out(n);
    for (int32_t& x : out) x = dist(gen_);
    return out;
  }

 private:
  uint32_t seed_;
  std::mt19937 gen_;
};

inline double relative_error(const std::vector<float>& actual, const std::vector<float>& expected) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double d = static_cast<double>(actual[i]) - expected[i];
    diff += d * d;
    ref += static_cast<double>(expected[i]) * expected[i];
  }
  if (!std::isfinite(diff)) return INFINITY;  // NaN never passes
  return ref == 0 ? std::sqrt(diff) : std::sqrt(diff / ref);
}

#define EXPECT_REL_CLOSE(actual, expected, tol, what)                                      \
  do {                                                                                     \
    ASSERT_EQ((actual).size(), (expected).size()) << (what);                               \
    const double brt_err = ::brt::kernels::cuda::test::relative_error((actual), (expected)); \
    EXPECT_LE(brt_err, (tol)) << (what) << ": ||gpu - cpu|| / ||cpu|| = " << brt_err;       \
  } while (0)

// Skips every test when there is no usable GPU (fails under BRT_REQUIRE_GPU=1); otherwise owns
// a CPU backend, a GPU backend and an arena for the test's device buffers.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BRT_REQUIRE_CUDA_DEVICE();
    cpu_ = make_cpu_backend<float>();
    gpu_ = make_cuda_backend(options());
    arena_ = DeviceArena(std::size_t{512} << 20, "test buffers");
  }
  virtual CudaOptions options() const { return {}; }

  template <typename T>
  T* upload(const std::vector<T>& host) {
    T* dev = arena_.allocate_array<T>(host.size() == 0 ? 1 : host.size(), "test buffer");
    if (!host.empty()) copy_to_device(dev, host.data(), host.size() * sizeof(T), stream_handle(*gpu_));
    return dev;
  }
  // An output buffer poisoned with NaN, so an unwritten element fails the comparison.
  float* poisoned(std::size_t n) { return upload(std::vector<float>(n, NAN)); }
  template <typename T>
  std::vector<T> download(const T* dev, std::size_t n) {
    synchronize(*gpu_);
    std::vector<T> host(n);
    if (n > 0) copy_to_host(host.data(), dev, n * sizeof(T), stream_handle(*gpu_));
    return host;
  }
  // A gradient [n, out] the GPU holds in bf16 for one product (`held`) and its fp32 original
  // (`plain`), each as the dy of a linear_backward from in: the same dx and dw bit for bit (the
  // same operand), and `held` is let go after its product.
  void expect_read_once_as_dy(const float* held, const float* plain, int n, int in, int out) {
    const std::size_t nx = std::size_t(n) * in, nw = std::size_t(in) * out;
    const float *x = upload(rng_.normal(nx)), *w = upload(rng_.normal(nw));
    float *dx = poisoned(nx), *dx_plain = poisoned(nx);
    float *dw = upload(std::vector<float>(nw, 0.5f)), *dw_plain = upload(std::vector<float>(nw, 0.5f));
    gpu_->linear_backward(x, n, in, w, out, held, dx, dw, 0.0f);
    gpu_->linear_backward(x, n, in, w, out, plain, dx_plain, dw_plain, 0.0f);
    EXPECT_TRUE(download(dx, nx) == download(dx_plain, nx)) << "dx";
    EXPECT_TRUE(download(dw, nw) == download(dw_plain, nw)) << "dw";
    EXPECT_FALSE(holds_bf16_activation(*gpu_, held, n, out)) << "read once: let go after its product";
  }

  std::unique_ptr<Backend<float>> cpu_;
  std::unique_ptr<Backend<float>> gpu_;
  DeviceArena arena_;
  Rng rng_;
};

inline bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A buffer a bf16 backend holds in bf16 (Backend::*_for_products): how many of its n values (in
// the first half of its bytes, `held` downloaded as (n + 1) / 2 floats) are not the fp32 values
// `plain` rounded to nearest even, the rounding the conversion kernel applies.
inline int bf16_values_not_rounded(const std::vector<float>& held, const std::vector<float>& plain, std::size_t n) {
  std::vector<uint16_t> bits(n);
  std::memcpy(bits.data(), held.data(), n * sizeof(uint16_t));
  int differing = 0;
  for (std::size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &plain[i], 4);
    differing += bits[i] != uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  return differing;
}

}  // namespace brt::kernels::cuda::test
