// The process environment OpenBLAS and OpenMP read only when they load, so a program must set
// it before it starts: this re-executes the program once with it set.
//  - The BLAS core (docs/reliability.md "Which BLAS core"): OPENBLAS_CORETYPE, when set, is
//    respected (a platform or an operator chose it: some set Haswell because older OpenBLAS
//    builds compute wrong results with other kernels on their processors). Unset, OpenBLAS's own
//    detection is kept — the same core every program on the host gets — unless it fell back to
//    pre-AVX2 kernels on a CPU with AVX2 and FMA (OpenBLAS 0.3.21, Debian 12's, does not know
//    some recent CPUs; its generic kernels run 4-7x slower, bench/blas): then SkylakeX on an
//    Intel CPU with AVX-512 (F, BW, VL, DQ: the kernels OpenBLAS itself runs on every Intel
//    AVX-512 generation it knows), else Haswell, the AVX2 kernels every AVX2 CPU runs correctly
//    (AVX-512 kernels are never forced on other vendors' CPUs: platforms pin Haswell on some of
//    them because older OpenBLAS builds compute wrong results there). The choice is recorded in
//    BRT_BLAS_CORE_CHOICE for the numerics fingerprint (runtime/numerics.h), and every core is
//    checked at start against a reference.
//  - With `passive_waiting`, OMP_WAIT_POLICY=PASSIVE: idle OpenMP threads (OpenBLAS's too, the
//    openmp build) sleep instead of spinning, so ranks that share cores, or a busy neighbour
//    process, slow a run down gracefully instead of collapsing it (a competing busy
//    process cut a 2-thread run to a fifth while spinning, to half while passive; on an idle
//    machine the two policies measure the same, bench/threads).
// Values the environment already holds are respected.
#pragma once

#include <string>

namespace brt::runtime {

// Call first thing in main(). Returns normally when nothing needs to change; otherwise
// replaces the process (execv) and never returns. BRT_NO_BLAS_REEXEC=1 disables it.
void ensure_blas_core_type(int argc, char** argv, bool passive_waiting = false);

// The core to run when OpenBLAS detected `detected` on a CPU with AVX2 and FMA (`avx2_fma`) and
// an Intel AVX-512 (`intel_avx512`): "" to keep it, else "SkylakeX" or "Haswell" (the policy
// above; a pure function, for tests).
std::string blas_core_override(const std::string& detected, bool avx2_fma, bool intel_avx512);

// How this process's core was chosen: "OPENBLAS_CORETYPE=Haswell", "OpenBLAS's own detection",
// or brt-dist's choice with the reason.
std::string blas_core_provenance();

}  // namespace brt::runtime
