#!/usr/bin/env bash
# slurm/scaling-study.sbatch and slurm/eval.sbatch on a real one-node Slurm
# (tests/slurm/local_cluster.sh):
#  - a 2-task job array over a 2-row study table (1 rank; all ranks with ZeRO-1): each task
#    must write its own run folder with run.txt, train.log and a metrics JSONL of every step,
#    with the row's layout;
#  - eval.sbatch on a checkpoint folder (2 ranks via srun --mpi=pmix) must pick the newest
#    checkpoint and write a JSON report identical in its totals to a 1-process `brt-dist eval`
#    run outside Slurm.
# Exits 77 (ctest SKIP) when Slurm or munge is not installed or will not start.
# usage: slurm_study_eval.sh BRT_DIST   (run from the repository root; KEEP_WORK=1 keeps files)
source "$(dirname "$0")/../integration/common.sh"
source "$(dirname "$0")/local_cluster.sh"
bin=$(realpath "$1")
unset BRT_OVERRIDES BRT_SRUN_MPI BRT_STUDY_TABLE BRT_STUDY_DIR BRT_CHECKPOINT  # only what we pass
work=$(mktemp -d)
cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    for f in "$work"/*.out "$work"/study/*/train.log; do [ -f "$f" ] && { echo "== $f"; tail -30 "$f"; } >&2; done
  fi
  local_slurm_stop
  if [ -n "${KEEP_WORK:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
start_rc=0
local_slurm_start "$work/cluster" || start_rc=$?
[ "$start_rc" -eq 0 ] || exit 77

# Waits for every job of $1 (an array's tasks too) to leave the queue; then all must be COMPLETED.
wait_done() {
  for _ in $(seq 240); do [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && break; sleep 0.5; done
  [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] || fail "job $1 still queued after 120 s"
  local states
  states=$(scontrol -o show job "$1" | grep -oE "JobState=[A-Z_]+" | sort -u)
  [ "$states" = "JobState=COMPLETED" ] || fail "job $1 ended with $states"
}

# Scaling study: a job array over a 2-row table.
printf '# NAME CONFIG RANKS OVERRIDES\n\nsmall-dp1  configs/tiny.toml  1  %s train.steps=20\nsmall-dp2-zero  configs/tiny.toml  0  %s train.steps=20 train.zero=1\n' \
  "${SMALL[*]}" "${SMALL[*]}" > "$work/table.tsv"
jid=$(BRT_DIST=$bin BRT_STUDY_TABLE=$work/table.tsv BRT_STUDY_DIR=$work/study \
      sbatch --parsable --array=0-1 -N 1 -n 2 --ntasks-per-node=2 -c 1 -o "$work/study-%A_%a.out" \
      slurm/scaling-study.sbatch)
wait_done "$jid"
for row in "small-dp1 1 off" "small-dp2-zero 2 on"; do
  read -r name ranks zero <<< "$row"
  d=$work/study/$name
  [ -f "$d/run.txt" ] && grep -q "^ranks=$ranks$" "$d/run.txt" || fail "$name: run.txt $(cat "$d/run.txt" 2>/dev/null)"
  grep -q "data parallel: $ranks ranks .* ZeRO-1 $zero" "$d/train.log" || fail "$name: wrong layout: $(cat "$d/train.log")"
  [ "$(losses "$d/metrics.jsonl" | wc -l)" -eq 20 ] || fail "$name: expected 20 train events in metrics.jsonl"
  [ "$(losses "$d/metrics.jsonl" | tail -1 | cut -d' ' -f1)" = 20 ] || fail "$name: last step not 20"
done
echo "scaling-study array job $jid: 2 run folders with 20 metric steps each (1 rank; 2 ranks ZeRO-1)"

# Eval: a short run on prepared KJV shards, then eval.sbatch on its checkpoint folder.
command -v bible > /dev/null || { echo "eval part skipped: bible-kjv not installed"; exit 0; }
mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" prepare --kjv --out "$work/data" --vocab 512 --quiet > "$work/prepare.log" 2>&1 ||
  fail "prepare: $(cat "$work/prepare.log")"
"$bin" train configs/tiny.toml "${SMALL[@]}" model.vocab=512 data.source=shards data.path="$work/data" \
  train.steps=4 checkpoint.every=2 checkpoint.dir="$work/ckpt" > "$work/train.log" 2>&1 || fail "train: $(cat "$work/train.log")"
jid=$(BRT_DIST=$bin BRT_SPLIT=validation BRT_EVAL_JSON=$work/slurm-eval.json \
      sbatch --parsable -N 1 -n 2 --ntasks-per-node=2 -c 1 -o "$work/eval-%j.out" slurm/eval.sbatch "$work/ckpt")
wait_done "$jid"
grep -q "evaluating $work/ckpt/ckpt-00000004.h5 on split 'validation' with 2 ranks" "$work/eval-$jid.out" ||
  fail "eval.sbatch did not pick the newest checkpoint: $(cat "$work/eval-$jid.out")"
"$bin" eval --checkpoint "$work/ckpt/ckpt-00000004.h5" --split validation --json "$work/direct.json" --quiet > /dev/null
/usr/bin/python3 - "$work/slurm-eval.json" "$work/direct.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("documents", "tokens", "bytes", "words", "nats", "bits_per_byte", "word_perplexity"):
    assert a[k] == b[k], (k, a[k], b[k])
print(f"eval.sbatch (2 ranks under Slurm) = direct 1-process eval: {a['documents']} documents, "
      f"{a['tokens']} tokens, {a['bits_per_byte']:.4f} bits/byte")
PY
