#include "kernels/blas_env.h"

#include <unistd.h>

#include <cstdlib>

namespace brt::kernels {

void ensure_blas_core_type(int /*argc*/, char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || std::getenv("BRT_NO_BLAS_REEXEC") != nullptr)
    return;
  const char* core = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
    core = "SkylakeX";
  else if (__builtin_cpu_supports("avx2"))
    core = "Haswell";
  if (core == nullptr) return;
  setenv("OPENBLAS_CORETYPE", core, 1);
  execv("/proc/self/exe", argv);
  // execv failed: carry on with whatever kernels OpenBLAS picked.
}

}  // namespace brt::kernels
