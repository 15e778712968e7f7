#!/usr/bin/env bash
# Exact resume: train 2k steps straight, saving at k; a new process resumes from the
# step-k checkpoint and trains k more. Losses and every tensor of the final checkpoints
# (weights, optimizer state, carried caches/states, data cursor) must be bit-identical.
# Synthetic documents are 2N..6N tokens, so step k falls in the middle of documents.
source "$(dirname "$0")/common.sh"
bin=$1 variant=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
args=(configs/tiny.toml "${SMALL[@]}" model.variant=$variant train.steps=8 checkpoint.every=4 checkpoint.keep=0)
"$bin" train "${args[@]}" checkpoint.dir="$work/a" log.metrics_path="$work/a.jsonl" > "$work/a.log"
mkdir -p "$work/b"
cp "$work/a/ckpt-00000004.h5" "$work/b/"
"$bin" train "${args[@]}" --resume "$work/b" log.metrics_path="$work/b.jsonl" > "$work/b.log"
grep -q "resumed from $work/b/ckpt-00000004.h5 at step 4" "$work/b.log" || fail "did not resume: $(cat "$work/b.log")"
diff <(losses "$work/a.jsonl" | awk '$1 > 4') <(losses "$work/b.jsonl") || fail "losses differ after resume"
[ "$(losses "$work/b.jsonl" | wc -l)" -eq 4 ] || fail "expected 4 resumed steps"
"$bin" ckpt diff "$work/a/ckpt-00000008.h5" "$work/b/ckpt-00000008.h5" || fail "final checkpoints differ"
echo "resume_exact $variant: losses of steps 5-8 and all tensors of the final checkpoint identical"
