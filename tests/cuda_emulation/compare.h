// The emulator checks' one comparison (tests/cuda_emulation/*.cpp): relative norm error
// ||emulated - cpu|| / ||cpu|| (NaN or Inf never passes), and a failure count for the exit status.
// The checks that call launchers directly read device memory as host memory, so every
// comparison first waits for the emulated device (whose streams run only when waited for).
#pragma once
#include <cuda_runtime.h>  // the emulator's

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace emu_check {

inline double rel(const float* a, const float* b, int64_t n) {
  if (cudaDeviceSynchronize() != cudaSuccess) return INFINITY;  // a device fault fails the check
  double d = 0, r = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = double(a[i]) - b[i];
    d += e * e;
    r += double(b[i]) * b[i];
  }
  return std::isfinite(d) ? std::sqrt(d / (r > 0 ? r : 1)) : INFINITY;
}
inline double rel(const std::vector<float>& a, const std::vector<float>& b) {
  return rel(a.data(), b.data(), int64_t(b.size()));
}

inline int& failures() {
  static int count = 0;  // one check program = one count, read for main's exit status
  return count;
}
// Prints "what  rel e  ok|FAIL" and counts a failure when e > tol.
inline void report(const std::string& what, double e, double tol = 1e-5, int width = 40) {
  const bool ok = e <= tol;
  if (!ok) ++failures();
  std::printf("%-*s rel %.3g %s\n", width, what.c_str(), e, ok ? "ok" : "FAIL");
}

}  // namespace emu_check
