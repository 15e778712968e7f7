#!/usr/bin/env bash
# The data path end to end: prepare the default corpus (KJV) under mpirun -np 2,
# train a few steps on its shards with validation, then evaluate the held-out split on 1 and
# 2 ranks: identical totals, and byte/word counts equal to the source files'.
source "$(dirname "$0")/common.sh"
bin=$1
command -v bible > /dev/null || { echo "SKIP: bible-kjv not installed"; exit 0; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" prepare --kjv --out "$work/data" --vocab 512 --quiet > "$work/prepare.log"
grep -q "66 documents" "$work/prepare.log" || fail "prepare: $(cat "$work/prepare.log")"
# A second prepare reuses every shard.
"$bin" prepare --kjv --out "$work/data" --vocab 512 --quiet > "$work/prepare2.log"
grep -q "(0 written" "$work/prepare2.log" || fail "rerun redid shards: $(cat "$work/prepare2.log")"
"$bin" train configs/tiny.toml "${SMALL[@]}" model.vocab=512 data.source=shards data.path="$work/data" \
  train.steps=6 train.eval_every=3 checkpoint.dir="$work/ckpt" log.metrics_path="$work/metrics.jsonl" > "$work/train.log"
grep -q "eval  step      6" "$work/train.log" || fail "no validation: $(cat "$work/train.log")"
ckpt="$work/ckpt/ckpt-00000006.h5"
# Shards made by another tokenizer cannot continue this checkpoint: refused, naming it.
"$bin" prepare --kjv --out "$work/data2" --vocab 400 --quiet > /dev/null
if "$bin" train configs/tiny.toml "${SMALL[@]}" model.vocab=512 data.source=shards data.path="$work/data2" \
     train.steps=8 --resume "$work/ckpt" log.metrics_path="$work/mismatch.jsonl" > "$work/mismatch.log" 2>&1; then
  fail "a checkpoint was resumed on shards of another tokenizer"
fi
grep -qi "tokenizer" "$work/mismatch.log" || fail "unclear tokenizer refusal: $(cat "$work/mismatch.log")"
"$bin" eval --checkpoint "$ckpt" --split validation --json "$work/e1.json" --quiet > "$work/e1.txt"
mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" eval --checkpoint "$ckpt" --split validation --json "$work/e2.json" --quiet > "$work/e2.txt"
/usr/bin/python3 - "$work/e1.json" "$work/e2.json" "$work/data/corpus/validation" <<'PY'
import json, sys, os
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("documents", "tokens", "bytes", "words", "nats", "bits_per_byte", "word_perplexity"):
    assert a[k] == b[k], (k, a[k], b[k])
assert a["position_buckets"] == b["position_buckets"]
folder = sys.argv[3]
text = [open(os.path.join(folder, f), encoding="utf-8", newline="").read() for f in sorted(os.listdir(folder))]
assert a["documents"] == len(text), (a["documents"], len(text))
assert a["bytes"] == sum(len(t.encode("utf-8")) for t in text), (a["bytes"],)
assert a["words"] == sum(len(t.split()) for t in text), (a["words"],)
print(f"eval identical on 1 and 2 ranks: {a['documents']} documents, {a['tokens']} tokens, "
      f"{a['bytes']} bytes, {a['words']} words, {a['bits_per_byte']:.4f} bits/byte")
PY
# generate: a prompt much longer than the window (W = 8 tokens here), the same seed twice gives
# the same text, streamed to stdout.
prompt="And God said, Let there be light: and there was light. And God saw the light, that it was good."
"$bin" generate --checkpoint "$ckpt" --prompt "$prompt" --max-tokens 40 --seed 5 > "$work/g1.txt"
"$bin" generate --checkpoint "$ckpt" --prompt "$prompt" --max-tokens 40 --seed 5 > "$work/g2.txt"
cmp -s "$work/g1.txt" "$work/g2.txt" || fail "generate is not deterministic for a seed"
[ "$(wc -c < "$work/g1.txt")" -gt "${#prompt}" ] || fail "generate produced no text: $(cat "$work/g1.txt")"
echo "data_pipeline: all checks passed"
