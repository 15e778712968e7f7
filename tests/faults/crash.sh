#!/usr/bin/env bash
# A crash says who crashed and where (launch/cli/crash_report.h): a segfault, an abort, an
# uncaught exception and a raw MPI error, injected at step 4 of a run saving every step (synchronously). Each
# prints "brt-dist train: crash on world rank R (host H, pid P): <what>", the stack with our
# functions named, then each frame's function, file and line, and dies by its signal (139 for SIGSEGV, 134 for SIGABRT); the checkpoint of
# step 2 verifies and the next start resumes from it. Under mpirun -np 2 the report names
# world rank 1.
source "$(dirname "$0")/lib.sh"
host=$(hostname)
args=(train.steps=6 checkpoint.every=1 checkpoint.keep=0 checkpoint.async=false)
crash() {  # crash NAME SPEC EXIT WHAT [LAUNCHER...]: injects SPEC, expects EXIT and WHAT
  local name=$1 spec=$2 want_rc=$3 what=$4 rank=0
  shift 4
  [ $# -gt 0 ] && rank=1
  rm -rf "c-$name"
  BRT_FAULT_INJECT=$spec run "$name.log" 60 "$@" "${TRAIN[@]}" "${args[@]}" checkpoint.dir="c-$name"
  expect_rc "$want_rc" "$name"
  expect_text "$name.log" "brt-dist train: crash on world rank $rank (host $host, pid "
  expect_text "$name.log" "$what"
  expect_text "$name.log" "stack (innermost first"
  # The stack names the function that crashed (the dynamic symbol table: -rdynamic).
  grep -q "FaultInjection" "$name.log" || fail "$name: the stack names no brt function"
  # ... and, decoded from the line tables (Boost.Stacktrace), the function, file and line.
  expect_text "$name.log" "source (function at file:line, innermost first):"
  grep -qE "#[0-9]+ brt::launch::FaultInjection::crash\(.*\)( \[clone [.a-z]+\])? at .*launch/process/fault_injection\.cpp:[0-9]+" "$name.log" ||
    fail "$name: no frame of FaultInjection::crash with its file and line"
  grep -qE "#[0-9]+ brt::launch::Trainer<float>::run_step\(long\) at .*launch/train/trainer\.cpp:[0-9]+" "$name.log" ||
    fail "$name: no frame of Trainer::run_step with its file and line"
  [ "$(grep -c "crash on world rank" "$name.log")" -eq 1 ] || fail "$name: not exactly one report"
  verify_ok "$(ckpt "c-$name" 2)"
  record "crash($name)" "BRT_FAULT_INJECT=$spec" "$rc" "$(first_line "$name.log" "crash on world rank")" \
    "ckpt-2 verifies; the stack names $(grep -oE -m1 'FaultInjection::crash\(.*\)( \[clone [.a-z]+\])? at .*fault_injection\.cpp:[0-9]+' "$name.log" | sed 's/(.*) at .*\//() at /')"
}
crash segv "segv@step=4" 139 "Segmentation fault (signal 11) at address 0x0"
crash abort "abort@step=4" 134 "Aborted (signal 6)"
crash terminate "terminate@step=4" 134 \
  "uncaught exception std::runtime_error: fault injection: an exception no one catches"
crash mpierror "mpierror@step=4" 134 "Aborted (signal 6)"
expect_text mpierror.log "brt-dist: MPI error on world rank 0 (host $host): MPI_ERR_RANK: invalid rank"
expect_text mpierror.log "on_world_mpi_error"
crash segv_np2 "segv@step=4@rank=1" 139 "Segmentation fault (signal 11) at address 0x0" "${MPIRUN[@]}" -np 2
# The next start resumes from the checkpoint the crash left.
run resumed.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=c-segv
expect_rc 0 "resume after the segfault"
expect_text resumed.log "resumed from c-segv/ckpt-0000000"
record "crash(resume)" "a start after the segfault" "0" "$(first_line resumed.log 'resumed from')" \
  "the run finished from the checkpoint the crash left"
