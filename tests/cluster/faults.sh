#!/usr/bin/env bash
# Network and host faults on a 2-host cluster: each ends the job on its own
# within train.timeout_s (5 s) plus a bounded grace — every rank, mpirun and orted gone, on both
# hosts, with no help from outside — with a report naming the rank and host that stopped
# answering; no good checkpoint is lost or changed; what a broken save left is cleaned up at the
# next start, which resumes bit-exactly from the newest good checkpoint (on the same hosts or on
# fewer). A flap shorter than the timeout does not end the run.
#   faults.sh BRT_DIST CASE
#     link_cut_step        h2's link cut while world rank 0 pauses at the start of step 4
#     link_cut_save_sync   ... while rank 0 pauses inside a synchronous save (writing /model/embed)
#     link_cut_save_async  ... while rank 0's writer thread pauses inside a background save
#     link_flap            h2's link down for 2 s (timeout 8 s), then up: the run finishes
#     host_killed          every process of h2 killed while rank 1 pauses at step 4
#     rank_stalled         world rank 1 (h2) SIGSTOPped as step 4 begins: rank 0 times out, aborts
#     mpirun_killed        mpirun (on h1) SIGKILLed while rank 0 pauses at step 4
#     shared_readonly      the shared file system read-only on h2 (only) before the step-4 save
#     shared_full          the shared file system filled (from h2) to its last 32 KiB before the
#                          step-4 save (a shared file system is full for every host at once)
# Prints one FAULT line: what was injected, the exit status and how long the job took to end
# after the injection, what was printed, what survived.
source "$(dirname "$0")/lib.sh"
case_name=$2
timeout_s=5
# The job must be over this long after the injection: the timeout, the flight-record gather
# (2 s), the abort helper's grace (parallel/health/abort_fallback.h, 10 s), orted's SIGTERM (3 s).
bound=$((timeout_s + 2 + 10 + 3 + 5))
cluster_up --hosts 2 --shared-mb 256
args=(train.steps=8 checkpoint.every=1 checkpoint.keep=0 train.timeout_s=$timeout_s)
NP2=(mpi h1:1,h2:1 2 -x OMP_NUM_THREADS)

reference_and_first_steps "${NP2[@]}"
# ssh passes no environment: the injection reaches h2's rank through mpirun's -x.
faulty=("${NP2[@]}" -x BRT_FAULT_INJECT "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/c" log.metrics_path="$work/faulty.jsonl")

# The injection waits for the pause line of BRT_FAULT_INJECT's `pause`, then acts (lib.sh pause_then).
extra=()
heal_after=""
resume_hosts=(mpi h1:1,h2:1 2)
case $case_name in
  link_cut_step)
    # Saves at steps 3 and 6 only, so none is in flight when the link goes.
    faulty+=(checkpoint.every=3 checkpoint.async=false)
    pause_then "pause@step=5@rank=0@ms=1500" cluster_cut h2
    injected="h2's link cut (ip link set down) while world rank 0 pauses as step 5 begins"
    heal_after=1 ;;
  link_cut_save_sync)
    extra=(checkpoint.async=false)
    pause_then "pause@checkpoint save: writing /model/embed@rank=0@nth=2@ms=1500" cluster_cut h2
    injected="h2's link cut while world rank 0 is inside the step-4 synchronous save (writing /model/embed)"
    heal_after=1 ;;
  link_cut_save_async)
    extra=(checkpoint.async=true)
    pause_then "pause@checkpoint save: writing /model/embed@rank=0@nth=2@ms=1500" cluster_cut h2
    injected="h2's link cut while world rank 0's writer thread is inside the step-4 background save"
    heal_after=1 ;;
  link_flap)
    # Down for 2 s within an 8 s timeout, during a step and the saves around it.
    faulty+=(train.timeout_s=8)
    flap() { cluster_cut h2; sleep 2; cluster_heal h2; }
    pause_then "pause@step=4@rank=0@ms=500" flap
    injected="h2's link down for 2 s, then up (train.timeout_s = 8) while world rank 0 pauses as step 4 begins" ;;
  shared_readonly)
    pause_then "pause@step=4@rank=0@ms=1000" cluster_readonly h2
    injected="the shared file system read-only on h2 only (a read-only bind mount) while world rank 0 pauses before the step-4 save"
    restore() { cluster_readwrite h2; } ;;
  shared_full)
    # Full but for 32 KiB: no checkpoint (300 KB) fits, the job's log lines still do.
    fill() {
      local free_kb
      free_kb=$(df --output=avail -k "$CLUSTER_DIR/shared" | tail -1 | tr -d ' ')
      on h2 sh -c "head -c $(( (free_kb - 32) * 1024 )) /dev/zero > '$CLUSTER_DIR/shared/filler'"
    }
    pause_then "pause@step=4@rank=0@ms=1000" fill
    injected="the shared file system filled (from h2) to its last 32 KiB while world rank 0 pauses before the step-4 save"
    restore() { rm -f "$CLUSTER_DIR/shared/filler"; } ;;
  rank_stalled)
    pause_then "stop@step=4@rank=1" true
    injected="SIGSTOP to world rank 1 (h2) as step 4 begins" ;;
  mpirun_killed)
    kill_mpirun() { kill -KILL "$(job_process -x mpirun)"; }  # this job's, not every mpirun
    pause_then "pause@step=4@rank=0@ms=2000" kill_mpirun
    injected="SIGKILL to mpirun (on h1) while world rank 0 pauses as step 4 begins" ;;
  host_killed)
    pause_then "pause@step=4@rank=1@ms=1500" cluster_kill_host h2
    injected="every process of h2 killed (SIGKILL; its sshd, orted and rank 1) as step 4 begins"
    resume_hosts=(mpi h1:2 2) ;;
  *) fail "unknown case $case_name" ;;
esac
wait_job "$bound"
fault_rc=$rc
job_secs=$(secs_between "$injected_at" "$ended")
if [ "$case_name" = link_flap ]; then
  expect_rc 0 "$injected: the run finishes"
  expect_no_text fault.log "timeout"
  wait_no_job_procs 10
  same_losses ref.jsonl faulty.jsonl 2
  "$bin" ckpt diff "$(ckpt ref 8)" "$(ckpt c 8)" > /dev/null || fail "the final checkpoint differs from the uninterrupted run's"
  record "cluster($case_name)" "$injected" "0 after $job_secs s" "$(first_line fault.log 'step +8/8')" \
    "no timeout; steps 3-8 and the final checkpoint bit-identical to the uninterrupted run"
  exit 0
fi
wait_no_job_procs "$bound"
last_secs=$(secs_between "$injected_at" "$(now_ns)")
[ "$job_secs" -le "$bound" ] || fail "the job ended $job_secs s after the injection (bound $bound s)"
case $case_name in
  link_cut_*)
    expect_rc 137 "$injected: mpirun ended by world rank 0's abort helper"
    expect_text fault.log "timeout on world rank 0 (host h1)"
    expect_text fault.log "(host h2)"
    expect_text fault.log "the job has not ended 10 s after MPI_Abort(124); mpirun (pid"
    ;;
  rank_stalled)
    expect_rc 124 "$injected"
    expect_text fault.log "timeout on world rank 0 (host h1)" ;;
  mpirun_killed)
    expect_rc 137 "$injected: the status of the killed mpirun" ;;
  host_killed)
    # mpirun sees h2's sshd connection close and ends the job at once (Open MPI's words).
    [ "$rc" -ne 0 ] || fail "the job exited 0 with h2 dead"
    expect_text fault.log "Connection to h2 closed by remote host"
    expect_text fault.log "placement: 2 ranks on 2 hosts: h1 rank 0, 1 thread (OMP_NUM_THREADS); h2 rank 1"
    ;;
  shared_*)
    # A save that cannot write on h2: HDF5's collective create or write fails there while world
    # rank 0 waits in it (a timeout, 124), or the failure reaches every rank as an error (1).
    [ "$rc" -eq 124 ] || [ "$rc" -eq 1 ] || fail "expected exit 124 or 1, got $rc"
    want="Read-only file system"
    [ "$case_name" = shared_full ] && want="No space left on device|write failed"
    grep -qE "$want" fault.log || fail "fault.log does not say why: $want"
    ;;
esac
printed=""
for pattern in 'collective timeout on world rank' 'timeout on world rank' 'error on world rank' 'Connection to h2 closed' \
               'cannot write|No space left|Read-only'; do
  [ -z "$printed" ] && printed=$(first_line fault.log "$pattern")
done
[ -n "$printed" ] || printed="nothing (the launcher was killed: the orted on h2 lost it and ended its rank)"
# Nothing good was lost: the step-2 checkpoint unchanged, the newest one verifies.
[ "$(sha "$(ckpt c 2)")" = "$sha2" ] || fail "ckpt-2 changed"
newest=$(ls c/ckpt-*.h5 | sort | tail -1)
verify_ok "$newest"
leftovers=$(cd c && ls -a | grep -E '\.tmp' | paste -sd' ')
[ -n "$heal_after" ] && cluster_heal h2
declare -F restore > /dev/null && restore
# The next start (on the same hosts, or on h1 alone when h2 is dead) resumes bit-exactly.
unset BRT_FAULT_INJECT
run resumed.log 120 "${resume_hosts[@]}" -x OMP_NUM_THREADS "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/c" \
  log.metrics_path="$work/resumed.jsonl"
expect_rc 0 "resume after $case_name"
from=$(sed -nE 's/^resumed from .*ckpt-0*([0-9]+)\.h5 at step.*/\1/p' resumed.log)
[ -n "$from" ] || fail "the next start did not resume: $(head -20 resumed.log)"
same_losses ref.jsonl resumed.jsonl "$from"
"$bin" ckpt diff "$(ckpt ref 8)" "$(ckpt c 8)" > /dev/null || fail "the final checkpoint differs from the uninterrupted run's"
! ls -a c | grep -qE '\.tmp' || fail "left after the resume: $(ls -a c | grep -E '\.tmp')"
record "cluster($case_name)" "$injected" "$fault_rc after $job_secs s (last process of the job gone after $last_secs s; bound $bound s)" \
  "$printed" "ckpt-2 sha256 unchanged; newest $(basename "$newest") verifies; left by the fault: ${leftovers:-nothing}, removed at the next start; resumed on ${resume_hosts[1]} from step $from, steps $((from + 1))-8 and the final checkpoint bit-identical to the uninterrupted run"
