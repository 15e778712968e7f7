#!/usr/bin/env bash
# Failure and launch behaviour of the parallel layer, each case a ctest test:
#   failure_tests.sh <case> <mpiexec> <failure_driver>
# Cases:
#   kill              rank 1 SIGKILLs itself while rank 0 waits in an all-reduce (5 s timeout):
#                     mpirun ends the job at once, non-zero, naming rank 1 and the signal.
#   kill_survivor     same, but the launcher leaves the survivor running (as srun does without
#                     --kill-on-bad-exit): rank 0's timeout names the op and the dead rank.
#   stall             rank 1 sleeps instead of entering the all-reduce: rank 0 reports op,
#                     bytes, sequence number and rank 1, and the job exits 124 within ~timeout.
#   mismatch          ranks all-reduce different sizes: a CommError naming the mismatch, job
#                     aborted at once (not at the timeout).
#   determinism       two runs of the same all-reduces give bit-identical checksums (np 4, tp 2).
#   layout_refused    --tp 3 on 4 ranks is refused before any work with the values that fit.
#   srun_without_pmi  srun-like environment without PMI: the hint, exit 2, MPI never started.
set -u
case_name=$1
mpiexec=$2
driver=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun_=("$mpiexec" --allow-run-as-root --oversubscribe)
out=$(mktemp)
trap 'rm -f "$out"' EXIT

fail() {
  echo "FAIL ($case_name): $*"
  echo "---- output ----"
  cat "$out"
  exit 1
}
expect_text() {
  grep -qF -- "$1" "$out" || fail "output does not contain: $1"
}
# run <max_seconds> <command...>: runs it, records status and elapsed seconds.
run() {
  local limit=$1
  shift
  local start_ms end_ms
  start_ms=$(($(date +%s%N) / 1000000))
  timeout --kill-after=5 $((limit + 20)) "$@" >"$out" 2>&1
  status=$?
  end_ms=$(($(date +%s%N) / 1000000))
  elapsed_ms=$((end_ms - start_ms))
  echo "status $status after ${elapsed_ms} ms"
  ((elapsed_ms <= limit * 1000)) || fail "took ${elapsed_ms} ms, more than ${limit} s"
}

case $case_name in
  kill)
    run 20 "${mpirun_[@]}" -np 2 "$driver" kill 5
    [ "$status" -ne 0 ] || fail "job exited 0 after a rank was killed"
    expect_text "killing itself"
    expect_text "rank 1"
    expect_text "signal 9"
    ;;
  kill_survivor)
    run 20 "${mpirun_[@]}" --mca orte_abort_on_non_zero_status 0 -np 2 "$driver" kill 5
    [ "$status" -ne 0 ] || fail "job exited 0 after a rank was killed"
    expect_text "collective timeout on world rank 0"
    expect_text "all_reduce(sum) #3 (float32, 4096 bytes) on group 'world' of 2 ranks"
    expect_text "Still waiting for world rank 1"
    ((elapsed_ms >= 5000)) || fail "reported after ${elapsed_ms} ms, before the 5 s timeout"
    ;;
  stall)
    run 20 "${mpirun_[@]}" -np 2 "$driver" stall 5
    [ "$status" -eq 124 ] || fail "expected exit status 124 (collective timeout), got $status"
    expect_text "collective timeout on world rank 0"
    expect_text "all_reduce(sum) #3 (float32, 4096 bytes) on group 'world' of 2 ranks"
    expect_text "timeout 5.0 s"
    expect_text "Still waiting for world rank 1"
    ((elapsed_ms >= 5000)) || fail "reported after ${elapsed_ms} ms, before the 5 s timeout"
    ;;
  mismatch)
    run 15 "${mpirun_[@]}" -np 2 "$driver" mismatch 30
    [ "$status" -ne 0 ] || fail "job exited 0 after mismatched collectives"
    expect_text "collective mismatch on world rank"
    expect_text "issued different collectives (or sizes) as #0"
    ;;
  determinism)
    run 30 "${mpirun_[@]}" -np 4 "$driver" checksum 2
    [ "$status" -eq 0 ] || fail "first run failed"
    first=$(grep checksum "$out")
    run 30 "${mpirun_[@]}" -np 4 "$driver" checksum 2
    [ "$status" -eq 0 ] || fail "second run failed"
    second=$(grep checksum "$out")
    [ "$(echo "$first" | wc -l)" -eq 4 ] || fail "expected 4 checksum lines, got: $first"
    [ "$first" = "$second" ] || fail "checksums differ between runs: $first vs $second"
    echo "$first"
    ;;
  layout_refused)
    run 20 "${mpirun_[@]}" -np 4 "$driver" layout 3
    [ "$status" -eq 2 ] || fail "expected exit status 2, got $status"
    expect_text "--tp 3 does not fit: 4 ranks are not divisible by 3"
    expect_text "Values of --tp that fit 4 ranks: 1, 2, 4."
    [ "$(grep -c 'does not fit' "$out")" -eq 1 ] || fail "the refusal should be printed once"
    run 20 "${mpirun_[@]}" -np 4 "$driver" layout 2
    [ "$status" -eq 0 ] || fail "--tp 2 on 4 ranks should be accepted"
    expect_text "layout ok: dp_cp 2 tp 2"
    ;;
  srun_without_pmi)
    run 10 env -u OMPI_COMM_WORLD_RANK -u PMIX_RANK SLURM_PROCID=1 SLURM_LOCALID=1 SLURM_NTASKS=2 \
      SLURM_STEP_ID=0 SLURM_JOB_ID=42 "$driver" layout 1
    [ "$status" -eq 2 ] || fail "expected exit status 2, got $status"
    expect_text "task 1 of 2 without PMI"
    expect_text "srun --mpi=pmix"
    ;;
  *)
    echo "unknown case $case_name"
    exit 2
    ;;
esac
echo "PASS ($case_name)"
