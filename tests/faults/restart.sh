#!/usr/bin/env bash
# brt-dist launch --restarts (launch/supervise/restarts.h) on one process and under mpirun -np 2
# on this machine: the relaunch resumes from the newest good checkpoint and every later loss and
# the final checkpoint equal the uninterrupted run's; the bounds end the loop with their codes.
#   restart.sh BRT_DIST CASE
#     same_size     rank 1 of mpirun -np 2 killed at step 4 (attempt 1 only): one restart, the
#                   run finishes (exit 0), bit-identical to the uninterrupted run; the JSONL record
#     double_fault  killed at step 4 in attempt 1 and again as attempt 2 trains its first new
#                   step: two restarts, the second recorded with no first step; finishes, exact
#     exhausted     killed at step 4 in every attempt, --restarts 1: exit 75, "no restart left"
#     no_progress   killed at step 4 in every attempt, --restarts 5 --no-progress-restarts 2:
#                   exit 93 after two restarts that saved nothing newer, "do not requeue"
#     heartbeat_key rank 1 of mpirun -np 2 SIGSTOPped at step 3, train.timeout_s 600: the run's
#                   launch.heartbeat_timeout_s = 2 ends the job (124) naming the rank and the
#                   timeout; --heartbeat-timeout-s 4 overrides the key; a key below 1 s is refused
#     usage         --spare-hosts without --restarts, a bad --restarts: exit 2 naming the flag
source "$(dirname "$0")/lib.sh"
case_name=$2
args=(train.steps=8 checkpoint.every=1 checkpoint.async=false)
LAUNCH=("$bin" launch --grace-s 5 --heartbeat-timeout-s 10)
ref() {
  run ref.log 120 "$@" "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/ref" log.metrics_path="$work/ref.jsonl"
  expect_rc 0 "the uninterrupted run"
}
faulty() {  # faulty LIMIT LAUNCH-FLAGS... -- LAUNCHER...: the run under brt-dist launch
  local limit=$1 flags=()
  shift
  while [ "$1" != -- ]; do flags+=("$1"); shift; done
  shift
  run fault.log "$limit" "${LAUNCH[@]}" "${flags[@]}" "$@" "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/c" \
    log.metrics_path="$work/faulty.jsonl"
}
exact() {  # the losses after the first resume and the final checkpoint equal the reference's
  local from
  from=$(sed -nE 's/^resumed from .*ckpt-0*([0-9]+)\.h5 at step.*/\1/p' fault.log | head -1)
  [ -n "$from" ] || fail "no resume in fault.log"
  same_losses ref.jsonl faulty.jsonl 0
  "$bin" ckpt diff "$(ckpt ref 8)" "$(ckpt c 8)" > /dev/null || fail "the final checkpoint differs from the uninterrupted run's"
}
case $case_name in
  same_size)
    ref "${MPIRUN[@]}" -np 2
    export BRT_FAULT_INJECT="kill@step=4@rank=1@attempt=1"
    faulty 120 --restarts 2 --restart-log "$work/restarts.jsonl" -- "${MPIRUN[@]}" -np 2
    expect_rc 0 "a killed rank, one restart"
    expect_text fault.log "brt-dist launch: attempt 1 failed: exit status 137"
    expect_text fault.log "brt-dist launch: restart 1 of 2: relaunching (attempt 2) with the same command"
    expect_text fault.log "brt-dist launch: attempt 2 trains again: resumed at step 3, step 4 done"
    grep -q '"event":"restart","attempt":2,"status":137' restarts.jsonl || fail "no restart record: $(cat restarts.jsonl)"
    grep -q '"resumed_step":3,"first_step":4' restarts.jsonl || fail "the record lacks the steps: $(cat restarts.jsonl)"
    exact
    printed=$(grep -m1 'trains again' fault.log | cut -c1-200)
    record "restart(same_size)" "SIGKILL to rank 1 of 2 at step 4" "0 after $secs s" "$printed" \
      "resumed at step 3; every later loss and the final checkpoint bit-identical" ;;
  double_fault)
    ref
    export BRT_FAULT_INJECT="kill@step=4@attempt=1;kill@step=4@attempt=2"
    faulty 120 --restarts 3 --restart-log "$work/restarts.jsonl" --
    expect_rc 0 "a fault during the restart"
    expect_text fault.log "brt-dist launch: attempt 2 failed: exit status 137"
    expect_text fault.log "brt-dist launch: attempt 3 trains again"
    grep -q '"attempt":2,.*"first_step":null,"ended_with":137' restarts.jsonl ||
      fail "the failed restart is not recorded: $(cat restarts.jsonl)"
    grep -q '"attempt":3,"status":137' restarts.jsonl || fail "no record of the second restart: $(cat restarts.jsonl)"
    exact
    record "restart(double_fault)" "SIGKILL at step 4 in attempts 1 and 2" "0 after $secs s" \
      "$(grep -m1 'attempt 3 trains again' fault.log | cut -c1-160)" "every later loss and the final checkpoint bit-identical" ;;
  exhausted)
    export BRT_FAULT_INJECT="kill@step=4"
    faulty 120 --restarts 1 --
    expect_rc 75 "every attempt killed, --restarts 1"
    expect_text fault.log "brt-dist launch: no restart left (--restarts 1); the newest checkpoint is of step 3, a requeue continues from it: exit 75"
    verify_ok "$(ckpt c 3)"
    record "restart(exhausted)" "SIGKILL at step 4 in every attempt" "75" "no restart left" "ckpt-3 verifies" ;;
  no_progress)
    export BRT_FAULT_INJECT="kill@step=4"
    faulty 120 --restarts 5 --no-progress-restarts 2 --
    expect_rc 93 "every attempt killed before a new checkpoint"
    expect_text fault.log "brt-dist launch: 2 restart(s) in a row without a checkpoint newer than step 3 (--no-progress-restarts 2): the fault repeats; do not requeue: exit 93"
    [ "$(grep -c 'failed: exit status 137' fault.log)" = 3 ] || fail "expected 3 failed attempts"
    verify_ok "$(ckpt c 3)"
    record "restart(no_progress)" "SIGKILL at step 4 in every attempt" "93" "do not requeue" "ckpt-3 verifies" ;;
  heartbeat_key)
    export BRT_FAULT_INJECT="stop@step=3@rank=1"
    for flag in "" 4; do
      ALLOW_124=1 run "beat$flag.log" 60 "$bin" launch --grace-s 5 ${flag:+--heartbeat-timeout-s "$flag"} -- \
        "${MPIRUN[@]}" -np 2 "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/c$flag" train.timeout_s=600 \
        launch.heartbeat_timeout_s=2
      expect_rc 124 "a stopped rank, heartbeat timeout ${flag:-2} s"
      expect_text "beat$flag.log" "brt-dist launch: world rank 1 (host $(hostname)) has sent no heartbeat for"
      expect_text "beat$flag.log" "(timeout ${flag:-2} s: launch.heartbeat_timeout_s, --heartbeat-timeout-s); it last reported"
    done
    unset BRT_FAULT_INJECT
    run bad.log 20 "${TRAIN[@]}" launch.heartbeat_timeout_s=0.5
    expect_rc 2 "launch.heartbeat_timeout_s = 0.5"
    expect_text bad.log "launch.heartbeat_timeout_s: must be 0 (no heartbeats) or between 1 and 86400 s"
    record "restart(heartbeat_key)" "SIGSTOP to rank 1 of 2 at step 3; launch.heartbeat_timeout_s = 2" "124 after $secs s" \
      "$(grep -m1 'has sent no heartbeat' beat.log | cut -c1-160)" "the key read by the supervisor; the flag overrides it" ;;
  usage)
    run u1.log 20 "$bin" launch --spare-hosts h9 mpirun -np 2 true
    expect_rc 2 "--spare-hosts without --restarts"
    expect_text u1.log "--spare-hosts, --min-dp and --restart-log need --restarts N"
    run u2.log 20 "$bin" launch --restarts -1 true
    expect_rc 2 "--restarts -1"
    expect_text u2.log "--restarts needs a whole number in [0, 1000], got '-1'"
    run u3.log 20 "$bin" launch --restarts 1 --spare-hosts h9:0 true
    expect_rc 2 "--spare-hosts h9:0"
    expect_text u3.log "--spare-hosts: host list 'h9:0': 'h9:0' needs a slot count >= 1 after the colon"
    run u4.log 20 "$bin" launch --restarts 1 --min-dp 3 mpirun -np 2 "${TRAIN[@]}"
    expect_rc 2 "--min-dp above the launch's data-parallel size"
    expect_text u4.log "--min-dp 3 is above the launch's 2 data-parallel ranks"
    run u5.log 20 "$bin" launch --restarts 1 --min-dp 1 mpirun -np 2 true
    expect_rc 2 "--min-dp without brt-dist train"
    expect_text u5.log "--min-dp needs the launcher to start \`brt-dist train\` (none in the command)"
    record "restart(usage)" "bad restart flags" "2" "the flag named" "nothing started" ;;
  *) fail "unknown case $case_name" ;;
esac
