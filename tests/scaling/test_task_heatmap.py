#!/usr/bin/python3
"""tools/task_heatmap.py on a fabricated `eval --task --json` file (no brt-dist needed): a
passkey grid of 3 lengths x 4 depths with one cell left out, and a block ablation. Checks the
PNG (a readable PNG, wider with the ablation panel, both metric rows), the summary lines (the
per-length accuracy and loss weighted by n), that an ablation with applies false is not drawn,
and the user errors (exit 2, the file and the problem in the message, no traceback).
usage: test_task_heatmap.py   (from anywhere; ~5 s)"""
import json
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (ctest runs from it)
from study_test_util import REPO, check, check_help, read_png, run_tool as run_tools_script  # noqa: E402

TOOL = REPO / "tools" / "task_heatmap.py"
LENGTHS = [256, 1024, 4096]
DEPTHS = [0.0, 0.33, 0.67, 1.0]
WINDOW = 64
RESERVE = 40  # what the fact, question and answer take, as TaskGenerator::grid_spec leaves out


def cell(length, depth, accuracy, nats, n=8):
    distance = round((1 - depth) * (length - RESERVE))
    return {"length": length, "depth": depth, "distance_tokens": distance, "distance_windows": distance / WINDOW,
            "accuracy": accuracy, "answer_nats": nats, "n": n}


def fabricate(work):
    # Accuracy falls with the distance; the longest length at depth 0 is left out (not run).
    cells = [cell(n, d, max(0.0, 1.0 - (1 - d) * n / 5000), 0.1 + (1 - d) * n / 2000)
             for n in LENGTHS for d in DEPTHS if not (n == 4096 and d == 0.0)]
    ablated = [dict(c, accuracy=0.125, answer_nats=2.1) for c in cells]
    doc = {"task": "passkey", "digits": 5, "split": "test", "checkpoint": "runs/x/ckpt-00000600.h5",
           "seq_len": 256, "window": WINDOW, "trained_seq_len": 256, "samples_per_cell": 8, "seed": 1,
           "cells": cells, "accuracy": 0.7, "answer_nats": 0.5,
           "ablations": [{"mode": "segment", "applies": False, "cells": cells},
                         {"mode": "block", "applies": True, "cells": ablated}]}
    path = work / "eval-passkey.json"
    path.write_text(json.dumps(doc, indent=1))
    return path, doc


def run_tool(*args):
    return run_tools_script(TOOL, *args)


def png_size(path):
    data = read_png(path, 2048)
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def main():
    with tempfile.TemporaryDirectory(prefix="task-heatmap-") as tmp:
        work = Path(tmp)
        path, doc = fabricate(work)

        # 1. both metrics, plain and block ablation panels (the segment one does not apply).
        png = work / "plots" / "passkey.png"
        out = run_tool(path, "--out", png)
        check(out.returncode == 0, f"exit {out.returncode}\n{out.stdout}{out.stderr}")
        w_both, h_both = png_size(png)
        check(f"wrote {png}" in out.stdout, out.stdout)
        lines = [l for l in out.stdout.splitlines() if l.startswith("task_heatmap: ")]
        check(len(lines) == 2 and "plain:" in lines[0] and "ablation: block:" in lines[1], f"summaries\n{out.stdout}")
        check("segment" not in out.stdout, f"an ablation with applies false was drawn\n{out.stdout}")
        # Length 256: depths 0, .33, .67, 1 -> accuracies 1 - (1-d)*256/5000, equal n.
        acc_256 = sum(1.0 - (1 - d) * 256 / 5000 for d in DEPTHS) / 4
        check(f"256: {100 * acc_256:.0f}%" in lines[0], lines[0])
        check("4096: " in lines[0] and "1024: " in lines[0], lines[0])
        check("256: 12% (2.100 nats)" in lines[1], lines[1])

        # 2. one metric, no ablations: one panel, shorter and narrower.
        doc_plain = dict(doc)
        del doc_plain["ablations"]
        plain = work / "plain.json"
        plain.write_text(json.dumps(doc_plain))
        png1 = work / "acc.png"
        out = run_tool(plain, "--out", png1, "--metric", "accuracy", "--title", "passkey, tiny")
        check(out.returncode == 0, f"exit {out.returncode}\n{out.stdout}{out.stderr}")
        w_one, h_one = png_size(png1)
        check(w_one < w_both and h_one < h_both, f"one panel {w_one}x{h_one} vs four {w_both}x{h_both}")

        # 3. user errors: exit 2, the file and the problem named, nothing drawn.
        bad = work / "bad.json"
        cases = [
            ("{not json", "not readable JSON"),
            (json.dumps({"cells": []}), "no cells"),
            (json.dumps({"cells": [{"length": 256, "depth": 0.5, "accuracy": 1.0, "n": 8}]}), "cells[0]: missing answer_nats"),
            (json.dumps({"cells": [cell(256, 0.5, 1.0, 0.1), cell(256, 0.5, 0.5, 0.2)]}), "a second cell for length 256"),
            (json.dumps({"cells": [dict(cell(256, 0.5, 1.0, 0.1), accuracy="high")]}), "'accuracy' is 'high'"),
        ]
        for text, message in cases:
            bad.write_text(text)
            out = run_tool(bad, "--out", work / "bad.png")
            check(out.returncode == 2 and str(bad) in out.stderr and message in out.stderr,
                  f"{message}: exit {out.returncode}\n{out.stderr}")
            check(not (work / "bad.png").exists(), "drawn despite the error")
        missing = work / "no-such.json"
        out = run_tool(missing, "--out", work / "bad.png")
        check(out.returncode == 2 and f"{missing}: no such file" in out.stderr, out.stderr)
        check_help(TOOL, "--metric")
    print(f"task_heatmap: 2 PNGs ({w_both}x{h_both}, {w_one}x{h_one}), summaries and errors as expected")
    print("PASS")


if __name__ == "__main__":
    main()
