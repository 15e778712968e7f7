#!/usr/bin/env bash
# checkpoint.init_from (docs/checkpoint-format.md; python/brt_dist save_weights writes such
# files): a fresh start takes exactly the file's weights (its final save at step 0 holds the
# same /model tensors bit for bit) with a fresh optimizer and data cursor; a resumed run keeps
# its own weights; a missing file, other shapes or another tokenizer are errors naming them.
source "$(dirname "$0")/common.sh"
bin=$(realpath "$1")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
args=(configs/tiny.toml "${SMALL[@]}" log.metrics_path=)
"$bin" train "${args[@]}" train.steps=4 checkpoint.dir="$work/a" > "$work/a.log" 2>&1 || fail "train a: $(tail -3 "$work/a.log")"
src="$work/a/ckpt-00000004.h5"
"$bin" train "${args[@]}" train.steps=0 optim.total_steps=10 checkpoint.dir="$work/b" checkpoint.init_from="$src" > "$work/b.log" 2>&1 ||
  fail "init_from: $(tail -3 "$work/b.log")"
grep -q "checkpoint.init_from: the weights of $src (a fresh optimizer, data from the start)" "$work/b.log" ||
  fail "no init_from line: $(cat "$work/b.log")"
out="$work/b/ckpt-00000000.h5"
h5diff "$src" "$out" /model /model > "$work/diff.txt" 2>&1 || fail "weights differ from $src: $(head -5 "$work/diff.txt")"
/usr/bin/python3 - "$out" <<'PY' || fail "the init_from start is not fresh"
import h5py, sys
with h5py.File(sys.argv[1], "r") as f:
    assert int(f.attrs["step"]) == 0, f.attrs["step"]
    assert int(f.attrs["tokens_seen"]) == 0, f.attrs["tokens_seen"]
PY
# Training on from them: the first step's loss is the loss of the source's weights on the first
# batch, the same whether the weights come from the checkpoint or the step-0 copy.
"$bin" train "${args[@]}" train.steps=1 checkpoint.init_from="$src" log.metrics_path="$work/c1.jsonl" > "$work/c1.log" 2>&1 ||
  fail "train from $src: $(tail -3 "$work/c1.log")"
"$bin" train "${args[@]}" train.steps=1 checkpoint.init_from="$out" log.metrics_path="$work/c2.jsonl" > "$work/c2.log" 2>&1 ||
  fail "train from $out: $(tail -3 "$work/c2.log")"
[ "$(losses "$work/c1.jsonl")" = "$(losses "$work/c2.jsonl")" ] || fail "first-step losses differ: $(losses "$work/c1.jsonl") vs $(losses "$work/c2.jsonl")"
"$bin" train "${args[@]}" train.steps=1 log.metrics_path="$work/fresh.jsonl" > /dev/null 2>&1 || fail "fresh run"
[ "$(losses "$work/c1.jsonl")" != "$(losses "$work/fresh.jsonl")" ] || fail "init_from changed nothing"
# A resumed run keeps its own weights: init_from is not applied over them.
"$bin" train "${args[@]}" train.steps=6 checkpoint.dir="$work/a" checkpoint.init_from="$out" > "$work/r.log" 2>&1 ||
  fail "resume: $(tail -3 "$work/r.log")"
grep -q "resumed from $src" "$work/r.log" || fail "did not resume: $(cat "$work/r.log")"
! grep -q "checkpoint.init_from:" "$work/r.log" || fail "init_from applied over a resumed run"
# Errors name the file, the tensor or the tokenizer.
expect_error() {  # expect_error NAME TEXT ARGS...
  local name=$1 text=$2; shift 2
  if "$bin" train "${args[@]}" train.steps=1 "$@" > "$work/$name.log" 2>&1; then fail "$name: exit 0"; fi
  grep -qF -- "$text" "$work/$name.log" || fail "$name: no '$text' in: $(cat "$work/$name.log")"
}
expect_error missing "$work/none.h5" checkpoint.init_from="$work/none.h5"
expect_error shapes "embed" checkpoint.init_from="$src" model.d_model=48 model.heads=3
"$bin" prepare --kjv --out "$work/kjv" --vocab 64 --quiet > /dev/null 2>&1 && {
  expect_error tokenizer "tokenizer_hash" checkpoint.init_from="$src" data.source=shards data.path="$work/kjv"
}
echo "init_from: the file's weights exactly, fresh optimizer and cursor; resume wins; errors named"
