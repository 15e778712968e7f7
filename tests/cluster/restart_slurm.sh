#!/usr/bin/env bash
# brt-dist launch --restarts under Slurm on three nodes (launch/supervise/restarts.h):
#   restart_slurm.sh BRT_DIST CASE
#     srun_killed        `brt-dist launch --restarts 2 srun -N 2 ...` from a login shell: world rank 1
#                        SIGKILLed as step 4 begins (attempt 1); srun names its node, the next step
#                        runs with `srun --exclude=NODE` on the other two nodes; the run finishes
#                        with every loss and the final checkpoint of the uninterrupted run
#     srun_shrink        inside a two-node allocation (salloc -N 2), `brt-dist launch --restarts 2
#                        --min-dp 1 srun -N 2 ...`: rank 1 SIGKILLed at step 4; no node left to
#                        spare, so the next step runs with `srun --exclude=NODE -N 1` and
#                        train.grad_accum = 2; its losses and final checkpoint equal a resume by
#                        hand at one rank, /data/cursor the uninterrupted run's
#     srun_node_check    inside a three-node allocation (salloc -N 3), `brt-dist launch --restarts 2
#                        --min-dp 1 srun -N 2 ...`: the third node loses the shared file system
#                        (an empty tmpfs over the work folder in its mount table) while rank 1
#                        pauses at step 3, then rank 1 is SIGKILLed at step 4; the supervisor
#                        checks every node of the allocation by a one-task srun step, leaves out
#                        the fault's node and the one whose checkpoint.dir is gone, and shrinks
#                        to `srun --exclude=... -N 1` (train.grad_accum = 2), exact as srun_shrink
#     supervisor_killed  slurm/train.sbatch with BRT_RESTARTS=2 (the supervisor inside the batch
#                        job): the supervisor SIGKILLed at step 4; its srun step ends (the ranks save
#                        and stop), the script requeues the job, the requeued start resumes and
#                        finishes exactly
# One FAULT line each.
source "$(dirname "$0")/lib.sh"
case_name=$2
cluster_up --hosts 3 --slurm
args=(train.steps=8 checkpoint.every=1 checkpoint.keep=0 train.timeout_s=600)
SRUN=(srun -N 2 --ntasks-per-node=1 -c 1 --mpi=pmix -J brt-restart)
run ref.log 120 "${SRUN[@]}" "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/ref" log.metrics_path="$work/ref.jsonl"
expect_rc 0 "reference run (srun -N 2)"
job_field() { scontrol -o show job "$1" | grep -oE "(^| )$2=[^ ]*" | head -1 | cut -d= -f2; }
# srun_fault PREFIX... -- LAUNCH-FLAGS...: `PREFIX brt-dist launch --restarts 2 LAUNCH-FLAGS srun -N
# 2 ...` with world rank 1 killed as step 4 begins (attempt 1); waits for it to finish (exit 0)
# and sets $victim, the node the supervisor named.
srun_fault() {
  local prefix=() flags=()
  while [ "$1" != -- ]; do prefix+=("$1"); shift; done
  shift
  flags=("$@")
  faulty=("${prefix[@]}" "$bin" launch --heartbeat-timeout-s 6 --restarts 2 "${flags[@]}"
          --restart-log "$work/restarts.jsonl" "${SRUN[@]}" --export=ALL "${TRAIN[@]}" "${args[@]}"
          checkpoint.dir="$work/c" log.metrics_path="$work/faulty.jsonl")
  extra=()
  pause_then "${fault_spec:-kill@step=4@rank=1@attempt=1}" "${fault_action:-true}"
  wait_job 120
  expect_rc 0 "rank 1 killed, one restart"
  victim=$(sed -nE 's/.*the fault was on host (h[0-9]).*/\1/p' fault.log | head -1)
  [ -n "$victim" ] || fail "no host named for the fault: $(grep 'brt-dist launch' fault.log)"
}
case $case_name in
  srun_killed)
    srun_fault --
    expect_text fault.log "brt-dist launch: host $victim left out (the fault was there): srun --exclude=$victim"
    expect_text fault.log "brt-dist launch: restart 1 of 2: relaunching (attempt 2) on srun --exclude=$victim"
    expect_text fault.log "brt-dist launch: attempt 2 trains again"
    placed=$(grep 'placement: 2 ranks on 2 hosts' fault.log | tail -1)
    case $placed in *"$victim rank"*) fail "attempt 2 ran on $victim again: $placed" ;; esac
    same_losses ref.jsonl faulty.jsonl 0
    "$bin" ckpt diff "$(ckpt ref 8)" "$(ckpt c 8)" > /dev/null || fail "the final checkpoint differs"
    total=$(sed -nE 's/.*"fault_to_step_s":([0-9.]+).*/\1/p' restarts.jsonl)
    record "restart(srun_killed)" "SIGKILL to world rank 1 ($victim) as step 4 begins; srun -N 2 of 3 nodes" \
      "0 after one restart" "$(grep -m1 'left out' fault.log | cut -c1-160)" \
      "fault to first new step $total s; $placed; every loss and the final checkpoint bit-identical" ;;
  srun_shrink)
    srun_fault salloc -N 2 -J brt-restart -- --min-dp 1
    expect_text fault.log "brt-dist launch: shrinking: 2 -> 1 ranks, 1 data-parallel ranks; train.grad_accum = 2 keeps the global batch of 2 streams"
    expect_text fault.log "brt-dist launch: restart 1 of 2: relaunching (attempt 2) on srun --exclude=$victim -N 1"
    shrunk_run_is_exact 8
    record "restart(srun_shrink)" "SIGKILL to world rank 1 ($victim) as step 4 begins; salloc -N 2, srun -N 2" \
      "0 after one restart on one node" "$(grep -m1 'shrinking:' fault.log | cut -c1-160)" \
      "from step $from every loss and the final checkpoint equal a resume at one rank by hand; /data/cursor equal to the uninterrupted run's" ;;
  srun_node_check)
    # The node attempt 1 does not use loses its view of the work folder (checkpoint.dir) while
    # rank 1 pauses at step 3; rank 1 dies as step 4 begins.
    hide_work_on_spare() {
      local placed
      placed=$(grep 'placement: 2 ranks on 2 hosts' fault.log | tail -1)
      for spare in h1 h2 h3; do case $placed in *"$spare rank"*) ;; *) break ;; esac; done
      cluster_exec "$spare" mount -t tmpfs brt-lost-shared "$work" || fail "cannot hide $work on $spare"
    }
    fault_spec="pause@step=3@rank=1@ms=3000@attempt=1;kill@step=4@rank=1@attempt=1" fault_action=hide_work_on_spare \
      srun_fault salloc -N 3 -J brt-restart -- --min-dp 1
    cluster_exec "$spare" umount "$work"
    expect_text fault.log "brt-dist launch: host $spare: FAILED its check: reachable"
    expect_text fault.log "checkpoint dir $work/c is not a readable directory there"
    expect_text fault.log "brt-dist launch: host $spare left out (failed its check)"
    expect_text fault.log "brt-dist launch: host $victim left out (the fault was there)"
    expect_text fault.log "brt-dist launch: restart 1 of 2: relaunching (attempt 2) on srun --exclude=$spare,$victim -N 1"
    shrunk_run_is_exact 8
    record "restart(srun_node_check)" "checkpoint.dir hidden on $spare at step 3, SIGKILL to world rank 1 ($victim) at step 4; salloc -N 3, srun -N 2" \
      "0 after one restart on one node" "$(grep -m1 "host $spare: FAILED" fault.log | cut -c1-160)" \
      "from step $from every loss and the final checkpoint equal a resume at one rank by hand; /data/cursor equal to the uninterrupted run's" ;;
  supervisor_killed)
    # Rank 0 pauses 3 s as step 4 begins (every start: the requeued one pauses too): the window.
    jid=$(BRT_FAULT_INJECT="pause@step=4@rank=0@ms=3000" BRT_RESTARTS=2 BRT_LAUNCHER=srun BRT_DIST=$bin BRT_RUN_DIR=$work/run sbatch --parsable -N 2 \
            --ntasks-per-node=1 -c 1 -J brt-restart -o "$work/job-%j.out" "$repo/slurm/train.sbatch" "$config" \
            "${SMALL[@]}" "${args[@]}") || fail "sbatch refused the job"
    out=$work/job-$jid.out
    for _ in $(seq 240); do grep -q "fault injection: pausing" "$out" 2> /dev/null && break; sleep 0.25; done
    grep -q "fault injection: pausing" "$out" || fail "job $jid did not reach step 4: $(tail -5 "$out")"
    pid=$(cluster_procs | awk '$3 ~ /brt-dist$/ && $4 == "launch" { print $2; exit }')
    [ -n "$pid" ] || fail "no supervisor among the job's processes: $(cluster_procs)"
    kill -KILL "$pid"
    for _ in $(seq 240); do [ "$(job_field "$jid" JobState)" = COMPLETED ] && break; sleep 0.5; done
    [ "$(job_field "$jid" JobState)" = COMPLETED ] || fail "job $jid: $(job_field "$jid" JobState): $(tail -20 "$out")"
    [ "$(job_field "$jid" Restarts)" = 1 ] || fail "job $jid was not requeued once: Restarts=$(job_field "$jid" Restarts)"
    expect_text "$out" "the supervisor (brt-dist launch) was killed"
    expect_text "$out" "requeueing job $jid"
    expect_text "$out" "resumed from $work/run/ckpt/"
    same_losses ref.jsonl run/metrics.jsonl 0
    "$bin" ckpt diff "$(ckpt ref 8)" "$(ckpt run/ckpt 8)" > /dev/null || fail "the final checkpoint differs"
    record "restart(supervisor_killed)" "SIGKILL to brt-dist launch inside the batch job at step 4" \
      "COMPLETED after one requeue" "$(grep -m1 'supervisor (brt-dist launch) was killed' "$out" | cut -c1-160)" \
      "resumed; every loss and the final checkpoint bit-identical" ;;
  *) fail "unknown case $case_name" ;;
esac
