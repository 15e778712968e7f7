#!/usr/bin/env bash
# Resume after preemption under plain mpirun, no Slurm: start a 2-rank data-parallel
# run in the background, send SIGUSR1 to mpirun mid-run (Open MPI 4.1's mpirun forwards
# SIGUSR1/SIGUSR2 to every rank and prints "Forwarding signal 10 to job"), and check that
#  - the ranks saved a checkpoint at the step they stopped at, well before the end, and it
#    verifies;
#  - a rerun with --resume DIR resumed from exactly that checkpoint, trained only the missing
#    steps and finished.
# usage: preempt_mpirun.sh BRT_DIST [NP]
source "$(dirname "$0")/../integration/common.sh"
bin=$(realpath "$1") np=${2:-2}
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed"; exit 77; }
work=$(mktemp -d)
run_pid=""
cleanup() { [ -n "$run_pid" ] && kill "$run_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

steps=1500 every=1000
args=(configs/tiny.toml "${SMALL[@]}" train.steps="$steps" log.every=50 checkpoint.every="$every"
      checkpoint.keep=0 log.metrics_path="$work/metrics.jsonl")

mpirun --oversubscribe -np "$np" "$bin" train "${args[@]}" checkpoint.dir="$work/ckpt" > "$work/first.log" 2>&1 &
run_pid=$!
# Signal once training is under way (the handler is installed before the first step).
for _ in $(seq 300); do
  grep -q '"step":50,' "$work/metrics.jsonl" 2>/dev/null && break
  kill -0 "$run_pid" 2>/dev/null || fail "run ended before it was signalled: $(cat "$work/first.log")"
  sleep 0.1
done
grep -q '"step":50,' "$work/metrics.jsonl" || fail "no step 50 within 30 s: $(cat "$work/first.log")"
kill -USR1 "$run_pid"
status=0
wait "$run_pid" || status=$?
# 75: stopped by the signal before the last step (brt-dist's "requeue me" status).
[ "$status" -eq 75 ] || fail "mpirun exited with status $status after SIGUSR1 (expected 75): $(cat "$work/first.log")"
run_pid=""

stop_line=$(grep -E "stopping cleanly after step [0-9]+ \(signal 10\)" "$work/first.log") ||
  fail "no clean stop on SIGUSR1: $(cat "$work/first.log")"
stop_step=$(sed -E 's/.*after step ([0-9]+).*/\1/' <<< "$stop_line")
[ "$stop_step" -lt "$steps" ] || fail "stopped at step $stop_step, not before the end ($steps)"
ckpt=$(printf '%s/ckpt/ckpt-%08d.h5' "$work" "$stop_step")
[ -f "$ckpt" ] || fail "no checkpoint for step $stop_step: $(ls "$work/ckpt")"
"$bin" ckpt verify "$ckpt" > /dev/null || fail "checkpoint $ckpt does not verify"
echo "stopped at step $stop_step of $steps on SIGUSR1; saved $(basename "$ckpt")"

mpirun --oversubscribe -np "$np" "$bin" train "${args[@]}" --resume "$work/ckpt" > "$work/second.log" 2>&1 ||
  fail "resumed run failed: $(tail -20 "$work/second.log")"
grep -q "resumed from $ckpt at step $stop_step" "$work/second.log" ||
  fail "did not resume from $ckpt: $(head -20 "$work/second.log")"
first_resumed=$(losses "$work/metrics.jsonl" | awk -v s="$stop_step" '$1 > s' | head -1 | cut -d' ' -f1)
[ "$first_resumed" -le "$((stop_step + 50))" ] || fail "first step after resume is $first_resumed"
grep -q "step *$steps/$steps" "$work/second.log" || fail "resumed run did not reach step $steps"
[ -f "$(printf '%s/ckpt/ckpt-%08d.h5' "$work" "$steps")" ] || fail "no final checkpoint"
echo "preempt_mpirun (np=$np): resumed at step $stop_step and finished $steps steps"
