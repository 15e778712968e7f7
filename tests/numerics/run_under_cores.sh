#!/usr/bin/env bash
# The layout comparisons and the BLAS check under two or more BLAS cores this CPU supports
# (issue: "the suite passes with OPENBLAS_CORETYPE set to any core the CPU supports, and
# unset"): each test below runs once per core with OPENBLAS_CORETYPE set for every rank, and
# the whole fails naming the test and core when any of them depends on the setting. The cores:
# the best two of SkylakeX (AVX-512), Haswell (AVX2+FMA), Sandybridge (AVX), Prescott (SSE3)
# that /proc/cpuinfo's flags allow; BRT_PORTABILITY_CORES="A B ..." picks others.
#   run_under_cores.sh BUILD_DIR MPIEXEC BRT_DIST
set -uo pipefail
build=$1 mpiexec=$2 bin=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
source "$src/tests/numerics/blas_cores.sh"
read -r -a supported <<< "$(blas_cores)"
read -r -a cores <<< "${BRT_PORTABILITY_CORES:-${supported[*]:0:2}}"
[ ${#cores[@]} -ge 2 ] || { echo "FAIL: fewer than two BLAS cores to compare (${cores[*]})"; exit 1; }
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset OPENBLAS_L2_SIZE
mpi=("$mpiexec" --allow-run-as-root --oversubscribe -np 2)
# name | command: the layout comparisons of the suite (each states its own contract).
tests=(
  "test_blas_core|$build/tests/numerics/test_blas_core"
  "dp_mpi_np2|${mpi[*]} $build/tests/core/dp/test_dp_mpi"
  "tp_mpi_np2|${mpi[*]} $build/tests/core/tp/test_tp_mpi"
  "cp_mpi_np2|${mpi[*]} $build/tests/core/cp/test_cp_mpi"
  "task_mixture_and_eval|bash $src/tests/integration/task_eval.sh $bin"
)
failed=()
for core in "${cores[@]}"; do
  for entry in "${tests[@]}"; do
    name=${entry%%|*} cmd=${entry#*|}
    log=$(mktemp)
    t0=$(date +%s)
    # shellcheck disable=SC2086  # the command's words
    (cd "$src" && OPENBLAS_CORETYPE=$core $cmd) > "$log" 2>&1
    rc=$?
    echo "core $core: $name $([ $rc -eq 0 ] && echo passed || echo FAILED) ($(( $(date +%s) - t0 )) s)"
    if [ $rc -ne 0 ]; then
      failed+=("$name under OPENBLAS_CORETYPE=$core")
      tail -25 "$log"
    fi
    rm -f "$log"
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  printf 'FAIL: depends on the BLAS core: %s\n' "${failed[@]}"
  exit 1
fi
echo "portability: ${#tests[@]} tests passed under each of ${#cores[@]} BLAS cores (${cores[*]})"
