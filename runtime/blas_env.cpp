#include "runtime/blas_env.h"

#include <unistd.h>

#include <cstdlib>

namespace brt::runtime {

void ensure_blas_core_type(int /*argc*/, char** argv, bool passive_waiting) {
  if (std::getenv("BRT_NO_BLAS_REEXEC") != nullptr) return;
  bool changed = false;
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    const char* core = nullptr;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
      core = "SkylakeX";
    else if (__builtin_cpu_supports("avx2"))
      core = "Haswell";
    if (core != nullptr) {
      setenv("OPENBLAS_CORETYPE", core, 1);
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
