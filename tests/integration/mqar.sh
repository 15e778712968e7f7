#!/usr/bin/env bash
# MQAR trained as the task (data/tasks/mqar.h; docs/fidelity.md, "MQAR"):
#  - the keys' rules: mqar with data.source = shards, a rate between 0 and 1, loss = answers for
#    the corpus tasks are refused naming the key (exit 2); more pairs than the vocabulary's keys is
#    refused naming data.tasks.max_pairs; loss = all is warned about;
#  - the answer-only loss: the start-up line states it, and its losses differ from loss = all;
#  - resume: 20 steps straight = 10 + resume 10 (every loss and the final checkpoint, bit-exact);
#  - the micro model (configs/mqar.toml: slide, 2 layers, D 64, W 32) learns recall inside its
#    window: accuracy >= 0.25 (6.5x chance; exact, 1.0, for this seed on this machine) at gaps of
#    0.25 and 0.5 W with 2 and 4 pairs; beyond its reach (2 W) at chance (<= 0.15); eval --task mqar's JSON has the documented fields, and
#    mpirun -np 2 reports the same cells; bad flags exit 2 naming the flag.
source "$(dirname "$0")/common.sh"
bin=$(realpath "$1")
src=$PWD
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
cfg=$src/configs/mqar.toml

for bad in "data.source=shards" "data.tasks.rate=0.5" "data.tasks.kinds=passkey data.tasks.loss=answers"; do
  set +e; "$bin" config show "$cfg" $bad > bad.log 2>&1; rc=$?; set -e
  key=${bad##* }
  [ "$rc" -eq 2 ] && grep -q "${key%%=*}" bad.log || fail "config $bad: exit $rc: $(cat bad.log)"
done
set +e; "$bin" train "$cfg" run.dir= train.steps=1 data.tasks.max_pairs=30 > pairs.log 2>&1; rc=$?; set -e
[ "$rc" -ne 0 ] && grep -q "data.tasks.max_pairs: 30 is more than the vocabulary's 26 keys" pairs.log ||
  fail "30 pairs of 26 keys: exit $rc: $(tail -3 pairs.log)"

short=(run.dir= train.steps=20 train.eval_every=0 log.every=1 checkpoint.every=10 checkpoint.keep=0)
"$bin" train "$cfg" "${short[@]}" checkpoint.dir=a log.metrics_path=a.jsonl > a.log 2>&1 || fail "train: $(tail -3 a.log)"
grep -q "^data: MQAR documents (train): 2-8 pairs, gap 0-16 tokens, prefix 0 tokens; keys 4-29 (26), values 30-55 (26), filler 56-63 (8); loss on the answers (an answer by chance: 1/26)" a.log ||
  fail "no MQAR line: $(grep '^data' a.log)"
"$bin" train "$cfg" "${short[@]}" data.tasks.loss=all log.metrics_path=all.jsonl > all.log 2>&1 || fail "loss=all"
grep -q "warning: data.tasks.kinds = mqar with data.tasks.loss = all" all.log || fail "no loss=all warning"
! diff -q <(losses a.jsonl) <(losses all.jsonl) > /dev/null || fail "the answer-only loss equals the whole loss"
mkdir b && cp a/ckpt-00000010.h5 b/
"$bin" train "$cfg" "${short[@]}" --resume b log.metrics_path=b.jsonl > b.log 2>&1 || fail "resume: $(tail -3 b.log)"
grep -q "resumed from b/ckpt-00000010.h5 at step 10" b.log || fail "did not resume: $(tail -5 b.log)"
diff <(losses a.jsonl | awk '$1 > 10') <(losses b.jsonl) || fail "losses differ after resume"
"$bin" ckpt diff a/ckpt-00000020.h5 b/ckpt-00000020.h5 > diff.log || fail "final checkpoints differ: $(cat diff.log)"

# The micro model learns recall inside its window (about 20 s on one core).
"$bin" train "$cfg" run.dir=micro optim.lr=1e-3 train.steps=5000 train.eval_every=0 > micro.log 2>&1 ||
  fail "train the micro model: $(tail -3 micro.log)"
grid=(--task mqar --pairs 2,4 --gaps 0.25,0.5,2 --samples 16 --ablate --quiet)
"$bin" eval --checkpoint micro/ckpt "${grid[@]}" --json one.json > one.log 2>&1 || fail "eval --task mqar: $(tail -3 one.log)"
grep -q "^eval --task mqar: 2 pair counts x 3 gaps x 16 documents" one.log || fail "no report: $(cat one.log)"
mpirun -np 2 --oversubscribe "$bin" eval --checkpoint micro/ckpt "${grid[@]}" --batch 4 --json two.json > two.log 2>&1 ||
  fail "eval --task mqar under mpirun -np 2: $(tail -3 two.log)"
/usr/bin/python3 - one.json two.json "$src/tests/integration" <<'PY' || fail "eval --task mqar JSON: $(cat one.log)"
import json, sys
one, two = (json.load(open(p)) for p in sys.argv[1:3])
assert list(one) == ["task", "checkpoint", "seed", "samples_per_cell", "seq_len", "window", "vocabulary", "chance",
                     "accuracy", "cells", "ablations"], list(one)
assert one["task"] == "mqar" and one["window"] == 32 and abs(one["chance"] - 1 / 26) < 1e-12
# One process (batch 8) and two ranks (batch 4 each) run the same documents through fp32 GEMMs
# of other shapes, so OpenBLAS may sum a logit in another order (docs/reliability.md "Numerics").
# Contract: every count exact; nats within 1e-4 relative (a dot product of K <= 128 terms, D 64,
# F 128, moves by <= K u sum|w x|, u = 2^-24: ~8e-6 of its magnitude, through two layers);
# accuracy exact unless an answer's argmax is within that margin of a tie (at most one answer).
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, sys.argv[3])
from same_report import same
same(one, two, 1e-4, 1.0 / 32, skip=("checkpoint",))
for c in one["cells"]:
    assert c["documents"] == 16 and c["answers"] == 16 * c["pairs"], c
    assert c["gap_tokens"] == round(c["gap_windows"] * 32), c
    # Whether a run reaches exact recall within 5000 steps depends on its trajectory (2 of 6
    # seeds here; another CPU's rounding is another trajectory): the contract is what every
    # seed measured reached, >= 0.25 inside (6.5x chance, at least the partial solution that
    # knows the document's values) and chance beyond the reach W.L = 2 W.
    if c["gap_windows"] <= 0.5:
        assert c["accuracy"] >= 0.25, ("inside the window", c)
    else:
        assert c["accuracy"] <= 0.15, ("beyond the window's reach", c)
inside = min(c["accuracy"] for c in one["cells"] if c["gap_windows"] <= 0.5)
print("mqar micro model: inside the window >= %.2f (%s), beyond it <= %.2f" % (
    inside, "exact recall" if inside >= 0.9 else "partial", max(c["accuracy"] for c in one["cells"] if c["gap_windows"] > 0.5)))
assert [a["mode"] for a in one["ablations"]] == ["segment", "block"]
assert not one["ablations"][0]["applies"], "slide carries no state the segment ablation resets"
PY

# Flags of the other grid, or a count beyond the keys: exit 2 naming the flag.
for bad in "--lengths 64" "--pairs 40" "--gaps x"; do
  set +e; "$bin" eval --checkpoint micro/ckpt --task mqar $bad --quiet > bad.log 2>&1; rc=$?; set -e
  flag=${bad%% *}
  [ "$rc" -eq 2 ] && grep -q -- "$flag" bad.log || fail "eval --task mqar $bad: exit $rc: $(cat bad.log)"
done
set +e; "$bin" eval --checkpoint micro/ckpt --pairs 4 --quiet > bad.log 2>&1; rc=$?; set -e
[ "$rc" -eq 2 ] && grep -q -- "--pairs needs --task mqar" bad.log || fail "--pairs without --task: exit $rc: $(cat bad.log)"
echo "mqar: ok"
