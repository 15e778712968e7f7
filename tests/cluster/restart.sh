#!/usr/bin/env bash
# brt-dist launch --restarts on the namespaced cluster (launch/supervise/restarts.h): four hosts,
# the supervisor and mpirun on h4, the ranks on h1 and h2, h3 the spare. Each fault ends the
# first attempt; the supervisor checks the hosts over ssh, leaves h2 out, puts h3 in its place and
# relaunches; the run resumes from its newest good checkpoint and finishes (exit 0), every later
# loss and the final checkpoint equal to the uninterrupted run's. The JSONL record gives the
# seconds from the fault's first sign to the first new step, bounded here.
#   restart.sh BRT_DIST CASE
#     rank_killed   world rank 1 (h2) SIGKILLed as step 4 begins: mpirun names h2
#     rank_stalled  world rank 1 (h2) SIGSTOPped as step 4 begins, train.timeout_s = 600: its
#                   heartbeats stop (--heartbeat-timeout-s 6)
#     host_killed   every process of h2 killed while rank 1 pauses at step 4: mpirun sees its ssh
#                   session close, h2 fails its check (no sshd)
#     link_cut      h2's link cut while rank 1 pauses at step 4: its heartbeats stop; mpirun,
#                   unable to reach h2's orted, is killed after --kill-after-s; h2 fails its check
#                   (no answer)
#     shrink        no spare, --min-dp 1: rank 1 (h2) SIGKILLed at step 4; the relaunch runs on h1
#                   alone with train.grad_accum = 2 (the global batch of 2 streams kept): its
#                   losses and final checkpoint equal a run started at that size from the same
#                   checkpoint, and its data cursors (/data) the uninterrupted run's: no sample
#                   skipped or repeated
# Prints one FAULT line each.
source "$(dirname "$0")/lib.sh"
case_name=$2
cluster_up --hosts 4 --shared-mb 256
# 16 steps: a job ended while it has a dozen steps left cannot finish them during the teardown
# (SIGCONT and SIGTERM reach a stopped rank; the ranks then stop at their step boundary).
steps=16
args=(train.steps=$steps checkpoint.every=1 checkpoint.async=false checkpoint.keep=0 train.timeout_s=600)
spare=(--spare-hosts h3)
[ "$case_name" = shrink ] && spare=(--min-dp 1)
# shellcheck disable=SC2046  # launcher_env's words are separate arguments
HEAD=(on h4 "$bin" launch --grace-s 10 --heartbeat-timeout-s 6 --restarts 2 "${spare[@]}"
      --restart-log "$work/restarts.jsonl" mpirun $(launcher_env) --host h1:1,h2:1 -np 2 -x OMP_NUM_THREADS)
reference_and_first_steps "${HEAD[@]}"
faulty=("${HEAD[@]}" -x BRT_FAULT_INJECT "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/c" log.metrics_path="$work/faulty.jsonl")
extra=()
rm -f "$work/restarts.jsonl"
case $case_name in
  rank_killed)
    pause_then "kill@step=4@rank=1@attempt=1" true
    injected="SIGKILL to world rank 1 (h2) as step 4 begins"
    limit=20 ;;
  rank_stalled)
    # Rank 0 pauses 5 s as step 5 begins: when the teardown's SIGCONT lets rank 1 go on, the
    # SIGTERM behind it stops the ranks there instead of the run finishing during the teardown.
    pause_then "stop@step=4@rank=1@attempt=1;pause@step=5@rank=0@ms=5000@attempt=1" true
    injected="SIGSTOP to world rank 1 (h2) as step 4 begins, train.timeout_s = 600"
    limit=50 ;;
  host_killed)
    pause_then "pause@step=4@rank=1@ms=1500@attempt=1" cluster_kill_host h2
    injected="every process of h2 killed while world rank 1 pauses as step 4 begins"
    limit=20 ;;
  shrink)
    pause_then "kill@step=4@rank=1@attempt=1" true
    injected="SIGKILL to world rank 1 (h2) as step 4 begins; no spare, --min-dp 1"
    limit=20 ;;
  link_cut)
    pause_then "pause@step=4@rank=1@ms=1500@attempt=1" cluster_cut h2
    injected="h2's link cut while world rank 1 pauses as step 4 begins, train.timeout_s = 600"
    limit=50 ;;
  *) fail "unknown case $case_name" ;;
esac
wait_job 180
if [ "$case_name" = shrink ]; then
  expect_rc 0 "$injected: one restart on h1 alone"
  expect_text fault.log "brt-dist launch: host h2 left out (the fault was there); no spare is left: its 1 rank(s) dropped"
  expect_text fault.log "brt-dist launch: shrinking: 2 -> 1 ranks, 1 data-parallel ranks; train.grad_accum = 2 keeps the global batch of 2 streams"
  expect_text fault.log "brt-dist launch: restart 1 of 2: relaunching (attempt 2) on h1:1"
  grep -q '"excluded":\["h2"\],"hosts":"h1:1"' restarts.jsonl || fail "record: $(cat restarts.jsonl)"
  # shellcheck disable=SC2046  # launcher_env's words are separate arguments
  shrunk_run_is_exact $steps on h4 mpirun $(launcher_env) --host h1:1 -np 1 -x OMP_NUM_THREADS
  total=$(sed -nE 's/.*"fault_to_step_s":([0-9.]+).*/\1/p' restarts.jsonl)
  record "restart(shrink)" "$injected" "0 after one restart on h1:1, train.grad_accum = 2" \
    "$(grep -m1 'shrinking:' fault.log | cut -c1-200)" \
    "fault to first new step $total s; from step $from every loss and the final checkpoint equal a resume at 1 rank by hand; /data/cursor equal to the uninterrupted run's"
  exit 0
fi
expect_rc 0 "$injected: one restart on the spare"
expect_text fault.log "brt-dist launch: attempt 1 failed"
expect_text fault.log "the fault was on host h2"
expect_text fault.log "brt-dist launch: host h2 left out"
expect_text fault.log "spare h3 takes its 1 slot(s)"
expect_text fault.log "brt-dist launch: restart 1 of 2: relaunching (attempt 2) on h1:1,h3:1"
expect_text fault.log "brt-dist launch: attempt 2 trains again"
expect_no_text fault.log "brt-dist heartbeat: "
[ "$(grep -c '"event":"restart"' restarts.jsonl)" = 1 ] || fail "expected one restart record: $(cat restarts.jsonl)"
grep -q '"fault_host":"h2","excluded":\["h2"\],"hosts":"h1:1,h3:1"' restarts.jsonl || fail "record: $(cat restarts.jsonl)"
total=$(sed -nE 's/.*"fault_to_step_s":([0-9.]+).*/\1/p' restarts.jsonl)
awk -v t="$total" -v l="$limit" 'BEGIN { exit !(t <= l) }' || fail "fault to first new step took $total s (bound $limit s)"
same_losses ref.jsonl faulty.jsonl 2
"$bin" ckpt diff "$(ckpt ref $steps)" "$(ckpt c $steps)" > /dev/null || fail "the final checkpoint differs from the uninterrupted run's"
phases=$(sed -nE 's/.*"detect_s":([0-9.]+),"teardown_s":([0-9.]+),"checks_s":([0-9.]+),"load_s":([0-9.]+),"first_step_s":([0-9.]+).*/detect \1, teardown \2, checks \3, load \4, first step \5/p' restarts.jsonl)
record "restart($case_name)" "$injected; mpirun on h4, spare h3" "0 after one restart on h1:1,h3:1" \
  "$(grep -m1 'attempt 2 trains again' fault.log | cut -c1-200)" \
  "fault to first new step $total s ($phases; bound $limit s); every later loss and the final checkpoint bit-identical"
