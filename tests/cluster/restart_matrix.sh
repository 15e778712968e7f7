#!/usr/bin/env bash
# The in-job restart's fault matrix (docs/reliability.md "In-job restart"): N injections of one
# fault on h2 at random points — while world rank 0 pauses 3 s as a random step begins, or inside a
# random background checkpoint save (writing its data cursor) — each on a fresh four-host cluster (supervisor and mpirun on h4, ranks on h1 and h2,
# spare h3; train.timeout_s = 600, --heartbeat-timeout-s 6, an asynchronous save per step).
# Each run must finish (exit 0) with every loss and the final checkpoint of the uninterrupted
# run (no sample skipped or repeated), resume from the newest checkpoint saved before the fault
# (no good checkpoint lost), h2 never in the next host list; slow_link must restart nothing.
# Prints one MATRIX line per injection and the fault's p50/p95/max seconds to the first new step.
#   restart_matrix.sh BRT_DIST FAULT [N]   FAULT: rank_killed host_killed link_cut rank_stalled slow_link
#   BRT_MATRIX_SEED picks the points (printed).
source "$(dirname "$0")/lib.sh"
fault=$2
count=${3:-10}
seed=${BRT_MATRIX_SEED:-$(( $(date +%s) % 100000 ))}
RANDOM=$seed
echo "matrix: $fault x $count, BRT_MATRIX_SEED=$seed"
steps=10
args=(train.steps=$steps checkpoint.every=1 checkpoint.keep=0 train.timeout_s=600)
keep=$(mktemp -d /var/tmp/brt-matrix-XXXXXX)
trap 'status=$?; rm -rf "$keep"; (exit $status); cluster_test_cleanup' EXIT
head_command() {
  # shellcheck disable=SC2046  # launcher_env's words are separate arguments
  HEAD=(on h4 "$bin" launch --grace-s 10 --heartbeat-timeout-s 6 --restarts 2 --spare-hosts h3
        --restart-log "$work/restarts.jsonl" mpirun $(launcher_env) --host h1:1,h2:1 -np 2 -x OMP_NUM_THREADS)
}
# The PID of the rank (brt-dist train) on HOST: not its abort helper, a brt-dist child of it
# (parallel/health/abort_fallback.h).
rank_pid_on() {
  local pid
  for pid in $(job_procs "$1" | awk '$3 ~ /brt-dist$/ && $4 == "train" { print $2 }'); do
    [ "$(ps -o comm= -p "$(ps -o ppid= -p "$pid" | tr -d ' ')")" = brt-dist ] && continue
    echo "$pid"
    return 0
  done
  fail "no rank on $1: $(job_procs "$1")"
}
times=()
for i in $(seq "$count"); do
  cluster_up --hosts 4 --shared-mb 256
  head_command
  if [ "$i" = 1 ]; then  # the uninterrupted run, once: kept outside the clusters
    run ref.log 180 "${HEAD[@]}" "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/ref" log.metrics_path="$work/ref.jsonl"
    expect_rc 0 "reference run"
    cp ref.jsonl "$(ckpt ref $steps)" "$keep/"
  fi
  cp "$keep/ref.jsonl" "$work/"
  mkdir -p "$work/ref" && cp "$keep/$(basename "$(ckpt ref $steps)")" "$work/ref/"
  step=$((3 + RANDOM % 5))
  where="step=$step"
  [ $((RANDOM % 2)) = 1 ] && where="checkpoint save: writing /data/cursor@nth=$step"
  faulty=("${HEAD[@]}" -x BRT_FAULT_INJECT "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/c" log.metrics_path="$work/faulty.jsonl")
  extra=()
  case $fault in
    rank_killed) act() { kill -KILL "$(rank_pid_on h2)"; } ;;
    rank_stalled) act() { kill -STOP "$(rank_pid_on h2)"; } ;;
    host_killed) act() { cluster_kill_host h2; } ;;
    link_cut) act() { cluster_cut h2; } ;;
    slow_link) act() { cluster_slow h2 2mbit || fail "tc could not shape h2's link"; } ;;
    *) fail "unknown fault $fault" ;;
  esac
  pause_then "pause@$where@rank=0@ms=3000@attempt=1" act
  wait_job 240
  expect_rc 0 "$fault at $where (injection $i)"
  same_losses ref.jsonl faulty.jsonl 0
  "$bin" ckpt diff "$(ckpt ref $steps)" "$(ckpt c $steps)" > /dev/null || fail "injection $i: the final checkpoint differs"
  if [ "$fault" = slow_link ]; then
    expect_no_text fault.log "failed"
    [ ! -s restarts.jsonl ] || fail "injection $i: a slow link restarted the job: $(cat restarts.jsonl)"
    echo "MATRIX $fault $i at $where: no restart, exact"
    cd / && cluster_stop
    continue
  fi
  if grep -q "nothing to train: the run is at step $steps" fault.log; then
    # The fault landed after the last step (the pause's line reached the log late): the relaunch
    # found the run complete.
    echo "MATRIX $fault $i at $where: landed after the run's last step; the relaunch had nothing to train, exact"
    cd / && cluster_stop
    continue
  fi
  if ! grep -q "brt-dist launch: attempt 1 failed" fault.log; then
    # The silent rank was ended after the ranks' last step: the job finished while being ended
    # (SIGCONT and SIGTERM let it complete), exact, with nothing to restart.
    expect_text fault.log "has sent no heartbeat"
    echo "MATRIX $fault $i at $where: the job finished while it was being ended; no restart needed, exact"
    cd / && cluster_stop
    continue
  fi
  # The newest checkpoint saved before the fault is the one resumed: none lost.
  saved=$(sed -n '/fault injection: /q; s/^checkpoint saved: .*ckpt-0*\([0-9][0-9]*\)\.h5.*/\1/p' fault.log | tail -1)
  resumed=$(sed -nE 's/.*attempt 2 trains again: resumed at step ([0-9]+),.*/\1/p' fault.log)
  [ -n "$resumed" ] || fail "injection $i: no restart line"
  [ "$resumed" -ge "${saved:-0}" ] || fail "injection $i: resumed at $resumed, but ckpt-$saved was saved before the fault"
  grep -q '"hosts":"h1:1,h3:1"' restarts.jsonl || fail "injection $i: h2 in the next list: $(cat restarts.jsonl)"
  total=$(sed -nE 's/.*"fault_to_step_s":([0-9.]+).*/\1/p' restarts.jsonl)
  times+=("$total")
  echo "MATRIX $fault $i at $where: saved before $saved, resumed at $resumed, fault to first new step $total s"
  cd / && cluster_stop
done
if [ ${#times[@]} -gt 0 ]; then
  printf '%s\n' "${times[@]}" | sort -n | awk -v f="$fault" '{ t[NR] = $1 } END {
    p95 = t[int(0.95 * NR + 0.999)]; if (p95 == "") p95 = t[NR]
    printf "MATRIX %s: %d injections, fault to first new step p50 %.1f s, p95 %.1f s, max %.1f s\n", f, NR, t[int((NR + 1) / 2)], p95, t[NR] }'
fi
