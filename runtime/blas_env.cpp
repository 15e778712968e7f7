#include "runtime/blas_env.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace brt::runtime {

namespace {

constexpr const char* kChoiceVariable = "BRT_BLAS_CORE_CHOICE";

// OpenBLAS's x86-64 cores with AVX2 kernels (DYNAMIC_ARCH names, as openblas_get_corename
// reports them): a detection naming one of these is a real one, not a fallback.
bool has_avx2_kernels(const std::string& core) {
  static const char* const kCores[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator"};
  return std::any_of(std::begin(kCores), std::end(kCores), [&](const char* c) { return core == c; });
}

}  // namespace

std::string blas_core_override(const std::string& detected, bool avx2_fma, bool intel_avx512) {
  if (!avx2_fma || has_avx2_kernels(detected)) return "";
  return intel_avx512 ? "SkylakeX" : "Haswell";
}

std::string blas_core_provenance() {
  if (const char* choice = std::getenv(kChoiceVariable)) return choice;
  if (const char* core = std::getenv("OPENBLAS_CORETYPE")) return std::string("OPENBLAS_CORETYPE=") + core;
  return "OpenBLAS's own detection";
}

void ensure_blas_core_type(int /*argc*/, char** argv, bool passive_waiting) {
  if (std::getenv("BRT_NO_BLAS_REEXEC") != nullptr) return;
  bool changed = false;
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    // OpenBLAS detected its core when it loaded, before main.
    const std::string detected = openblas_get_corename();
    __builtin_cpu_init();
    const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool intel_avx512 = __builtin_cpu_is("intel") && __builtin_cpu_supports("avx512f") &&
                              __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                              __builtin_cpu_supports("avx512dq");
    const std::string core = blas_core_override(detected, avx2_fma, intel_avx512);
    if (!core.empty()) {
      setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
      const std::string why = "brt-dist chose " + core + ": OpenBLAS detected " + detected +
                              " (pre-AVX2 kernels) on a CPU with " + (intel_avx512 ? "Intel AVX-512" : "AVX2 and FMA");
      setenv(kChoiceVariable, why.c_str(), 1);
      changed = true;
    }
  }
  if (passive_waiting && std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    changed = true;
  }
  if (!changed) return;
  execv("/proc/self/exe", argv);
  // execv failed: carry on with what the libraries picked.
}

}  // namespace brt::runtime
