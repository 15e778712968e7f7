#!/usr/bin/python3
"""tools/mqar_study.py's collect on a hand-written study folder (no brt-dist needed): two models,
a sweep of two rates, two seeds at the best one, `eval --task mqar` JSONs for the test and the
capacity grids. Checks that the best rate is the one collected, the mean ± std over seeds per gap
(gaps in the base config's W even for a model with another window), the ablation columns, the
capacity table, the sweep and cost table, the two PNGs, and one report's heatmap.
usage: test_mqar_study.py   (from anywhere; ~3 s)"""
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
sys.dont_write_bytecode = True

import mqar_study  # noqa: E402

BASE_W = 32


def report(window, accuracies, pairs=(4,), gaps=(1, 2), ablated=None):
    """An `eval --task mqar --json` report: accuracies[i][j] for pairs[i] at gaps[j] (base W)."""
    cells = [{"pairs": p, "gap_windows": g * BASE_W / window, "gap_tokens": g * BASE_W, "documents": 8,
              "answers": 8 * p, "accuracy": accuracies[i][j], "exact": 0, "answer_nats": 1.0}
             for i, p in enumerate(pairs) for j, g in enumerate(gaps)]
    overall = sum(c["accuracy"] for c in cells) / len(cells)
    out = {"task": "mqar", "checkpoint": "x", "seed": 2, "samples_per_cell": 8, "seq_len": 64, "window": window,
           "vocabulary": "keys", "chance": 1 / 26, "accuracy": overall, "cells": cells}
    if ablated is not None:
        out["ablations"] = [{"mode": "segment", "applies": True, "accuracy": ablated, "answers": 8, "cells": cells},
                            {"mode": "block", "applies": True, "accuracy": ablated / 2, "answers": 8, "cells": cells}]
    return out


def write(d, name, obj):
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(json.dumps(obj))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        study = Path(tmp) / "s"
        write(study, "study.json", {"config": "configs/mqar.toml", "models": ["slide", "rec:fixed:skip"],
                                    "lrs": ["1e-3", "3e-3"], "seeds": [1, 2], "extra": ["train.steps=9"],
                                    "pairs": "4", "gaps": "1,2", "capacity_pairs": "4,8", "capacity_gap": 2.0,
                                    "base_window": BASE_W})
        write(study, "best.json", {"slide": "1e-3", "rec:fixed:skip": "3e-3"})
        runs = study / "runs"
        for label, window, lr_accs, seeds_accs in (
                ("slide", 64, {"1e-3": 0.5, "3e-3": 0.2}, [[[0.9, 0.1]], [[0.7, 0.1]]]),
                ("rec-fixed-skip", 32, {"1e-3": 0.1, "3e-3": 0.6}, [[[0.8, 0.8]], [[0.8, 0.6]]])):
            best = "1e-3" if label == "slide" else "3e-3"
            for lr, acc in lr_accs.items():
                write(runs / f"{label}_lr{lr}_s1", "validation.json", report(window, [[acc, acc]]))
            for seed, accs in zip((1, 2), seeds_accs):
                d = runs / f"{label}_lr{best}_s{seed}"
                write(d, "train.done", {"seconds": 10.0 * seed, "parameters": 100, "window": window, "tokens": 512})
                write(d, "test.json", report(window, accs, ablated=0.25))
                write(d, "capacity.json", report(window, [[0.5], [0.25]], pairs=(4, 8), gaps=(2,)))
        sys.argv = ["mqar_study.py", "collect", str(study)]
        mqar_study.main()
        md = (study / "mqar.md").read_text()
        assert "| slide | 100 | 1e-3 | 0.80 ± 0.14 | 0.10 ± 0.00 |" in md, md
        assert "| rec:fixed:skip | 100 | 3e-3 | 0.80 ± 0.00 | 0.70 ± 0.14 | 0.75 | 0.25 | 0.12 |" in md, md
        assert "| 1 W | 2 W |" in md, md  # base-W gaps for the W = 64 model too
        assert "| slide | 0.50 ± 0.00 | 0.25 ± 0.00 |" in md, md
        assert "| slide | 1e-3: 0.50; 3e-3: 0.20 | 512 | 15 |" in md, md
        for png in ("mqar-distance.png", "mqar-capacity.png"):
            assert (study / png).stat().st_size > 1000, png
        one = runs / "slide_lr1e-3_s1" / "test.json"
        sys.argv = ["mqar_study.py", "heatmap", str(one), "--out", str(study / "heat.png")]
        mqar_study.main()
        assert (study / "heat.png").stat().st_size > 1000
    print("test_mqar_study: ok")


if __name__ == "__main__":
    main()
