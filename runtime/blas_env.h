// The process environment OpenBLAS and OpenMP read only when they load, so a program must set
// it before it starts: this re-executes the program once with it set.
//  - OpenBLAS 0.3.21 (Debian 12) does not recognise some recent x86 CPUs and falls back to its
//    generic kernels, several times slower: OPENBLAS_CORETYPE is set to match the CPU's
//    instruction set.
//  - With `passive_waiting`, OMP_WAIT_POLICY=PASSIVE: idle OpenMP threads (OpenBLAS's too, the
//    openmp build) sleep instead of spinning, so ranks that share cores, or a busy neighbour
//    process, slow a run down gracefully instead of collapsing it (a competing busy
//    process cut a 2-thread run to a fifth while spinning, to half while passive; on an idle
//    machine the two policies measure the same, bench/threads).
// Values the environment already holds are respected.
#pragma once

namespace brt::runtime {

// Call first thing in main(). Returns normally when nothing needs to change; otherwise
// replaces the process (execv) and never returns. BRT_NO_BLAS_REEXEC=1 disables it.
void ensure_blas_core_type(int argc, char** argv, bool passive_waiting = false);

}  // namespace brt::runtime
