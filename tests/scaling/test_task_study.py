#!/usr/bin/python3
"""tools/task_study.py's collect on a hand-written study folder (no brt-dist needed): two models x
two seeds with `eval --task passkey` JSONs (a block ablation that applies for one model only) and
longer-segment test evals. Checks the distance buckets (cells pooled by n into powers of two of
W), the mean and spread over seeds in task.md and task.csv, the length-generalisation table, the
PNG, and that the task flags' bad values are user errors naming the flag.
usage: test_task_study.py   (from anywhere; ~3 s)"""
import argparse
import csv
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
sys.dont_write_bytecode = True

import task_study  # noqa: E402
from scaling_study import StudyError  # noqa: E402

W = 64


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def cell(distance_windows, accuracy, n=8):
    return {"length": 0, "depth": 0.0, "distance_tokens": int(distance_windows * W),
            "distance_windows": distance_windows, "accuracy": accuracy, "answer_nats": 1.0 - accuracy, "n": n}


def write_run(study, model, seed, accs, ablated=None, bits=None, window=W):
    mdir = study / "runs" / model.replace(":", "_")
    mdir.mkdir(parents=True, exist_ok=True)
    (mdir / "model.json").write_text(json.dumps({"name": model}))
    run = mdir / f"seed-{seed}"
    run.mkdir()
    # Two cells fall in the 4 W bucket (3.9 and 4.2 windows, n 8 and 4): pooled by n.
    cells = [cell(1.0, accs[0]), cell(3.9, accs[1]), cell(4.2, accs[2], n=4), cell(15.5, accs[3])]
    for c in cells:  # a model with another W (xl: W = N) reports distances in its own windows
        c["distance_windows"] = c["distance_tokens"] / window
    doc = {"task": "passkey", "window": window, "cells": cells, "accuracy": 0.5, "answer_nats": 0.5,
           "ablations": [{"mode": "segment", "applies": False, "cells": cells}]}
    if ablated is not None:
        doc["ablations"].append({"mode": "block", "applies": True, "cells": [dict(c, accuracy=ablated) for c in cells]})
    (run / "task-passkey.json").write_text(json.dumps(doc))
    if bits:
        (run / "eval-test.json").write_text(json.dumps({"bits_per_token": bits[0]}))
        (run / "eval-test-n4.json").write_text(json.dumps({"bits_per_token": bits[1]}))


def test_collect(work):
    study = work / "study"
    write_run(study, "rec:fixed:skip", 1, [1.0, 1.0, 0.25, 0.5], ablated=0.0, bits=[5.0, 5.5])
    write_run(study, "rec:fixed:skip", 2, [1.0, 0.5, 1.0, 0.75], ablated=0.125, bits=[5.2, 5.9])
    write_run(study, "slide", 1, [1.0, 0.0, 0.0, 0.0])
    write_run(study, "xl", 1, [1.0, 0.5, 0.5, 0.0], window=4 * W)
    (study / "study.json").write_text(json.dumps({"task_window": W}))  # the study's W buckets every model
    written = task_study.collect(study, work, "std", plots=True)
    check(written == ["task.csv", "task.md", "task-passkey.png"], written)
    rows = {(r["model"], r["pass"], r["distance_windows"]): r for r in csv.DictReader(open(work / "task.csv"))}
    # seed 1: (8·1.0 + 4·0.25) / 12 = 0.75; seed 2: (8·0.5 + 4·1.0) / 12 = 0.6667.
    r = rows[("rec:fixed:skip", "plain", "4")]
    check(r["seeds"] == "2" and abs(float(r["accuracy_mean"]) - (0.75 + 8 / 12) / 2) < 1e-4, r)
    check(abs(float(r["accuracy_min"]) - 8 / 12) < 1e-4 and float(r["accuracy_max"]) == 0.75, r)
    check(("xl", "plain", "16") in rows and rows[("xl", "plain", "4")]["accuracy_mean"] == "0.5000", sorted(rows))
    check(("rec:fixed:skip", "block", "16") in rows and ("slide", "block", "16") not in rows, sorted(rows))
    check(not any(p == "segment" for _, p, _ in rows), "an ablation that does not apply is reported")
    md = (work / "task.md").read_text()
    check("| model | pass | 1 W | 4 W | 16 W |" in md, md)
    check("| rec:fixed:skip | plain | 1.00 ± 0.00 | 0.71 ± 0.06 | 0.62 ± 0.18 |" in md, md)
    check("| slide | plain | 1.00 | 0.00 | 0.00 |" in md, md)
    check("| rec:fixed:skip | 5.100 ± 0.141 | 5.700 ± 0.283 |" in md and "| model | 1N | 4N |" in md, md)
    png = (work / "task-passkey.png").read_bytes()
    check(png[:8] == b"\x89PNG\r\n\x1a\n", "task-passkey.png is not a PNG")


def test_flags():
    args = argparse.Namespace(task="passkey,needle", task_rate=0.5, task_distance="1,16", task_windows="2,8",
                              task_samples=4, task_seq_lens="2")
    over = task_study.overrides(args, W)
    check(over == ["data.tasks.rate=0.5", "data.tasks.kinds=passkey,needle", "data.tasks.min_distance=64",
                   "data.tasks.max_distance=1024"], over)
    plan = task_study.plan(args, W)
    check(sorted(plan) == ["eval-test-n2.json", "task-needle.json", "task-passkey.json"], plan)
    check(plan["task-needle.json"][0][:4] == ["--task", "needle", "--lengths", "128,512"], plan)
    check(plan["eval-test-n2.json"] == (["--split", "test"], 2), plan)
    for field, value, needle in [("task", "passkey,haystack", "--task: 'haystack'"),
                                 ("task_rate", 0.0, "--task-rate"), ("task_distance", "16,1", "--task-distance"),
                                 ("task_windows", "2,x", "--task-windows"), ("task_samples", 0, "--task-samples")]:
        bad = argparse.Namespace(**dict(vars(args), **{field: value}))
        try:
            task_study.overrides(bad, W)
            task_study.plan(bad, W)
        except StudyError as e:
            check(needle in str(e), f"{field}={value}: {e}")
        else:
            raise AssertionError(f"{field}={value} accepted")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_collect(Path(tmp))
    test_flags()
    print("test_task_study: ok")


if __name__ == "__main__":
    main()
