#!/usr/bin/env bash
# `brt-dist eval` and `brt-dist generate` under tensor parallelism (docs/parallelism.md): a
# checkpoint trained at --tp 2 on the KJV shards is evaluated at (ranks 1, TP 1), (2, 2) and
# (4, 2) = DP 2 x TP 2: documents, tokens, bytes and words equal exactly, the nats (and every
# position bucket's) within 1e-5 relative (vocabulary-parallel cross-entropy: another fp32
# reduction order). Greedy generation (--top-k 1) at --tp 2 gives the TP = 1 text (logits
# gathered over the vocabulary slices; every rank draws the same tokens, rank 0 prints).
# usage: eval_generate_tp.sh MPIEXEC BRT_DIST [VARIANT]   (run from the source tree)
source "$(dirname "$0")/../../integration/common.sh"
mpiexec=$1 bin=$2 variant=${3:-rec:fixed:skip}
command -v bible > /dev/null || { echo "SKIP: bible-kjv not installed"; exit 0; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mpi=("$mpiexec" --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS=1)
"$bin" prepare --kjv --out "$work/data" --vocab 512 --quiet > "$work/prepare.log" || fail "prepare: $(cat "$work/prepare.log")"
"${mpi[@]}" -np 2 "$bin" train configs/tiny.toml "${SMALL[@]}" model.variant=$variant model.vocab=512 data.source=shards \
  data.path="$work/data" train.steps=4 checkpoint.every=4 checkpoint.dir="$work/ckpt" log.metrics_path="$work/metrics.jsonl" --tp 2 \
  > "$work/train.log" 2>&1 || fail "train --tp 2: $(tail -20 "$work/train.log")"
ckpt="$work/ckpt/ckpt-00000004.h5"
[ -f "$ckpt" ] || fail "no checkpoint: $(tail -5 "$work/train.log")"
"$bin" eval --checkpoint "$ckpt" --split validation --json "$work/e1.json" --quiet > "$work/e1.txt" ||
  fail "eval TP 1: $(cat "$work/e1.txt")"
"${mpi[@]}" -np 2 "$bin" eval --checkpoint "$ckpt" --split validation --tp 2 --json "$work/e2.json" --quiet \
  > "$work/e2.txt" 2>&1 || fail "eval --tp 2: $(cat "$work/e2.txt")"
"${mpi[@]}" -np 4 "$bin" eval --checkpoint "$ckpt" --split validation --tp 2 --json "$work/e4.json" --quiet \
  > "$work/e4.txt" 2>&1 || fail "eval -np 4 --tp 2: $(cat "$work/e4.txt")"
/usr/bin/python3 - "$work/e1.json" "$work/e2.json" "$work/e4.json" <<'PY' || fail "eval totals differ"
import json, sys
ref, *others = (json.load(open(p)) for p in sys.argv[1:])
worst = 0.0
for name, got in zip(("(2, 2)", "(4, 2)"), others):
    for k in ("documents", "tokens", "bytes", "words"):
        assert got[k] == ref[k], (name, k, got[k], ref[k])
    rel = abs(got["nats"] - ref["nats"]) / ref["nats"]
    assert rel <= 1e-5, (name, "nats", got["nats"], ref["nats"])
    worst = max(worst, rel)
    for a, b in zip(got["position_buckets"], ref["position_buckets"]):
        assert a["tokens"] == b["tokens"], (name, a, b)
        if b["tokens"]:
            assert abs(a["nats"] - b["nats"]) <= 1e-5 * b["nats"], (name, a, b)
print(f"eval at (ranks, TP) = (1, 1), (2, 2), (4, 2): {ref['documents']} documents, {ref['tokens']} tokens, "
      f"{ref['bits_per_byte']:.4f} bits/byte; worst nats rel. diff {worst:.2e}")
PY
prompt="And God said, Let there be light: and there was light."
gen=(generate --checkpoint "$ckpt" --prompt "$prompt" --max-tokens 30 --top-k 1 --seed 5)
"$bin" "${gen[@]}" > "$work/g1.txt" 2>&1 || fail "generate: $(cat "$work/g1.txt")"
"${mpi[@]}" -np 2 "$bin" "${gen[@]}" --tp 2 > "$work/g2.txt" 2>&1 || fail "generate --tp 2: $(cat "$work/g2.txt")"
cmp -s "$work/g1.txt" "$work/g2.txt" || fail "greedy text differs at --tp 2: $(cat "$work/g1.txt") vs $(cat "$work/g2.txt")"
[ "$(wc -c < "$work/g1.txt")" -gt "${#prompt}" ] || fail "generate produced no text: $(cat "$work/g1.txt")"
echo "eval_generate_tp ($variant): eval totals and greedy generation at --tp 2 equal TP = 1"
