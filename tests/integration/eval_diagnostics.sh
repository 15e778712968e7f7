#!/usr/bin/env bash
# Long-range diagnostics of `brt-dist eval --ablate` (docs/evaluation.md):
# the loss split by the distance to a token's previous occurrence adds up to the total; the
# state ablations change nothing for slide (to the bit) and change the loss of the recurrent
# and BST models; gate and state-share statistics are reported; two ranks report what one does.
# (That the ablation sends a model which relies on its state back to chance is
# tests/core/model/test_recall.cpp.)
source "$(dirname "$0")/common.sh"
bin=$(realpath "$1")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
word_corpus corpus 5 2 2 150
"$bin" prepare --corpus corpus --out data --vocab 320 --quiet > prepare.log 2>&1 || fail "prepare: $(tail -3 prepare.log)"
for variant in slide rec:fixed:skip rec:lstm:dual feedback:fixed:skip bst:mf:s4d; do
  name=${variant//:/_}
  "$bin" train "$OLDPWD/configs/tiny.toml" "${SMALL[@]}" model.variant=$variant model.bst_layers=[0] model.vocab=320 \
    data.source=shards data.path=data train.steps=8 checkpoint.dir="$name" log.metrics_path= > "$name.train.log" 2>&1 ||
    fail "$variant: train: $(tail -3 "$name.train.log")"
  ckpt="$name/ckpt-00000008.h5"
  "$bin" eval --checkpoint "$ckpt" --ablate --quiet --json "$name.json" > "$name.log" 2>&1 ||
    fail "$variant: eval --ablate: $(tail -3 "$name.log")"
  grep -q "carried state ablated" "$name.log" || fail "$variant: no ablation in the text report: $(cat "$name.log")"
  grep -q "previous occurrence" "$name.log" || fail "$variant: no long-range split in the text report"
  mpirun -np 2 --oversubscribe "$bin" eval --checkpoint "$ckpt" --ablate --quiet --batch 1 --json "$name.np2.json" \
    > "$name.np2.log" 2>&1 || fail "$variant: eval under mpirun -np 2: $(tail -3 "$name.np2.log")"
  "$bin" eval --checkpoint "$ckpt" --ablate --quiet --batch 1 --json "$name.b1.json" > "$name.b1.log" 2>&1 ||
    fail "$variant: eval --batch 1: $(tail -3 "$name.b1.log")"
  /usr/bin/python3 - "$name.json" "$name.np2.json" "$name.b1.json" "$variant" <<'PY' || fail "$variant: report"
import json, math, sys
r, np2, b1, variant = [json.load(open(p)) for p in sys.argv[1:4]] + [sys.argv[4]]
classes = r["long_range"]
assert [c["name"] for c in classes] == ["first", "within_w", "within_wl", "beyond_wl"], classes
assert sum(c["tokens"] for c in classes) == r["tokens"], (classes, r["tokens"])
assert abs(sum(c["nats"] for c in classes) - r["nats"]) <= 1e-9 * r["nats"], (classes, r["nats"])
assert classes[1]["max_distance"] == r["window"] and classes[2]["max_distance"] == r["window"] * r["layers_total"]
assert all(c["tokens"] > 0 for c in classes), classes
modes = {a["mode"]: a for a in r["ablation"]}
assert set(modes) == {"segment", "block"}, r["ablation"]
for a in modes.values():
    assert a["tokens"] == r["tokens"] and math.isfinite(a["bits_per_token"])
    assert abs(a["delta_bits_per_token"] - (a["bits_per_token"] - r["bits_per_token"])) < 1e-9
expect = {"slide": (False, False), "rec:fixed:skip": (True, True), "rec:lstm:dual": (True, True),
          "feedback:fixed:skip": (True, True),
          "bst:mf:s4d": (True, False)}[variant]
for mode, applies in zip(("segment", "block"), expect):
    a = modes[mode]
    assert a["applies"] == applies, (variant, mode, a)
    if applies:
        assert a["nats"] != r["nats"], (variant, mode, "the ablation changed nothing")
    else:
        assert a["nats"] == r["nats"], (variant, mode, a["nats"], r["nats"])  # to the bit
layers = r["layers"]
if variant == "slide":
    assert layers == [], layers
else:
    assert len(layers) == 1 and 0 <= layers[0]["state_share"] <= 1, layers
    kind = layers[0]["kind"]
    assert kind == ("bst" if variant.startswith("bst") else "recurrent"), layers
    assert layers[0]["layer"] == (0 if variant.startswith("bst") else 1), layers
    if kind == "recurrent":
        g = layers[0]["gate"]
        assert 0 < g["mean"] < 1 and g["std"] >= 0, g
        assert g["kind"] == variant.split(":")[1], g
        if g["kind"] == "lstm":
            assert 0 < g["input_mean"] < 1 and "gate2" in layers[0], layers
# Two ranks (one stream each) and one rank with one stream read the same documents the same
# way: identical totals, long-range split and ablations.
for other in (np2,):
    assert other["nats"] == b1["nats"] and other["tokens"] == b1["tokens"], (other["nats"], b1["nats"])
    assert other["long_range"] == b1["long_range"], (other["long_range"], b1["long_range"])
    assert [a["nats"] for a in other["ablation"]] == [a["nats"] for a in b1["ablation"]]
    for x, y in zip(other["layers"], b1["layers"]):
        assert abs(x["state_share"] - y["state_share"]) < 1e-6, (x, y)
print("%-16s %.4f bits/token; long-range %s; ablation segment %+.4f block %+.4f; layers %s" % (
    variant, r["bits_per_token"], " ".join("%s %.3f" % (c["name"], c["bits_per_token"]) for c in classes),
    modes["segment"]["delta_bits_per_token"], modes["block"]["delta_bits_per_token"], json.dumps(layers)))
PY
done
echo "eval_diagnostics: long-range split, ablations and layer statistics as expected"
