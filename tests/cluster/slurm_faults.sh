#!/usr/bin/env bash
# Faults under Slurm: slurm/train.sbatch with srun --mpi=pmix on two hosts.
#   slurm_faults.sh BRT_DIST link_cut      h2's link cut while world rank 0 pauses at step 4: the
#       ranks time out (train.timeout_s = 5) and exit 124; the job either ends FAILED (the
#       allocation released) or, when slurmctld declared h2 dead first (NODE_FAIL), is requeued
#       — h2's rank ends itself through the abort helper, since PMIx cannot reach srun; once the
#       link is back (and h2's slurmd restarted, so it registers at once) the requeued job, or
#       the same sbatch command again, resumes bit-exactly.
#   slurm_faults.sh BRT_DIST slurmd_dies   h2's slurmd killed while world rank 0 pauses at step
#       4: after SlurmdTimeout (10 s) Slurm sets h2 DOWN, cancels the job for NODE_FAIL and
#       requeues it (train.sbatch asks for --requeue); the ranks, told by SIGTERM, save at the
#       step they are on and exit 75; with h2's slurmd back the requeued job resumes from that
#       checkpoint and finishes, bit-exactly.
# One FAULT line each.
source "$(dirname "$0")/lib.sh"
case_name=$2
cluster_up --hosts 2 --slurm
script=$repo/slurm/train.sbatch
unset BRT_CONFIG BRT_OVERRIDES BRT_REQUEUE BRT_MAX_REQUEUES BRT_SRUN_MPI BRT_LAUNCHER
args=(train.steps=8 checkpoint.every=1 checkpoint.keep=0 train.timeout_s=5)
bound=$((5 + 2 + 10 + 3 + 10))

job_field() { scontrol -o show job "$1" | grep -oE "(^| )$2=[^ ]*" | head -1 | cut -d= -f2; }
# wait_state JOB REGEX LIMIT_S: until JOB's "JobState Restarts" matches REGEX.
wait_state() {
  local now=""
  for _ in $(seq $(($3 * 4))); do
    now="$(job_field "$1" JobState) $(job_field "$1" Restarts)"
    grep -qE "$2" <<< "$now" && return 0
    sleep 0.25
  done
  fail "job $1 is '$now', not '$2', after $3 s: $(tail -20 "$work/job-$1.out")"
}
submit() {
  BRT_LAUNCHER=srun BRT_DIST=$bin BRT_RUN_DIR=$work/run sbatch --parsable -N 2 --ntasks-per-node=1 -c 1 \
    -J brt-fault -o "$work/job-%j.out" "$script" "$config" "${SMALL[@]}" "${args[@]}" "$@"
}
# h2's slurmd started afresh, so that it registers at once (a slurmd cut off for a while
# retries its messages with growing pauses) and h2 returns to service (ReturnToService=2).
# `between` (the link's repair) runs while no slurmd is there to half-register.
restart_slurmd_h2() {
  local pid between=${1:-true} state=""
  pid=$(cluster_slurmd_pid h2) && kill "$pid" 2> /dev/null
  for _ in $(seq 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
  $between
  cluster_start_slurmd h2 || fail "slurmd on h2 would not start again"
  for _ in $(seq 120); do
    state=$(sinfo -h -N -n h2 -o %T)
    case $state in idle | mixed | allocated | completing) return 0 ;; esac
    sleep 0.5
  done
  fail "h2 did not return to service (state $state)"
}

run ref.log 120 mpi h1:1,h2:1 2 -x OMP_NUM_THREADS "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/ref" \
  log.metrics_path="$work/ref.jsonl"
expect_rc 0 "reference run"

case $case_name in
  link_cut)
    jid=$(BRT_FAULT_INJECT="pause@step=4@rank=0@ms=1500" submit) || fail "sbatch refused the job"
    out=$work/job-$jid.out
    job=$$ wait_text "$out" "fault injection: pausing" 60
    injected_at=$(now_ns)
    cluster_cut h2
    injected="h2's link cut while world rank 0 pauses as step 4 begins (sbatch -N 2, srun --mpi=pmix)"
    # Two ends race: the ranks' timeout (exit 124: the job FAILED, resubmitted below) and
    # slurmctld's NODE_FAIL for h2 after SlurmdTimeout (the job requeued, as --requeue asks).
    wait_state "$jid" "^FAILED|^(PENDING|REQUEUED|REQUEUE_HOLD) 1$" "$bound"
    ended=$(now_ns)
    requeued=$(job_field "$jid" Restarts)
    # Held until h2 is whole again: the requeued job keeps its ID, and a start while h2's stale
    # step of the first start (its slurmstepd outlives the cut) is still there fails to launch.
    [ "$requeued" = 1 ] && scontrol hold "$jid"
    [ "$requeued" = 1 ] || [ "$(job_field "$jid" ExitCode)" = "124:0" ] || fail "job $jid exit code $(job_field "$jid" ExitCode)"
    expect_text "$out" "brt-dist exited with status 124"
    expect_text "$out" "timeout on world rank 0 (host h1)"
    expect_text "$out" "(host h2)"
    cluster_slurm_wait_idle 10 h1 || fail "h1 not released: $(sinfo -N)"
    wait_no_ranks() {  # brt-dist on either host (h2's slurmstepd waits for the link: Slurm's)
      for _ in $(seq $(($1 * 4))); do
        [ -z "$(job_procs | grep brt-dist)" ] && return 0
        sleep 0.25
      done
      fail "ranks left: $(job_procs)"
    }
    wait_no_ranks "$bound"
    last_secs=$(secs_between "$injected_at" "$(now_ns)")
    restart_slurmd_h2 "cluster_heal h2"
    wait_no_job_procs 60  # the stale step on h2, ended by its slurmd once it registers
    [ "$requeued" = 1 ] && scontrol release "$jid"
    rc=124
    if [ "$requeued" = 1 ]; then
      survived_how="brt-dist exited 124; Slurm set h2 DOWN and requeued the job (NODE_FAIL), which restarted once h2's link and slurmd were back"
    else
      survived_how="job FAILED (124:0), the allocation released; h2 DOWN until its link and slurmd were back; resubmitted"
    fi
    ;;
  slurmd_dies)
    # A pause longer than Slurm takes to notice (SlurmdTimeout 10 s), shorter than the timeout.
    jid=$(BRT_FAULT_INJECT="pause@step=4@rank=0@ms=30000" submit train.timeout_s=60) || fail "sbatch refused the job"
    out=$work/job-$jid.out
    job=$$ wait_text "$out" "fault injection: pausing" 60
    injected_at=$(now_ns)
    kill -9 "$(cluster_slurmd_pid h2)" || fail "no slurmd on h2"
    injected="h2's slurmd killed (SIGKILL) while world rank 0 pauses as step 4 begins (sbatch -N 2, srun --mpi=pmix)"
    wait_state "$jid" "^(PENDING|REQUEUED|REQUEUE_HOLD) 1$" 60
    ended=$(now_ns)
    expect_text "$out" "DUE TO NODE FAILURE"
    expect_text "$out" "got SIGTERM: asking brt-dist to checkpoint and stop"
    expect_text "$out" "brt-dist exited with status 75"
    wait_no_job_procs 30
    last_secs=$(secs_between "$injected_at" "$(now_ns)")
    rc=75
    restart_slurmd_h2
    survived_how="NODE_FAIL: requeued by Slurm (Restarts 1), ranks saved at their step on SIGTERM"
    ;;
  *) fail "unknown case $case_name" ;;
esac
job_secs=$(secs_between "$injected_at" "$ended")
[ "$job_secs" -le $((bound + 20)) ] || fail "the job ended $job_secs s after the injection"
printed=$(first_line "$out" 'timeout on world rank|DUE TO NODE FAILURE|stopping cleanly')
newest=$(ls "$work"/run/ckpt/ckpt-*.h5 | sort | tail -1)
verify_ok "$newest"
leftovers=$(cd "$work/run/ckpt" && ls -a | grep -E '\.tmp' | paste -sd' ')

if [ "$case_name" = link_cut ] && [ "$requeued" != 1 ]; then
  jid=$(submit) || fail "sbatch refused the second job"
  out=$work/job-$jid.out
fi
wait_state "$jid" "^COMPLETED" 120
expect_text "$out" "resumed from $work/run/ckpt/"
from=$(sed -nE 's/^resumed from .*ckpt-0*([0-9]+)\.h5 at step.*/\1/p' "$out" | tail -1)
# Every start appended to metrics.jsonl: every step logged, before and after the fault, is the
# uninterrupted run's.
same_losses ref.jsonl "$work/run/metrics.jsonl"
"$bin" ckpt diff "$(ckpt ref 8)" "$(ckpt "$work/run/ckpt" 8)" > /dev/null || fail "the final checkpoint differs"
! ls -a "$work/run/ckpt" | grep -qE '\.tmp' || fail "left after the resume: $(ls -a "$work/run/ckpt" | grep -E '\.tmp')"
cluster_slurm_wait_idle 30 || fail "the allocation was not released: $(sinfo -N)"
record "slurm($case_name)" "$injected" "$rc after $job_secs s (last rank gone after $last_secs s)" "$printed" \
  "$survived_how; newest $(basename "$newest") verifies; left by the fault: ${leftovers:-nothing}, removed at the next start; resumed from step $from, steps after it and the final checkpoint bit-identical to the uninterrupted run"
