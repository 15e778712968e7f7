#!/usr/bin/env bash
# slurm/train.sbatch on a real two-node Slurm: one slurmctld on this
# machine, a slurmd on each host (tests/cluster/cluster_slurm.sh). `srun -N 2` places one task
# on each host; `sbatch -N 2 slurm/train.sbatch` trains 6 steps with srun --mpi=pmix (one rank
# per host, TCP between them; the learning-rate schedule of a 12-step run); submitting it again with BRT_LAUNCHER=mpirun (Open MPI's mpirun
# inside the allocation, its orted started through srun) continues from that run's checkpoint
# to step 12; the two jobs' losses equal a direct `mpirun --host h1,h2` run of 12 steps, bit for
# bit; both allocations are released (the nodes idle again).
#   slurm.sh BRT_DIST
source "$(dirname "$0")/lib.sh"
cluster_up --hosts 2 --slurm
script=$repo/slurm/train.sbatch
unset BRT_CONFIG BRT_OVERRIDES BRT_REQUEUE BRT_MAX_REQUEUES BRT_SRUN_MPI BRT_LAUNCHER

tasks=$(srun -N 2 --ntasks-per-node=1 hostname | sort | paste -sd' ')
[ "$tasks" = "h1 h2" ] || fail "srun -N 2 ran on: $tasks"
echo "srun -N 2: one task on h1, one on h2"

job_field() { scontrol -o show job "$1" | grep -oE "(^| )$2=[^ ]*" | head -1 | cut -d= -f2; }
# wait_done JOB LIMIT_S: until JOB is COMPLETED; fails on any other end, or after LIMIT_S.
wait_done() {
  local state=""
  for _ in $(seq $(($2 * 2))); do
    state=$(job_field "$1" JobState)
    case $state in
      COMPLETED) return 0 ;;
      FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
        fail "job $1 ended $state: $(cat "$work/job-$1.out")" ;;
    esac
    sleep 0.5
  done
  fail "job $1 not done after $2 s (state $state)"
}
submit() {  # LAUNCHER OVERRIDES...: prints the job id
  local launcher=$1
  shift
  BRT_LAUNCHER=$launcher BRT_DIST=$bin BRT_RUN_DIR=$work/run sbatch --parsable -N 2 --ntasks-per-node=1 -c 1 \
    -J brt-cluster -o "$work/job-%j.out" "$script" "$config" "${SMALL[@]}" train.timeout_s=30 "$@"
}

run ref.log 120 mpi h1:1,h2:1 2 -x OMP_NUM_THREADS "${TRAIN[@]}" train.steps=12 log.metrics_path="$work/ref.jsonl"
expect_rc 0 "reference run, mpirun on h1 and h2"

jid=$(submit srun train.steps=6 optim.total_steps=12 checkpoint.every=3) || fail "sbatch refused the job"
wait_done "$jid" 120
out=$work/job-$jid.out
expect_text "$out" "launcher srun --mpi=pmix"
expect_text "$out" "2 ranks on 2 node(s)"
expect_text "$out" "placement: 2 ranks on 2 hosts: h1 rank 0, 1 thread (OMP_NUM_THREADS); h2 rank 1, 1 thread (OMP_NUM_THREADS)"
expect_text "$out" "step      6/6"
[ "$(job_field "$jid" NodeList)" = "h[1-2]" ] || fail "job $jid ran on $(job_field "$jid" NodeList)"
echo "job $jid (srun --mpi=pmix): steps 1-6 on h1 and h2"

jid=$(submit mpirun train.steps=12 checkpoint.every=3) || fail "sbatch refused the job"
wait_done "$jid" 120
out=$work/job-$jid.out
expect_text "$out" "launcher mpirun"
expect_text "$out" "resumed from $work/run/ckpt/ckpt-00000006.h5 at step 6"
expect_text "$out" "placement: 2 ranks on 2 hosts: h1 rank 0"
expect_text "$out" "step     12/12"
same_losses ref.jsonl "$work/run/metrics.jsonl"
echo "job $jid (mpirun in the allocation): resumed at step 6, finished 12; steps 1-12 bit-identical to mpirun --host h1,h2"

cluster_slurm_wait_idle 30 || fail "the allocations were not released: $(sinfo -N)"
wait_no_job_procs 10
echo "both allocations released; no rank, srun, slurmstepd or orted left on h1 or h2"
