#!/usr/bin/env bash
# slurm/train.sbatch on a real Slurm: a one-node cluster on localhost (munged,
# slurmctld, slurmd from Debian's slurm-wlm; tests/slurm/local_cluster.sh), then
#  1. sbatch -n 2 a short run: it trains from step 0 and checkpoints;
#  2. sbatch the same run again (more steps): it must resume from the first run's last
#     checkpoint, not restart;
#  3. sbatch a longer run, send its batch script SIGUSR1 mid-run (what --signal=B:USR1@T does
#     before the time limit): the ranks must save a checkpoint and stop, the script must
#     requeue the job, and the requeued job must resume from that checkpoint and finish.
# BRT_LAUNCHER=mpirun in the environment makes train.sbatch launch with mpirun instead of
# srun --mpi=pmix.
# Exits 77 (ctest SKIP) when Slurm or munge is not installed or will not start; stops every
# daemon it started on exit, pass or fail.
# usage: slurm_train.sh BRT_DIST   (run from the repository root; KEEP_WORK=1 keeps the logs)
source "$(dirname "$0")/../integration/common.sh"
source "$(dirname "$0")/local_cluster.sh"
bin=$(realpath "$1")
unset BRT_CONFIG BRT_OVERRIDES BRT_REQUEUE BRT_MAX_REQUEUES BRT_SRUN_MPI  # only what we pass
script=$(realpath slurm/train.sbatch)
work=$(mktemp -d)
cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -d "$work" ]; then
    echo "--- job logs and daemon log tails (test failed) ---" >&2
    for f in "$work"/job-*.out; do [ -f "$f" ] && { echo "== $f"; tail -40 "$f"; } >&2; done
    local_slurm_tail "$work/cluster/ctld.log" "$work/cluster/d.log" >&2
  fi
  local_slurm_stop
  if [ -n "${KEEP_WORK:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

start_rc=0
local_slurm_start "$work/cluster" || start_rc=$?
[ "$start_rc" -eq 0 ] || exit 77
echo "local Slurm: $(slurmctld -V), node $(hostname -s) idle"

# State of a job (kept by slurmctld for MinJobAge after it ends) and its restart count.
job_field() { scontrol -o show job "$1" | grep -oE "(^| )$2=[^ ]*" | head -1 | cut -d= -f2; }
# Waits until job $1 has ended for good after at least $2 restarts; fails after $3 seconds.
wait_job() {
  local jid=$1 restarts=$2 limit=$3 state=""
  for _ in $(seq $((limit * 2))); do
    state=$(job_field "$jid" JobState)
    case $state in
      COMPLETED) [ "$(job_field "$jid" Restarts)" -ge "$restarts" ] && return 0 ;;
      FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)
        fail "job $jid ended $state: $(cat "$work/job-$jid.out")" ;;
    esac
    sleep 0.5
  done
  fail "job $jid not done after $limit s (state $state): $(cat "$work/job-$jid.out" 2>/dev/null)"
}
# sbatch slurm/train.sbatch for 2 tasks on the one node; prints the job id.
submit() {
  local run_dir=$1; shift
  BRT_DIST=$bin BRT_RUN_DIR=$run_dir sbatch --parsable -N 1 -n 2 --ntasks-per-node=2 -c 1 \
    -J brt-slurm-test -o "$work/job-%j.out" "$script" configs/tiny.toml "${SMALL[@]}" "$@"
}

# 1 + 2: a finished run, submitted again with more steps, continues from its checkpoint.
run=$work/run-resume
jid=$(submit "$run" train.steps=6 checkpoint.every=3)
wait_job "$jid" 0 90
out=$work/job-$jid.out
grep -q "no checkpoint in $run/ckpt: starting from step 0" "$out" || fail "first job did not start fresh: $(cat "$out")"
grep -q "data parallel: 2 ranks" "$out" || fail "first job did not run 2 data-parallel ranks: $(cat "$out")"
grep -q "step      6/6" "$out" || fail "first job did not train 6 steps: $(cat "$out")"
[ -f "$run/ckpt/ckpt-00000006.h5" ] || fail "first job left no step-6 checkpoint"
echo "job $jid: trained steps 1-6 from scratch on 2 ranks"

# (the overrides this time through the script's BRT_OVERRIDES environment variable)
jid=$(BRT_OVERRIDES="train.steps=12 checkpoint.every=3" submit "$run")
wait_job "$jid" 0 90
out=$work/job-$jid.out
grep -q "resumed from $run/ckpt/ckpt-00000006.h5 at step 6" "$out" || fail "second job did not resume: $(cat "$out")"
! grep -q "starting from step 0" "$out" || fail "second job restarted from step 0"
grep -q "step     12/12" "$out" || fail "second job did not finish: $(cat "$out")"
! grep -qE "step +[1-6]/12" "$out" || fail "second job retrained steps 1-6"
echo "job $jid: resumed from the step-6 checkpoint and trained steps 7-12"

# 3: SIGUSR1 mid-run -> checkpoint, requeue, resume, finish.
run=$work/run-preempt
steps=1500
jid=$(submit "$run" train.steps=$steps log.every=50 checkpoint.every=1000)
out=$work/job-$jid.out
for _ in $(seq 120); do
  grep -q '"step":50,' "$run/metrics.jsonl" 2>/dev/null && break
  sleep 0.5
done
grep -q '"step":50,' "$run/metrics.jsonl" 2>/dev/null || fail "job $jid did not reach step 50 in 60 s"
scancel --signal=USR1 --batch "$jid"
wait_job "$jid" 1 150
grep -q "got SIGUSR1" "$out" || fail "batch script did not trap SIGUSR1: $(cat "$out")"
stop_line=$(grep -E "stopping cleanly after step [0-9]+ \(signal 10\)" "$out") ||
  fail "ranks did not stop cleanly on the forwarded SIGUSR1: $(cat "$out")"
stop_step=$(sed -E 's/.*after step ([0-9]+).*/\1/' <<< "$stop_line")
[ "$stop_step" -lt "$steps" ] || fail "stopped at step $stop_step, not mid-run"
ckpt=$(printf '%s/ckpt/ckpt-%08d.h5' "$run" "$stop_step")
[ -f "$ckpt" ] || fail "no checkpoint at the stop step $stop_step: $(ls "$run/ckpt")"
"$bin" ckpt verify "$ckpt" > /dev/null || fail "$ckpt does not verify"
grep -q "requeueing job $jid" "$out" || fail "batch script did not requeue: $(cat "$out")"
grep -q "resumed from $ckpt at step $stop_step" "$out" || fail "requeued job did not resume from $ckpt: $(cat "$out")"
grep -q "step *$steps/$steps" "$out" || fail "requeued job did not finish: $(cat "$out")"
[ -f "$(printf '%s/ckpt/ckpt-%08d.h5' "$run" "$steps")" ] || fail "no final checkpoint"
[ "$(job_field "$jid" ExitCode)" = "0:0" ] || fail "job $jid exit code $(job_field "$jid" ExitCode)"
echo "job $jid: SIGUSR1 at step $stop_step -> checkpoint, requeue (restart $(job_field "$jid" Restarts)), resumed, finished $steps steps"
