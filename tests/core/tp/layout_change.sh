#!/usr/bin/env bash
# Layout-independent checkpoints (docs/parallelism.md "Tensor parallelism"): a run
# saved at (ranks 4, TP 2) = DP 2 x TP 2 resumes at (ranks 1, TP 1), (2, 2) and (2, 1) — 4 global
# streams each — and continues the uninterrupted run's loss curve (relative <= 1e-5); re-saved at
# the end, every tensor equals the uninterrupted run's final checkpoint within fp32
# reduction-order tolerance (ckpt diff --rtol 1e-5; integer tensors such as the data cursor
# exactly), and the bit-identical ones are listed. Adafactor with every matrix factored
# (min_dim_to_factor = 8), so R / C split or whole per axis go through the checkpoint too.
# usage: layout_change.sh MPIEXEC BRT_DIST   (run from the source tree: configs/tiny.toml)
source "$(dirname "$0")/../../integration/common.sh"
mpiexec=$1 bin=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# 4 global streams in every layout: train.batch is per DP rank.
args=(configs/tiny.toml "${SMALL[@]}" model.variant=rec:lstm:dual optim.min_dim_to_factor=8
      train.steps=8 checkpoint.every=4 checkpoint.keep=0)
run() {  # run RANKS TP BATCH NAME [more args]
  local ranks=$1 tp=$2 batch=$3 name=$4; shift 4
  "$mpiexec" --allow-run-as-root --oversubscribe -np "$ranks" -x OMP_NUM_THREADS=1 \
    "$bin" train "${args[@]}" --tp "$tp" train.batch="$batch" log.metrics_path="$work/$name.jsonl" "$@" \
    > "$work/$name.log" 2>&1 || fail "$name: $(tail -20 "$work/$name.log")"
}
run 4 2 2 ref checkpoint.dir="$work/ref"
[ -f "$work/ref/ckpt-00000004.h5" ] && [ -f "$work/ref/ckpt-00000008.h5" ] || fail "no checkpoints in $work/ref"
# The uninterrupted curve's steps 5-8 against a resumed one's: relative <= 1e-5 each.
compare_losses() {
  awk -v name="$1" 'NR == FNR { if ($1 > 4) want[$1] = $2; next }
    { seen++; d = ($2 - want[$1]) / want[$1]; if (d < 0) d = -d; if (d > worst) worst = d
      if (!($1 in want) || d > 1e-5) { print name ": step " $1 " loss " $2 " vs " want[$1]; bad = 1 } }
    END { if (seen != 4) { print name ": " seen " resumed steps, expected 4"; bad = 1 }
          printf "%s: steps 5-8 worst loss rel. diff %.2e\n", name, worst; exit bad }' \
    <(losses "$work/ref.jsonl") <(losses "$work/$1.jsonl")
}
for layout in "1 1 4" "2 2 4" "2 1 2"; do
  set -- $layout
  name="r$1_tp$2"
  mkdir -p "$work/$name"
  cp "$work/ref/ckpt-00000004.h5" "$work/$name/"
  run "$1" "$2" "$3" "$name" --resume "$work/$name"
  grep -q "resumed from $work/$name/ckpt-00000004.h5 at step 4" "$work/$name.log" ||
    fail "$name did not resume: $(cat "$work/$name.log")"
  compare_losses "$name" || fail "$name: losses leave the uninterrupted curve"
  "$bin" ckpt diff "$work/ref/ckpt-00000008.h5" "$work/$name/ckpt-00000008.h5" --rtol 1e-5 \
    > "$work/$name.diff" || fail "$name: final checkpoint differs: $(grep -v '^identical' "$work/$name.diff")"
  worst=$(sed -nE 's/^close: .* \(rel (.*)\)$/\1/p' "$work/$name.diff" | sort -g | tail -1)
  echo "$name: $(tail -1 "$work/$name.diff"); worst tensor rel. diff ${worst:-0}; bit-identical: $(grep '^identical' "$work/$name.diff" |
    sed 's/identical: //' | tr '\n' ' ')"
done
echo "layout_change: (4 ranks, TP 2) checkpoint resumed at (1, 1), (2, 2), (2, 1) on the same curve"
