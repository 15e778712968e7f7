# shellcheck shell=bash
# The OpenBLAS cores this CPU runs, best first, from /proc/cpuinfo's flags: SkylakeX (AVX-512 F,
# BW, VL, DQ), Haswell (AVX2 + FMA), Sandybridge (AVX), Prescott (SSE3, every x86-64).
# Source it; `blas_cores` prints them on one line.
blas_cores() {
  local flags cores=()
  flags=" $(grep -m1 '^flags' /proc/cpuinfo) "
  has() { local f; for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
  has avx512f avx512bw avx512vl avx512dq && cores+=(SkylakeX)
  has avx2 fma && cores+=(Haswell)
  has avx && cores+=(Sandybridge)
  cores+=(Prescott)
  echo "${cores[*]}"
}
