#!/usr/bin/env bash
# srun (an interactive job step from a login shell) under `brt-dist launch` on the two-node
# Slurm. Each case ends the step, releases the nodes, keeps the newest checkpoint verifiable and
# the next start resumes bit-exactly. One FAULT line.
#   launch_srun.sh BRT_DIST CASE
#     interrupt     Ctrl-C (SIGINT to the supervisor) while rank 0 pauses at step 4: SIGUSR1,
#                   which srun forwards to every task; the ranks save and exit 75, so the step —
#                   and the supervisor — exit 75 as one process does (srun given SIGINT itself
#                   only prints the step's status, and twice kills the tasks)
#     rank_stalled  world rank 1 (h2) SIGSTOPped as step 4 begins (train.timeout_s = 5): rank 0
#                   times out and aborts; Slurm ends the step; exit 124
source "$(dirname "$0")/lib.sh"
case_name=$2
cluster_up --hosts 2 --slurm
args=(train.steps=8 checkpoint.every=1 checkpoint.keep=0 train.timeout_s=5)
SRUN=(srun -N 2 --ntasks-per-node=1 -c 1 --mpi=pmix -J brt-launch)

reference_and_first_steps "${SRUN[@]}"
expect_text ref.log "placement: 2 ranks on 2 hosts"

faulty=("$bin" launch "${SRUN[@]}" --export=ALL "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/c"
        log.metrics_path="$work/faulty.jsonl")
extra=()
case $case_name in
  interrupt)
    interrupt() { kill -INT "$(job_process -f -- "^$bin launch srun")"; }
    pause_then "pause@step=4@rank=0@ms=2000" interrupt
    injected="SIGINT to brt-dist launch srun -N 2 while world rank 0 pauses as step 4 begins"
    want_rc=75 ;;
  rank_stalled)
    pause_then "stop@step=4@rank=1" true
    injected="SIGSTOP to world rank 1 (h2) under brt-dist launch srun -N 2 as step 4 begins"
    want_rc=124 ;;
  *) fail "unknown case $case_name" ;;
esac
wait_job 60
fault_rc=$rc
job_secs=$(secs_between "$injected_at" "$ended")
expect_rc $want_rc "$injected"
if [ "$case_name" = interrupt ]; then
  expect_text fault.log "brt-dist launch: SIGINT: asking the ranks to stop cleanly (SIGUSR1 to srun"
  expect_text fault.log "stopping cleanly after step"
  printed=$(first_line fault.log 'stopping cleanly after step')
else
  expect_text fault.log "timeout on world rank 0 (host h1)"
  printed=$(first_line fault.log 'timeout on world rank 0')
fi
wait_no_job_procs 30
for _ in $(seq 60); do [ -z "$(squeue -h -n brt-launch)" ] && break; sleep 0.5; done
[ -z "$(squeue -h -n brt-launch)" ] || fail "the step's job is still queued: $(squeue -n brt-launch)"
resumes_bit_exactly "${SRUN[@]}"
record "cluster(srun_$case_name)" "$injected" "$fault_rc after $job_secs s" "$printed" \
  "the allocation released; newest $(basename "$newest") verifies; resumed from step $from, steps $((from + 1))-8 and the final checkpoint bit-identical"
