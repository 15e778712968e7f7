// OpenBLAS 0.3.21 (Debian 12) does not recognise some recent x86 CPUs and falls back to its
// generic kernels, several times slower. It reads OPENBLAS_CORETYPE only when the library is
// loaded, so a program that wants the right kernels must set it before it starts: this
// re-executes the program once with a core type matching the CPU's instruction set, unless
// the environment already chose one (which is then respected).
#pragma once

namespace brt::kernels {

// Call first thing in main(). Returns normally when nothing needs to change; otherwise
// replaces the process (execv) and never returns. BRT_NO_BLAS_REEXEC=1 disables it.
void ensure_blas_core_type(int argc, char** argv);

}  // namespace brt::kernels
