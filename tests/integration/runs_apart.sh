#!/usr/bin/env bash
# Runs kept apart (docs/training.md "Runs"): every metrics record carries its run id and wall
# clock; a resume continues its run's id and says what it changes (train.steps from 3 to 5); a
# fresh start in the same folder moves the other run's records aside instead of appending; the
# plot draws each run id as its own curve. Also the start's warnings (steps < warmup).
source "$(dirname "$0")/common.sh"
bin=$(realpath "$1")
src=$PWD
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
args=("$src/configs/tiny.toml" "${SMALL[@]}" run.dir=runs/x optim.warmup=10)
"$bin" train "${args[@]}" train.steps=3 > a.log 2> a.err || fail "run a: $(tail -3 a.err)"
grep -q "optim.warmup = 10 is more than train.steps = 3" a.err || fail "no warmup warning: $(cat a.err)"
"$bin" train "${args[@]}" train.steps=5 > b.log 2> b.err || fail "resume: $(tail -3 b.err)"
grep -q "this resume changes train.steps from 3 to 5" b.err || fail "no change warning: $(cat b.err)"
grep -q "resumed from" b.log || fail "did not resume: $(cat b.log)"
"$bin" train "${args[@]}" train.steps=4 checkpoint.overwrite=true checkpoint.resume=false > c.log 2> c.err ||
  fail "fresh start: $(tail -3 c.err)"
grep -q "held another run's records: moved to runs/x/metrics\.[0-9-]*-[0-9a-f]*\.jsonl" c.log || fail "not moved: $(cat c.log)"
/usr/bin/python3 - <<'PY' || fail "records"
import glob, json
current = [json.loads(l) for l in open("runs/x/metrics.jsonl")]
aside = glob.glob("runs/x/metrics.*-*.jsonl")
assert len(aside) == 1, aside
old = [json.loads(l) for l in open(aside[0])]
for recs in (current, old):
    assert all("run_id" in r and isinstance(r["time"], float) for r in recs), recs[0]
    assert len({r["run_id"] for r in recs}) == 1
assert current[0]["run_id"] != old[0]["run_id"]
steps = [r["step"] for r in old if r["event"] == "train"]
assert steps == [1, 2, 3, 4, 5], steps          # the resumed run continued its own file
assert [r["event"] for r in old].count("resume") == 1
assert [r["step"] for r in current if r["event"] == "train"] == [1, 2, 3, 4]
assert all(b["time"] >= a["time"] for a, b in zip(old, old[1:]))
PY
/usr/bin/python3 "$src/tools/plot_run.py" runs/x --out plots --x step > plot.log 2>&1 || fail "plot: $(cat plot.log)"
[ "$(grep -c '^plot_run: x [0-9]' plot.log)" = 2 ] || fail "not two curves: $(cat plot.log)"
grep -q "up to step 5" plot.log && grep -q "up to step 4" plot.log || fail "curves: $(cat plot.log)"
echo "runs_apart: ids and wall clock in every record, a resume continued and said what changed, another run moved aside, two curves"
