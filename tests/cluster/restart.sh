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
    pause_then "stop@step=4@rank=1@attempt=1" true
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
  from=$(sed -nE 's/.*attempt 2 trains again: resumed at step ([0-9]+),.*/\1/p' fault.log)
  [ -n "$from" ] || fail "no resume step in fault.log"
  # The same checkpoint resumed by hand at the smaller size: the losses and final checkpoint.
  run small.log 120 on h4 mpirun $(launcher_env) --host h1:1 -np 1 -x OMP_NUM_THREADS "${TRAIN[@]}" "${args[@]}" \
    train.grad_accum=2 --resume "$(ckpt c "$from")" checkpoint.dir="$work/small" log.metrics_path="$work/small.jsonl"
  expect_rc 0 "the hand-made resume at the smaller size"
  # The relaunch's steps (the first attempt logged up to step $from in the same file).
  grep '"event":"train"' faulty.jsonl | while read -r line; do
    [ "$(echo "$line" | sed -E 's/.*"step":([0-9]+).*/\1/')" -gt "$from" ] && echo "$line"
  done > relaunch.jsonl
  same_losses small.jsonl relaunch.jsonl "$from"
  "$bin" ckpt diff "$(ckpt small $steps)" "$(ckpt c $steps)" > /dev/null || fail "the final checkpoint differs from the hand-made resume's"
  # No sample skipped or repeated: the data cursor of every global stream (and the batches the
  # step guard skips) equal the uninterrupted run's; the guard's loss windows differ with the sums.
  "$bin" ckpt diff "$(ckpt ref $steps)" "$(ckpt c $steps)" > cursors.txt
  ! grep -qE '^differs: /data/(cursor|skip_batches)' cursors.txt ||
    fail "the data cursors differ from the uninterrupted run's: $(grep /data/ cursors.txt | head -3)"
  "$bin" ckpt inspect "$(ckpt c $steps)" > inspect.txt  # a file: grep -q would cut the pipe (pipefail)
  grep -q '/data/cursor' inspect.txt || fail "no /data/cursor in the checkpoint"
  grep -q '^differs: /model/' cursors.txt || fail "expected the weights to differ (another summation order): $(head -5 cursors.txt)"
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
