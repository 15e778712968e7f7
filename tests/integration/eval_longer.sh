#!/usr/bin/env bash
# Evaluation at longer contexts: a model trained at N = 32 evaluated with
# model.seq_len=64 (2N), for every variant; the report's segment-position buckets reach past
# the training length ([32, 64) holds tokens) and every loss is finite. docs/evaluation.md.
source "$(dirname "$0")/common.sh"
bin=$(realpath "$1")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
word_corpus corpus 3 2 1 400
"$bin" prepare --corpus corpus --out data --vocab 320 --quiet > prepare.log 2>&1 || fail "prepare: $(tail -3 prepare.log)"
for variant in slide xl rec:fixed:skip rec:lstm:dual feedback:fixed:skip bst:sh:s4d bst:mh:s4d bst:mf:s4d bst:sh:unstructured bst:mf:unstructured; do
  extra=(); [ "$variant" = xl ] && extra=(model.window=32)
  name=${variant//:/_}
  "$bin" train "$OLDPWD/configs/tiny.toml" "${SMALL[@]}" model.variant=$variant model.bst_layers=[0] model.vocab=320 \
    data.source=shards data.path=data train.steps=2 checkpoint.dir="$name" log.metrics_path= "${extra[@]}" > "$name.train.log" 2>&1 ||
    fail "$variant: train: $(tail -3 "$name.train.log")"
  ckpt="$name/ckpt-00000002.h5"
  "$bin" eval --checkpoint "$ckpt" --quiet --json "$name.n.json" > "$name.n.log" 2>&1 || fail "$variant: eval at N: $(tail -3 "$name.n.log")"
  "$bin" eval --checkpoint "$ckpt" model.seq_len=64 --quiet --json "$name.2n.json" > "$name.2n.log" 2>&1 ||
    fail "$variant: eval at 2N: $(tail -3 "$name.2n.log")"
  /usr/bin/python3 - "$name.n.json" "$name.2n.json" "$variant" <<'PY' || fail "$variant: report"
import json, math, sys
at_n, at_2n, variant = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
assert at_n["seq_len"] == 32 and at_2n["seq_len"] == 64 and at_2n["trained_seq_len"] == 32, (at_n["seq_len"], at_2n)
assert max(b["end"] for b in at_n["segment_buckets"]) == 32
past = [b for b in at_2n["segment_buckets"] if b["begin"] >= 32]
assert past and past[-1]["end"] == 64 and sum(b["tokens"] for b in past) > 0, at_2n["segment_buckets"]
assert at_2n["tokens"] == at_n["tokens"], (at_n["tokens"], at_2n["tokens"])  # the same targets, longer segments
for r in (at_n, at_2n):
    assert math.isfinite(r["bits_per_token"]) and all(math.isfinite(b["bits_per_token"]) for b in r["segment_buckets"])
print("%-22s N: %.4f bits/token; 2N: %.4f (positions 32-64: %.4f)" % (variant, at_n["bits_per_token"],
      at_2n["bits_per_token"], past[-1]["bits_per_token"]))
PY
done
echo "eval_longer: every variant evaluates at 2N"
