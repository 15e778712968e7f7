#!/usr/bin/env bash
# A stopped or killed rank under `mpirun -np 2` (train.timeout_s = 5): the job ends within the
# timeout (plus the few seconds the report takes), exit 124 for a stall, with a report naming
# the rank, host and operation and the flight records of the ranks; the last good checkpoint
# is untouched and the next start resumes bit-exactly.
#   stalls.sh BIN save_injected   SIGSTOP world rank 1 as it writes /model/embed (a synchronous
#                                 save: the stall is inside HDF5's collective MPI-IO)
#   stalls.sh BIN save_async      the same during a background save (checkpoint.async)
#   stalls.sh BIN save_external   SIGSTOP a rank from outside while ckpt-*.h5.tmp exists
#   stalls.sh BIN load            SIGSTOP world rank 1 as it opens the checkpoint to resume
#   stalls.sh BIN step            SIGSTOP world rank 1 as step 4 begins (a collective stalls)
#   stalls.sh BIN kill_rank       SIGKILL world rank 1 as step 4 begins
#   stalls.sh BIN error_one_rank  an exception on world rank 1 only as step 4 begins: the job
#                                 is aborted (exit 1) with the error, rank and flight records
source "$(dirname "$0")/lib.sh"
case_name=$2
args=(train.steps=8 checkpoint.every=1 checkpoint.keep=0 train.timeout_s=5)
NP2=("${MPIRUN[@]}" -np 2)
run ref.log 90 "${NP2[@]}" "${TRAIN[@]}" "${args[@]}" checkpoint.dir=ref log.metrics_path=ref.jsonl
expect_rc 0 "reference run"
ALLOW_124=1
# A first run of two steps gives the checkpoints that must survive.
run first.log 60 "${NP2[@]}" "${TRAIN[@]}" "${args[@]}" train.steps=2 checkpoint.dir=c
expect_rc 0 "first two steps"
sha2=$(sha "$(ckpt c 2)")
faulty=("${NP2[@]}" "${TRAIN[@]}" "${args[@]}" checkpoint.dir=c log.metrics_path=faulty.jsonl)
case $case_name in
  save_injected)
    BRT_FAULT_INJECT="stop@checkpoint save: writing /model/embed@rank=1" run fault.log 60 "${faulty[@]}" checkpoint.async=false
    injected="SIGSTOP world rank 1 as the step-3 save (synchronous) writes /model/embed"
    expect_rc 124 "$injected"
    expect_text fault.log "timeout on world rank 0 (host "
    expect_text fault.log "checkpoint save: writing /model/embed has not finished after"
    expect_text fault.log "no flight record from world rank 1"
    ;;
  save_async)
    BRT_FAULT_INJECT="stop@checkpoint save: writing /model/embed@rank=1" run fault.log 60 "${faulty[@]}" checkpoint.async=true
    injected="SIGSTOP world rank 1 as the step-3 background save writes /model/embed"
    expect_rc 124 "$injected"
    expect_text fault.log "timeout on world rank 0 (host "  # the writer's guard or the next step's collective
    expect_text fault.log "no flight record from world rank 1"
    ;;
  save_external)
    # Long enough to be caught inside a save; the learning-rate schedule stays the reference's
    # (over 8 steps), so a checkpoint this run confirms before the stall resumes bit-exactly.
    "${faulty[@]}" train.steps=100000 optim.total_steps=8 > fault.log 2>&1 &
    launcher=$!
    stopped=""
    for _ in $(seq 3000); do
      if compgen -G "c/ckpt-*.h5.tmp" > /dev/null; then
        stopped=$(pgrep -P "$launcher" -f brt-dist | tail -1)
        [ -n "$stopped" ] && kill -STOP "$stopped" && break
      fi
      sleep 0.002
    done
    [ -n "$stopped" ] || { kill -9 $launcher; fail "no save in flight seen"; }
    t0=$(date +%s)
    timeout 60 tail --pid=$launcher -f /dev/null
    wait $launcher; rc=$?; secs=$(( $(date +%s) - t0 ))
    kill -9 "$stopped" 2>/dev/null
    injected="SIGSTOP (from outside) one rank while a ckpt-*.h5.tmp exists"
    expect_rc 124 "$injected"
    expect_text fault.log "timeout on world rank"
    expect_text fault.log "flight records of the last 64 collectives per rank"
    ;;
  load)
    BRT_FAULT_INJECT="stop@checkpoint load: opening@rank=1" run fault.log 60 "${faulty[@]}"
    injected="SIGSTOP world rank 1 as it opens the checkpoint to resume from"
    expect_rc 124 "$injected"
    expect_text fault.log "timeout on world rank 0 (host "
    expect_text fault.log "checkpoint load: opening"
    ;;
  step)
    BRT_FAULT_INJECT="stop@step=4@rank=1" run fault.log 60 "${faulty[@]}"
    injected="SIGSTOP world rank 1 as step 4 begins"
    expect_rc 124 "$injected"
    expect_text fault.log "collective timeout on world rank 0"
    expect_text fault.log "Still waiting for world rank 1"
    expect_text fault.log "the ranks diverge at #"
    ;;
  kill_rank)
    BRT_FAULT_INJECT="kill@step=4@rank=1" run fault.log 60 "${faulty[@]}"
    injected="SIGKILL world rank 1 as step 4 begins"
    expect_nonzero "$injected"
    expect_text fault.log "signal 9"
    ;;
  error_one_rank)
    BRT_FAULT_INJECT="throw@step=4@rank=1" run fault.log 60 "${faulty[@]}"
    injected="an exception on world rank 1 only as step 4 begins"
    expect_rc 1 "$injected"
    expect_text fault.log "brt-dist train: error on world rank 1 (host "
    expect_text fault.log "fault injection: an error at step 4 on world rank 1"
    expect_text fault.log "flight records of the last 64 collectives per rank"
    ;;
  *) fail "unknown case $case_name" ;;
esac
fault_rc=$rc fault_secs=$secs
[ "$secs" -le 20 ] || fail "the job took $secs s to end (timeout 5 s)"
[ "$(sha "$(ckpt c 2)")" = "$sha2" ] || fail "ckpt-2 changed"
newest=$(ls c/ckpt-*.h5 | sort | tail -1)
verify_ok "$newest"
[ "$case_name" = kill_rank ] || [ -s c/flight/rank-0.jsonl ] || fail "no flight record written"
run resumed.log 90 "${NP2[@]}" "${TRAIN[@]}" "${args[@]}" checkpoint.dir=c log.metrics_path=resumed.jsonl
expect_rc 0 "resume"
from=$(sed -nE 's/^resumed from .*ckpt-0*([0-9]+)\.h5 at step.*/\1/p' resumed.log)
same_losses ref.jsonl resumed.jsonl "$from"
"$bin" ckpt diff "$(ckpt ref 8)" "$(ckpt c 8)" > /dev/null || fail "final checkpoint differs from the reference"
record "stall($case_name)" "$injected" "$fault_rc after ${fault_secs} s" \
  "$(first_line fault.log 'timeout on world rank|signal 9|collective timeout|error on world rank')" \
  "ckpt-2 sha256 unchanged; newest $(basename "$newest") verifies; resumed from step $from; steps $((from + 1))-8 and the final checkpoint bit-identical"
