#!/usr/bin/env bash
# mpirun on a head node that is not one of the job's hosts (a login node launching with
# `--host a,b` through its ssh agent), under `brt-dist launch` (launch/supervise/supervisor.h):
# three hosts, mpirun on h3, the ranks on h1 and h2. Each fault ends the whole job on its own —
# every rank, orted and mpirun gone on every host, the launching node included — keeps the last
# good checkpoint verifiable, and the next start resumes bit-exactly.
#   launch.sh BRT_DIST CASE
#     head_link_cut       h2's link cut as step 5 begins (train.timeout_s = 5): the ranks report
#                         and abort; where mpirun cannot end the job (it waits for h2's orted),
#                         the supervisor ends its process group after --grace-s; exit 124
#     head_interrupt      SIGINT to brt-dist launch while rank 0 pauses at step 4: SIGUSR1 through
#                         mpirun to every rank, which save and exit 75; the job exits 75
#     head_mpirun_killed  SIGKILL to mpirun on h3 as step 4 begins: the orteds lose it and end their
#                         ranks; the supervisor exits 137
#     head_rank_stalled   world rank 1 (h2) SIGSTOPped as step 4 begins: rank 0 times out and aborts;
#                         exit 124
#     head_host_killed    every process of h2 killed while rank 1 pauses at step 4: mpirun sees h2's
#                         ssh session close and ends the job; the next start resumes on h1 alone
#     head_rank_silent    world rank 1 (h2) SIGSTOPped as step 4 begins (rank 0 pauses 5 s at step 5,
#                         so the teardown stops the ranks there), train.timeout_s = 600 and
#                         --heartbeat-timeout-s 6: its heartbeats stop and the supervisor ends the
#                         job naming it (launch/supervise/heartbeat_watch.h), exit 124, in seconds
#                         where the inner bound would wait 600 s
#     head_slow_link      h2's link shaped to 2 Mbit/s from step 4 on, --heartbeat-timeout-s 6: slow
#                         steps but steady beats, so nothing ends the job; it finishes, its losses
#                         and final checkpoint those of the uninterrupted run
# Prints one FAULT line each.
source "$(dirname "$0")/lib.sh"
case_name=$2
timeout_s=5
grace_s=10
cluster_up --hosts 3 --shared-mb 256
args=(train.steps=8 checkpoint.every=1 checkpoint.keep=0 train.timeout_s=$timeout_s)
# shellcheck disable=SC2046  # launcher_env's words are separate arguments
HEAD=(on h3 "$bin" launch --grace-s $grace_s mpirun $(launcher_env) --host h1:1,h2:1 -np 2 -x OMP_NUM_THREADS)

case $case_name in
  head_rank_silent | head_slow_link)  # watched by heartbeats (the reference run too)
    HEAD=(on h3 "$bin" launch --grace-s $grace_s --heartbeat-timeout-s 6 mpirun $(launcher_env) --host h1:1,h2:1 -np 2
          -x OMP_NUM_THREADS) ;;
esac
reference_and_first_steps "${HEAD[@]}"
expect_text ref.log "placement: 2 ranks on 2 hosts"

faulty=("${HEAD[@]}" -x BRT_FAULT_INJECT "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/c" log.metrics_path="$work/faulty.jsonl")
extra=()
# The supervisor on h3 and the mpirun it started (one PID namespace: pgrep sees them from here),
# found among this job's processes (another test's supervisor may run beside it).
supervisor_pid() { job_process -f -- "^$bin launch --grace-s"; }
mpirun_pid() { pgrep -P "$(supervisor_pid)" -x mpirun | head -1; }
heal=""
resume_on=("${HEAD[@]}")
case $case_name in
  head_link_cut)
    # Saves at steps 3 and 6 only, so none is in flight when the link goes.
    faulty+=(checkpoint.every=3 checkpoint.async=false)
    pause_then "pause@step=5@rank=0@ms=1500" cluster_cut h2
    injected="h2's link cut while world rank 0 pauses as step 5 begins; mpirun on h3 (no rank there)"
    heal=1
    bound=$((timeout_s + 2 + grace_s + 5 + 10)) ;;
  head_interrupt)
    interrupt() { kill -INT "$(supervisor_pid)"; }  # looked up once the job runs
    pause_then "pause@step=4@rank=0@ms=2000" interrupt
    injected="SIGINT to brt-dist launch on h3 while world rank 0 pauses as step 4 begins"
    bound=30 ;;
  head_mpirun_killed)
    kill_mpirun() { kill -KILL "$(mpirun_pid)"; }
    pause_then "pause@step=4@rank=0@ms=2000" kill_mpirun
    injected="SIGKILL to mpirun on h3 while world rank 0 pauses as step 4 begins"
    bound=30 ;;
  head_rank_stalled)
    pause_then "stop@step=4@rank=1" true
    injected="SIGSTOP to world rank 1 (h2) as step 4 begins; mpirun on h3"
    bound=$((timeout_s + 2 + grace_s + 5 + 10)) ;;
  head_host_killed)
    pause_then "pause@step=4@rank=1@ms=1500" cluster_kill_host h2
    injected="every process of h2 killed (SIGKILL; its sshd, orted and rank 1) as step 4 begins; mpirun on h3"
    resume_on=(on h3 "$bin" launch --grace-s $grace_s mpirun $(launcher_env) --host h1:2 -np 2 -x OMP_NUM_THREADS)
    bound=$((timeout_s + 2 + grace_s + 5 + 10)) ;;
  head_rank_silent)
    faulty+=(train.timeout_s=600)
    # Rank 0 pauses 5 s as step 5 begins: when the teardown's SIGCONT lets rank 1 go on, the
    # SIGTERM behind it stops the ranks there (a save, exit 75) instead of the tiny model running
    # to its last step first.
    pause_then "stop@step=4@rank=1;pause@step=5@rank=0@ms=5000" true
    injected="SIGSTOP to world rank 1 (h2) as step 4 begins, train.timeout_s = 600; mpirun on h3 under --heartbeat-timeout-s 6"
    bound=$((6 + 2 + 5 + 10)) ;;
  head_slow_link)
    slow_h2() { cluster_slow h2 2mbit || fail "tc could not shape h2's link"; }
    pause_then "pause@step=4@rank=0@ms=500" slow_h2
    injected="h2's link shaped to 2 Mbit/s as step 4 begins; mpirun on h3 under --heartbeat-timeout-s 6"
    bound=120 ;;
  *) fail "unknown case $case_name" ;;
esac
wait_job "$bound"
fault_rc=$rc
job_secs=$(secs_between "$injected_at" "$ended")
wait_no_job_procs "$bound"
last_secs=$(secs_between "$injected_at" "$(now_ns)")
[ "$job_secs" -le "$bound" ] || fail "the job ended $job_secs s after the injection (bound $bound s)"
case $case_name in
  head_link_cut)
    expect_rc 124 "$injected"
    expect_text fault.log "timeout on world rank 0 (host h1)"
    expect_text fault.log "brt-dist: job abort: world rank 0 (host h1), exit status 124"
    # Which ended mpirun: Open MPI itself, or (mpirun waiting for h2's orted) the supervisor.
    printed=$(first_line fault.log 'brt-dist launch: ')
    [ -n "$printed" ] || printed="mpirun ended the job itself: $(first_line fault.log 'timeout on world rank 0')" ;;
  head_interrupt)
    expect_rc 75 "$injected"
    expect_text fault.log "brt-dist launch: SIGINT: asking the ranks to stop cleanly"
    expect_text fault.log "stopping cleanly after step"
    printed=$(first_line fault.log 'stopping cleanly after step') ;;
  head_mpirun_killed)
    expect_rc 137 "$injected"
    printed="mpirun killed; the supervisor exits 137" ;;
  head_rank_stalled)
    expect_rc 124 "$injected"
    expect_text fault.log "timeout on world rank 0 (host h1)"
    printed=$(first_line fault.log 'timeout on world rank 0') ;;
  head_host_killed)
    [ "$rc" -ne 0 ] || fail "the job exited 0 with h2 dead"
    printed=$(first_line fault.log 'Connection to h2 closed|timeout on world rank 0|brt-dist launch: ') ;;
  head_rank_silent)
    expect_rc 124 "$injected"
    expect_text fault.log "brt-dist launch: world rank 1 (host h2) has sent no heartbeat for"
    expect_text fault.log "(timeout 6 s: launch.heartbeat_timeout_s, --heartbeat-timeout-s); it last reported "
    expect_no_text fault.log "timeout on world rank"
    expect_no_text fault.log "brt-dist heartbeat: "  # the beats stay out of the log
    printed=$(first_line fault.log 'has sent no heartbeat') ;;
  head_slow_link)
    expect_rc 0 "$injected"
    expect_no_text fault.log "has sent no heartbeat"
    same_losses ref.jsonl faulty.jsonl 2
    "$bin" ckpt diff "$(ckpt ref 8)" "$(ckpt c 8)" > /dev/null || fail "the final checkpoint differs from the uninterrupted run's"
    record "cluster($case_name)" "$injected" "0 after $job_secs s" "nothing: the beats kept coming" \
      "every loss and the final checkpoint bit-identical to the uninterrupted run"
    exit 0 ;;
esac
[ -n "$heal" ] && cluster_heal h2
resumes_bit_exactly "${resume_on[@]}"
record "cluster($case_name)" "$injected" "$fault_rc after $job_secs s (last process of the job gone on h1-h3 after $last_secs s; bound $bound s)" \
  "$printed" "ckpt-2 unchanged; newest $(basename "$newest") verifies; resumed from step $from, steps $((from + 1))-8 and the final checkpoint bit-identical to the uninterrupted run"
