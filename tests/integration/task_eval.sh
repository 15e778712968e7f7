#!/usr/bin/env bash
# Long-range tasks wired into brt-dist (docs/evaluation.md, "Long-range tasks"; docs/data-format.md,
# "Task documents"):
#  - training with data.tasks.rate > 0 mixes task documents into the streams (the start-up line
#    describes the mixture, the losses differ from a run without it) and resumes bit-exactly:
#    2k steps straight = k steps + resume k (losses and every tensor of the final checkpoint);
#    a resume under another mixture is refused naming both;
#  - `eval --task passkey --json` writes the documented fields, n = samples in every cell, and
#    mpirun -np 2 reports the identical cells (and ablations); bad flags exit 2 naming the flag;
#  - tools/task_heatmap.py draws the real JSON.
source "$(dirname "$0")/common.sh"
bin=$(realpath "$1")
src=$PWD
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
word_corpus corpus 5 2 2 150
"$bin" prepare --corpus corpus --out data --vocab 320 --quiet > prepare.log 2>&1 || fail "prepare: $(tail -3 prepare.log)"

# The keys' rules between keys: exit 2, the key named.
for bad in data.tasks.rate=1.5 data.tasks.kinds=passkey,x data.tasks.max_distance=50 "data.tasks.rate=0.1 data.source=synthetic"; do
  set +e; "$bin" config show "$src/configs/tiny.toml" $bad > bad.log 2>&1; rc=$?; set -e
  [ "$rc" -eq 2 ] && grep -q "${bad%%=*}" bad.log || fail "config $bad: exit $rc: $(cat bad.log)"
done

# Short task documents (the tiny model reads 32 tokens a step), so some begin within 8 steps.
tasks=(data.tasks.rate=0.5 data.tasks.min_distance=8 data.tasks.max_distance=48 data.tasks.max_prefix=16)
args=("$src/configs/tiny.toml" "${SMALL[@]}" model.vocab=320 data.source=shards data.path=data train.steps=8
      checkpoint.every=4 checkpoint.keep=0)
"$bin" train "${args[@]}" "${tasks[@]}" checkpoint.dir=a log.metrics_path=a.jsonl > a.log 2>&1 || fail "train: $(tail -3 a.log)"
grep -q "^data: shards train .*; tasks: 50% of documents, passkey/needle/facts, distance 8-48 tokens" a.log ||
  fail "no task mixture in the start-up lines: $(grep '^data' a.log)"
"$bin" train "${args[@]}" checkpoint.dir=plain log.metrics_path=plain.jsonl > plain.log 2>&1 || fail "train without tasks"
! diff -q <(losses a.jsonl) <(losses plain.jsonl) > /dev/null || fail "data.tasks.rate=0.5 changed no loss"
mkdir b && cp a/ckpt-00000004.h5 b/
"$bin" train "${args[@]}" "${tasks[@]}" --resume b log.metrics_path=b.jsonl > b.log 2>&1 || fail "resume: $(tail -3 b.log)"
grep -q "resumed from b/ckpt-00000004.h5 at step 4" b.log || fail "did not resume: $(tail -5 b.log)"
diff <(losses a.jsonl | awk '$1 > 4') <(losses b.jsonl) || fail "losses differ after resume with task documents"
[ "$(losses b.jsonl | wc -l)" -eq 4 ] || fail "expected 4 resumed steps"
"$bin" ckpt diff a/ckpt-00000008.h5 b/ckpt-00000008.h5 > diff.log || fail "final checkpoints differ: $(cat diff.log)"
mkdir c && cp a/ckpt-00000004.h5 c/
if "$bin" train "${args[@]}" data.tasks.rate=0.25 --resume c log.metrics_path= > c.log 2>&1; then
  fail "resumed under another task mixture"
fi
grep -q "task mixture" c.log || fail "the refusal does not name the mixture: $(tail -3 c.log)"

# eval --task: the documented JSON, the same cells on two ranks.
ckpt=plain/ckpt-00000008.h5
grid=(--task passkey --lengths 128,192 --depths 0,0.5,1 --samples 3 --ablate --quiet)
"$bin" eval --checkpoint "$ckpt" "${grid[@]}" --json one.json > one.log 2>&1 || fail "eval --task: $(tail -3 one.log)"
grep -q "^eval --task passkey" one.log || fail "no task report: $(cat one.log)"
mpirun -np 2 --oversubscribe "$bin" eval --checkpoint "$ckpt" "${grid[@]}" --batch 1 --json two.json > two.log 2>&1 ||
  fail "eval --task under mpirun -np 2: $(tail -3 two.log)"
/usr/bin/python3 - one.json two.json "$src/tests/integration" <<'PY' || fail "eval --task JSON"
import json, math, sys
one, two = (json.load(open(p)) for p in sys.argv[1:3])
top = ["task", "digits", "facts", "supporting_facts", "split", "checkpoint", "seed", "samples_per_cell", "seq_len",
       "window", "trained_seq_len", "cells", "accuracy", "answer_nats", "ablations"]
assert list(one) == top, list(one)
assert one["task"] == "passkey" and one["samples_per_cell"] == 3 and one["seq_len"] == 32 and one["window"] == 8
cells = one["cells"]
assert [(c["length"], c["depth"]) for c in cells] == [(l, d) for l in (128, 192) for d in (0, 0.5, 1)], cells
for c in cells:
    assert list(c) == ["length", "depth", "distance_tokens", "distance_windows", "accuracy", "answer_nats", "n"], c
    assert c["n"] == 3 and 0 <= c["accuracy"] <= 1 and math.isfinite(c["answer_nats"]) and c["answer_nats"] > 0, c
    assert c["distance_windows"] == c["distance_tokens"] / 8, c
assert cells[0]["distance_tokens"] > cells[1]["distance_tokens"] > cells[2]["distance_tokens"], cells
assert abs(one["answer_nats"] - sum(c["answer_nats"] for c in cells) / len(cells)) < 1e-12
assert [a["mode"] for a in one["ablations"]] == ["segment", "block"] and all(a["applies"] for a in one["ablations"])
assert all(a["cells"] != cells for a in one["ablations"]), "an ablation changed nothing"
# One process (eval's default batch) and two ranks (batch 1 each) run the same documents through
# fp32 GEMMs of other shapes, so OpenBLAS may sum each logit in another order (docs/reliability.md
# "Numerics"; which order depends on the core). Contract: every count, length, depth and distance
# exact; nats within 1e-4 relative — each fp32 dot product of K <= 64 terms (D 32, F 64) moves by
# <= K u sum|w x| (u = 2^-24: ~4e-6 of its magnitude) through two layers, and a log-softmax mean
# inherits that;
# accuracy exact unless an answer's argmax is within that margin of a tie (then at most 1/n).
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, sys.argv[3])
from same_report import same
worst = [same(one, two, 1e-4, 1.0 / 3)]
print("eval --task: %d cells, accuracy %.3f, answer %.4f nats (block ablation %.4f); -np 2 the same cells, "
      "nats within %.2g relative (fp32 GEMMs of other shapes)" % (
    len(cells), one["accuracy"], one["answer_nats"], one["ablations"][1]["answer_nats"], worst[0]))
PY

# Usage errors: exit 2, the flag named.
expect_usage() {  # FLAG ARGS...
  local flag=$1; shift
  set +e; "$bin" eval --checkpoint "$ckpt" --quiet "$@" > bad.log 2>&1; local rc=$?; set -e
  [ "$rc" -eq 2 ] || fail "eval $* exited $rc, not 2: $(cat bad.log)"
  grep -q -- "$flag" bad.log || fail "eval $*: the message does not name $flag: $(cat bad.log)"
}
expect_usage --task --task bogus
expect_usage --lengths --task passkey --lengths 128,x
expect_usage --lengths --task passkey --lengths 16
expect_usage --depths --task passkey --depths 0,1.5
expect_usage --samples --task needle --samples 0
expect_usage --digits --task passkey --digits 19
expect_usage --lengths --lengths 128
expect_usage --token-losses --task facts --token-losses t.tsv

# The heatmap tool draws the real file.
/usr/bin/python3 "$src/tools/task_heatmap.py" one.json --out heat.png > heat.log 2>&1 || fail "task_heatmap: $(cat heat.log)"
[ -s heat.png ] || fail "task_heatmap wrote no PNG"
echo "task_eval: task mixture resumes exactly, eval --task JSON as documented and the same on two ranks"
