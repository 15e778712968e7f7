#!/usr/bin/env bash
# Context parallelism through `brt-dist` (docs/parallelism.md, "Context parallelism"), 4 global
# streams in every layout:
#  1. `train --cp`: the loss curve of (ranks, CP) = (2, 2), (4, 4), (4, 2) = DP 2 x CP 2 and
#     (4, 2) with --tp 2 = CP 2 x TP 2 follows one process's, step by step (relative <= 1e-5),
#     for bst:sh:s4d and slide;
#  2. checkpoints do not depend on CP: saved at CP 2 (step 4), resumed at CP 1 and CP 4, steps
#     5-8 follow the uninterrupted CP 2 run (<= 1e-5) and the final checkpoints agree
#     (ckpt diff --rtol 1e-5; the data cursor exactly);
#  3. `eval --cp 2` reports one process's documents and tokens exactly and its nats within 1e-5
#     (a word corpus prepared here);
#  4. refusals before any work (exit 2): a recurrent variant, a CP that does not divide the ranks,
#     a segment that does not split into whole blocks; `eval --task --cp` and `eval --task mqar --cp` are refused.
# usage: cli_cp.sh MPIEXEC BRT_DIST   (run from the source tree: configs/tiny.toml)
source "$(dirname "$0")/../../integration/common.sh"
mpiexec=$1 bin=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mpi=("$mpiexec" --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS=1)
train() {  # train NAME RANKS CP BATCH VARIANT [more args]
  local name=$1 ranks=$2 cp=$3 batch=$4 variant=$5; shift 5
  "${mpi[@]}" -np "$ranks" "$bin" train configs/tiny.toml "${SMALL[@]}" model.variant="$variant" \
    train.batch="$batch" train.steps=8 --cp "$cp" log.metrics_path="$work/$name.jsonl" "$@" \
    > "$work/$name.log" 2>&1 || fail "$name: $(tail -20 "$work/$name.log")"
}
# compare NAME REF FIRST_STEP COUNT: relative loss differences of NAME's steps against REF's.
compare() {
  awk -v name="$1" -v first="$3" -v count="$4" 'NR == FNR { want[$1] = $2; next }
    $1 >= first { seen++; d = ($2 - want[$1]) / want[$1]; if (d < 0) d = -d; if (d > worst) worst = d
      if (!($1 in want) || d > 1e-5) { print name ": step " $1 " loss " $2 " vs " want[$1]; bad = 1 } }
    END { if (seen != count) { print name ": " seen " steps, expected " count; bad = 1 }
          printf "%s: worst loss rel. diff %.2e over %d steps\n", name, worst, seen; exit bad }' \
    <(losses "$work/$2.jsonl") <(losses "$work/$1.jsonl")
}

# 1. The loss curve under CP.
for variant in bst:sh:s4d slide; do
  v=${variant//:/_}
  train "$v-ref" 1 1 4 "$variant"
  train "$v-cp2" 2 2 4 "$variant"
  grep -q "context parallel: 2 ranks per segment; each runs N/CP = 16 tokens (2 blocks)" "$work/$v-cp2.log" ||
    fail "no context-parallel start-up line: $(head -12 "$work/$v-cp2.log")"
  train "$v-cp4" 4 4 4 "$variant"
  train "$v-dp2cp2" 4 2 2 "$variant"
  train "$v-cp2tp2" 4 2 4 "$variant" --tp 2
  for layout in cp2 cp4 dp2cp2 cp2tp2; do compare "$v-$layout" "$v-ref" 1 8 || fail "$v $layout leaves one process's curve"; done
done

# 2. A checkpoint saved at CP 2 resumes at CP 1 and CP 4 on the same curve.
train ck-ref 2 2 4 bst:sh:s4d checkpoint.dir="$work/ck-ref" checkpoint.every=4 checkpoint.keep=0
[ -f "$work/ck-ref/ckpt-00000004.h5" ] || fail "no checkpoint at step 4: $(tail -5 "$work/ck-ref.log")"
for layout in "1 1" "4 4"; do
  set -- $layout
  name="ck-cp$2"
  mkdir -p "$work/$name"
  cp "$work/ck-ref/ckpt-00000004.h5" "$work/$name/"
  train "$name" "$1" "$2" 4 bst:sh:s4d checkpoint.dir="$work/$name" checkpoint.every=4 checkpoint.keep=0 \
    --resume "$work/$name"
  grep -q "resumed from $work/$name/ckpt-00000004.h5 at step 4" "$work/$name.log" ||
    fail "$name did not resume: $(tail -5 "$work/$name.log")"
  compare "$name" ck-ref 5 4 || fail "$name leaves the uninterrupted CP 2 curve"
  "$bin" ckpt diff "$work/ck-ref/ckpt-00000008.h5" "$work/$name/ckpt-00000008.h5" --rtol 1e-5 \
    > "$work/$name.diff" || fail "$name: final checkpoint differs: $(grep -v '^identical' "$work/$name.diff")"
  echo "$name: $(tail -1 "$work/$name.diff")"
done

# 3. eval under CP: one process's totals.
word_corpus "$work/corpus" 5 6 3 60
"$bin" prepare --corpus "$work/corpus" --out "$work/data" --vocab 512 --quiet > "$work/prepare.log" 2>&1 ||
  fail "prepare: $(cat "$work/prepare.log")"
train ev 2 2 4 bst:sh:s4d model.vocab=512 data.source=shards data.path="$work/data" checkpoint.dir="$work/ev" checkpoint.every=8
ckpt="$work/ev/ckpt-00000008.h5"
"$bin" eval --checkpoint "$ckpt" --split validation --json "$work/e1.json" --quiet > "$work/e1.txt" 2>&1 ||
  fail "eval: $(cat "$work/e1.txt")"
"${mpi[@]}" -np 2 "$bin" eval --checkpoint "$ckpt" --split validation --cp 2 --json "$work/e2.json" --quiet \
  > "$work/e2.txt" 2>&1 || fail "eval --cp 2: $(cat "$work/e2.txt")"
/usr/bin/python3 - "$work/e1.json" "$work/e2.json" <<'PY' || fail "eval totals differ under --cp 2"
import json, sys
ref, got = (json.load(open(p)) for p in sys.argv[1:])
for k in ("documents", "tokens", "bytes", "words"):
    assert got[k] == ref[k], (k, got[k], ref[k])
rel = abs(got["nats"] - ref["nats"]) / ref["nats"]
assert rel <= 1e-5, ("nats", got["nats"], ref["nats"])
for a, b in zip(got["position_buckets"], ref["position_buckets"]):
    assert a["tokens"] == b["tokens"], (a, b)
print(f"eval --cp 2: {ref['documents']} documents, {ref['tokens']} tokens as one process; nats rel. diff {rel:.2e}")
PY

# 4. Refusals, before any work.
refused() {  # refused NAME TEXT COMMAND...
  local name=$1 text=$2; shift 2
  set +e
  "$@" > "$work/$name.out" 2>&1
  local rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$name: exit $rc, expected 2: $(tail -5 "$work/$name.out")"
  grep -qF -- "$text" "$work/$name.out" || fail "$name: no '$text' in: $(head -5 "$work/$name.out")"
}
refused recurrent "the recurrent state is updated block after block" \
  "${mpi[@]}" -np 2 "$bin" train configs/tiny.toml "${SMALL[@]}" train.steps=1 --cp 2
refused ranks "--cp 2 does not fit: 3 ranks" \
  "${mpi[@]}" -np 3 "$bin" train configs/tiny.toml "${SMALL[@]}" model.variant=slide train.steps=1 --cp 2
refused blocks "is not a multiple of cp × model.window" \
  "${mpi[@]}" -np 2 "$bin" train configs/tiny.toml "${SMALL[@]}" model.variant=slide model.window=32 train.steps=1 --cp 2
refused task "eval --task scores one answer per document" \
  "$bin" eval --checkpoint "$ckpt" --task passkey --cp 2
refused mqar "eval --task mqar: run it without --cp (train.cp = 2)" \
  "$bin" eval --checkpoint "$ckpt" --task mqar --cp 2
echo "cli_cp: train, resume across CP sizes, eval and refusals under --cp"
