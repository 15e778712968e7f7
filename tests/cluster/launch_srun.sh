#!/usr/bin/env bash
# srun (an interactive job step from a login shell) under `brt-dist launch` on the two-node
# Slurm: Ctrl-C (SIGINT to the supervisor) becomes SIGUSR1, which srun forwards to every task;
# the ranks save and exit 75, so the step — and the supervisor — exit 75 as one process does
# (srun given SIGINT itself only prints the step's status, and twice kills the tasks). The
# nodes are released and the next start resumes bit-exactly. One FAULT line.
#   launch_srun.sh BRT_DIST
source "$(dirname "$0")/lib.sh"
cluster_up --hosts 2 --slurm
args=(train.steps=8 checkpoint.every=1 checkpoint.keep=0 train.timeout_s=30)
SRUN=(srun -N 2 --ntasks-per-node=1 -c 1 --mpi=pmix -J brt-launch)

reference_and_first_steps "${SRUN[@]}"
expect_text ref.log "placement: 2 ranks on 2 hosts"

faulty=("$bin" launch "${SRUN[@]}" --export=ALL "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/c"
        log.metrics_path="$work/faulty.jsonl")
extra=()
interrupt() { kill -INT "$(pgrep -f -- "^$bin launch srun" | head -1)"; }
pause_then "pause@step=4@rank=0@ms=2000" interrupt
wait_job 60
job_secs=$(secs_between "$injected_at" "$ended")
expect_rc 75 "SIGINT to brt-dist launch srun"
expect_text fault.log "brt-dist launch: SIGINT: asking the ranks to stop cleanly (SIGUSR1 to srun"
expect_text fault.log "stopping cleanly after step"
wait_no_job_procs 30
for _ in $(seq 60); do [ -z "$(squeue -h -n brt-launch)" ] && break; sleep 0.5; done
[ -z "$(squeue -h -n brt-launch)" ] || fail "the step's job is still queued: $(squeue -n brt-launch)"
resumes_bit_exactly "${SRUN[@]}"
record "cluster(srun_interrupt)" "SIGINT to brt-dist launch srun -N 2 while world rank 0 pauses as step 4 begins" \
  "75 after $job_secs s" "$(first_line fault.log 'stopping cleanly after step')" \
  "the allocation released; newest $(basename "$newest") verifies; resumed from step $from, steps $((from + 1))-8 and the final checkpoint bit-identical"
