#!/usr/bin/env bash
# MFU has one definition (model.md §10): the job's training FLOP/s over ALL ranks' peak — data,
# tensor and context parallel alike. With train.peak_gflops = 1 every logged mfu must equal
# gflops / ranks: one process, TP 2 (2 ranks) and DP 2 x TP 2 (4 ranks).
source "$(dirname "$0")/common.sh"
mpiexec=$1 bin=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
check() {  # RANKS TP
  local ranks=$1 tp=$2 m="$work/m-$1-$2.jsonl"
  "$mpiexec" --oversubscribe -np "$ranks" "$bin" train configs/tiny.toml "${SMALL[@]}" model.heads=4 model.head_dim=8 \
    model.vocab=128 train.steps=4 --tp "$tp" log.metrics_path="$m" > "$work/log" 2>&1 || fail "np $ranks tp $tp: $(tail -3 "$work/log")"
  /usr/bin/python3 - "$m" "$ranks" "$tp" <<'PY' || fail "np $ranks tp $tp: MFU not gflops / (ranks x peak)"
import json, sys
path, ranks, tp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
recs = [json.loads(l) for l in open(path) if '"train"' in l]
assert recs
for r in recs:
    want = r["gflops"] / (ranks * 1.0)
    assert abs(r["mfu"] - want) <= 1e-12 * max(1.0, want), (r["mfu"], want)
print("MFU at %d ranks (TP %d): %s of %.2f GFLOP/s (peak 1 GFLOP/s per rank)"
      % (ranks, tp, ", ".join("%.1f%%" % (100 * r["mfu"]) for r in recs), recs[-1]["gflops"]))
PY
}
check 1 1
check 2 2
check 4 2
echo "mfu_layouts: mfu = gflops / (all ranks x peak) at 1, TP 2 and DP 2 x TP 2"
