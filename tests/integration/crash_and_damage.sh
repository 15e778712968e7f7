#!/usr/bin/env bash
# Crash safety and damage detection: SIGKILL while a checkpoint is being written
# leaves the previous one loadable and --resume uses it; a truncated file and a flipped byte
# inside a dataset are detected (ckpt verify exits non-zero naming the dataset) and resume
# falls back to the newest good checkpoint; a checkpoint of another model shape is refused;
# h5py reads every parameter with its model.md §9 shape.
source "$(dirname "$0")/common.sh"
bin=$1
work=$(mktemp -d); trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$work"' EXIT
pid=0
# A model big enough that a save takes a noticeable time.
big=(configs/tiny.toml "${SMALL[@]}" model.d_model=256 model.d_ff=1024 model.vocab=4096 model.heads=4 model.head_dim=64 checkpoint.keep=0)
"$bin" train "${big[@]}" train.steps=100000 checkpoint.every=1 checkpoint.dir="$work/c" > "$work/run.log" 2>&1 &
pid=$!
# Wait for two committed checkpoints, then kill while a temporary file is being written.
for _ in $(seq 600); do [ -f "$work/c/ckpt-00000002.h5" ] && break; sleep 0.1; done
[ -f "$work/c/ckpt-00000002.h5" ] || fail "no checkpoint written: $(tail "$work/run.log")"
killed=0
for _ in $(seq 2000); do
  if compgen -G "$work/c/*.tmp" > /dev/null; then kill -9 $pid; killed=1; break; fi
  sleep 0.005
done
[ $killed -eq 1 ] || { kill -9 $pid; echo "note: no save in flight seen; killed between saves"; }
wait $pid 2>/dev/null || true
newest=$(ls "$work/c"/ckpt-*.h5 | sort | tail -1)
"$bin" ckpt verify "$newest" > /dev/null || fail "newest committed checkpoint damaged after SIGKILL"
step=$(basename "$newest" | sed -E 's/ckpt-0*([0-9]+)\.h5/\1/')
"$bin" train "${big[@]}" train.steps=$((step + 1)) --resume "$work/c" > "$work/resume.log" 2>&1
grep -q "resumed from $newest at step $step" "$work/resume.log" || fail "resume after SIGKILL: $(cat "$work/resume.log")"

# Damage: flip one byte in the middle of the file (inside the embedding's data) and truncate
# another copy; both are detected, naming a dataset.
cp "$newest" "$work/flip.h5"
size=$(stat -c %s "$work/flip.h5")
python3 - "$work/flip.h5" <<'PY'
import sys
p = sys.argv[1]
with open(p, 'r+b') as f:
    f.seek(0, 2); n = f.tell(); f.seek(n // 2); b = f.read(1); f.seek(n // 2); f.write(bytes([b[0] ^ 0x5A]))
PY
if "$bin" ckpt verify "$work/flip.h5" > "$work/flip.txt" 2>&1; then fail "flipped byte not detected"; fi
grep -q "/" "$work/flip.txt" || fail "verify did not name a dataset: $(cat "$work/flip.txt")"
head -c $((size / 2)) "$newest" > "$work/trunc.h5"
if "$bin" ckpt verify "$work/trunc.h5" > /dev/null 2>&1; then fail "truncation not detected"; fi
# Resume falls back past a damaged newest checkpoint.
mkdir -p "$work/d"
cp "$work/c/ckpt-00000001.h5" "$work/d/"
cp "$work/flip.h5" "$work/d/ckpt-00000002.h5"
"$bin" train "${big[@]}" train.steps=3 --resume "$work/d" > "$work/fallback.log" 2>&1
grep -q "resumed from $work/d/ckpt-00000001.h5 at step 1" "$work/fallback.log" || fail "no fallback: $(cat "$work/fallback.log")"

# Another model shape is refused with a clear message.
if "$bin" train "${big[@]}" model.d_model=128 train.steps=3 --resume "$work/d" > "$work/mismatch.log" 2>&1; then
  fail "a checkpoint of another model shape was accepted"
fi
grep -qi "shape\|mismatch" "$work/mismatch.log" || fail "unclear refusal: $(cat "$work/mismatch.log")"

# A failing save (its temporary file cannot be created: a non-empty directory holds its name,
# which fails for root too; an unusable checkpoint.dir itself is refused before training, by
# the preflight) stops the run by default; with checkpoint.on_error=continue it is reported
# while training goes on, but a failed FINAL save still fails the job (exit non-zero, so Slurm
# does not record an unsaved end as success).
for step in 1 2; do mkdir -p "$work/blocked/ckpt-0000000$step.h5.tmp/keep"; done
if "$bin" train configs/tiny.toml "${SMALL[@]}" train.steps=2 checkpoint.dir="$work/blocked" > "$work/stop.log" 2>&1; then
  fail "a failed save did not stop the run"
fi
grep -q "checkpoint failed" "$work/stop.log" || fail "unclear save failure: $(cat "$work/stop.log")"
if "$bin" train configs/tiny.toml "${SMALL[@]}" train.steps=2 checkpoint.every=1 checkpoint.dir="$work/blocked" \
  checkpoint.on_error=continue > "$work/continue.log" 2>&1; then
  fail "on_error=continue exited 0 although the final save failed: $(cat "$work/continue.log")"
fi
grep -q "training continues" "$work/continue.log" || fail "no save-failure report: $(cat "$work/continue.log")"
grep -q "step      2/2" "$work/continue.log" || fail "training did not go on: $(cat "$work/continue.log")"
grep -q "the final checkpoint failed at step 2" "$work/continue.log" || fail "final-save failure not named: $(cat "$work/continue.log")"

# h5py reads every parameter with the documented shape.
/usr/bin/python3 - "$newest" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], 'r')
m = f['model']
D, V, A, F, S, H = 256, 4096, 256, 1024, 8, 4
assert m['embed'].shape == (V, D), m['embed'].shape
assert m['layers.0.attn.wq'].shape == (D, A)
assert m['layers.1.attn.wo'].shape == (2 * A, D)      # recurrent layer: 2A -> D
assert m['layers.1.state.ids'].shape == (S, D)
assert m['layers.0.attn.rel_bias'].shape == (H, 32)
n = 0
def visit(name, obj):
    global n
    if isinstance(obj, h5py.Dataset): obj[()]; n += 1
m.visititems(visit)
print(f"h5py read {n} parameter datasets")
PY
echo "crash_and_damage: all checks passed"
