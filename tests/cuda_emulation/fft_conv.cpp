// Host emulation check (tests/cuda_emulation/run.sh): CudaFftConv vs the CPU FftConv<float>.
#include <cstdio>
#include <random>
#include <vector>
#include "compare.h"
#include "kernels/cuda/ssm/fft_conv.h"
using namespace brt::kernels;
static std::mt19937 gen(7);
std::vector<float> normal(size_t n) { std::normal_distribution<float> d(0, 1); std::vector<float> v(n); for (auto& x : v) x = d(gen); return v; }
using emu_check::rel;
int main() {
  int fails = 0;
  for (bool skip : {true, false}) {
    const int B = 2, C = 3, L = 50, F = 5;
    ssm::FftConvDims d{B, C, L, F};
    auto u = normal(size_t(B) * L * F), k = normal(size_t(C) * F * L), ds = normal(size_t(C) * F), dy = normal(size_t(B) * C * L * F);
    auto du = normal(u.size()), dk = normal(k.size()), dds = normal(ds.size());
    auto gdu = du, gdk = dk, gdds = dds;
    std::vector<float> y(dy.size()), gy(dy.size(), NAN);
    ssm::FftConv<float> cpu(L, C);
    cpu.forward(d, k.data(), u.data(), skip ? ds.data() : nullptr, y.data());
    cpu.backward(d, k.data(), u.data(), skip ? ds.data() : nullptr, dy.data(), du.data(), dk.data(), dds.data());
    cuda::CudaFftConv gpu(L, C, 3, 7);
    gpu.forward(d, k.data(), u.data(), skip ? ds.data() : nullptr, gy.data());
    gpu.backward(d, k.data(), u.data(), skip ? ds.data() : nullptr, dy.data(), gdu.data(), gdk.data(), gdds.data());
    double e1 = rel(gy, y), e2 = rel(gdu, du), e3 = rel(gdk, dk), e4 = rel(gdds, dds);
    std::printf("skip=%d y %.3g du %.3g dk %.3g ddskip %.3g\n", skip, e1, e2, e3, e4);
    for (double e : {e1, e2, e3, e4}) if (!(e <= 1e-5)) ++fails;
  }
  std::printf("failures %d\n", fails);
  return fails;
}
