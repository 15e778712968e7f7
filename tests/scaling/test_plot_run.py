#!/usr/bin/python3
"""tools/plot_run.py on two hand-written runs (no brt-dist needed):
 - run "new" (a run folder): current records with tokens_seen and skipped_steps, eval events, a
   skip event whose loss printf wrote as `nan`, a rollback, a resumed step logged twice, a blank
   line and a garbled line (skipped with a warning naming file and line);
 - run "old" (a .jsonl path given directly): the older format, no tokens_seen, skipped_steps or
   eval events, and a higher loss.
Checks every expected PNG is a readable PNG, the summary lines, the notes for what cannot be
drawn, and the user errors (exit 2, the path in the message, no traceback).
usage: test_plot_run.py   (from anywhere; ~10 s)"""
import json
import math
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (ctest runs from it)
from study_test_util import REPO, check, check_help, read_png, run_tool as run_tools_script  # noqa: E402

TOOL = REPO / "tools" / "plot_run.py"
METRICS = ["loss", "val-bits", "lr", "grad-norm", "tokens-per-s", "mfu"]
TOKENS_PER_STEP = 1024


def train_line(step, loss, new_format=True):
    rec = {"event": "train", "step": step, "loss": loss, "bits_per_token": loss / math.log(2),
           "lr": 1e-3 * min(1.0, step / 50), "grad_norm": 0.2 + 1.0 / step, "tokens_per_s": 9000 + step,
           "gflops": 85.0, "mfu": 0.40 + step * 1e-4, "eta_s": 3.2}
    if new_format:
        rec.update(tokens_seen=step * TOKENS_PER_STEP, skipped_steps=1 if step > 120 else 0)
    return json.dumps(rec)


def write_runs(work):
    new = work / "new"
    new.mkdir()
    lines = [train_line(s, 8.0 * math.exp(-s / 100) + 2.0) for s in range(10, 301, 10)]
    lines.insert(5, "")  # blank: ignored silently
    lines.insert(9, '{"event":"train","step":95,"loss":')  # a line cut off by a killed job
    lines.insert(14, '{"event":"skip","step":121,"loss":nan,"grad_norm":-nan,"skipped_steps":1}')
    lines.insert(20, '{"event":"rollback","step":180,"rollbacks":1}')
    lines.append('{"event":"checkpoint","step":300,"seconds":0.1,"gb_per_s":1.5}')
    lines.append(train_line(300, 2.5))  # resumed and logged step 300 again: the later wins
    evals = {100: 6.1, 200: 5.4, 300: 5.6}
    lines += [json.dumps({"event": "eval", "step": s, "loss": b * math.log(2), "bits_per_token": b})
              for s, b in evals.items()]
    (new / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    garbled_line = 10  # the cut-off line, counting from 1 (after the blank one at index 5)
    old = work / "old.jsonl"
    old.write_text("\n".join(train_line(s, 9.0 * math.exp(-s / 150) + 3.0, new_format=False)
                             for s in range(10, 201, 10)) + "\n")
    return new, old, garbled_line, min(evals.values())


def run_tool(*args):
    return run_tools_script(TOOL, *args)


def check_png(path):
    return read_png(path, 1024)


def main():
    with tempfile.TemporaryDirectory(prefix="plot-run-") as tmp:
        work = Path(tmp)
        new, old, garbled_line, best = write_runs(work)

        # 1. both runs, both x axes (the default): 6 metrics x 2 axes.
        out_dir = work / "plots" / "nested"  # created by the tool
        out = run_tool(new, old, "--out", out_dir, "--smooth", "3")
        check(out.returncode == 0, f"exit {out.returncode}\n{out.stdout}{out.stderr}")
        expected = [out_dir / f"{m}-vs-{x}.png" for m in METRICS for x in ("step", "tokens")]
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.image as mpimg
        for png in expected:
            check_png(png)
            h, w = mpimg.imread(str(png)).shape[:2]
            check(w >= 600 and h >= 400, f"{png}: {w}x{h}")
            check(f"wrote {png}" in out.stdout, f"no 'wrote {png}' line in\n{out.stdout}")
        check(sorted(out_dir.iterdir()) == sorted(expected), f"unexpected files {sorted(out_dir.iterdir())}")
        check(f"{new / 'metrics.jsonl'}:{garbled_line}:" in out.stderr,
              f"no warning naming {new / 'metrics.jsonl'}:{garbled_line}\n{out.stderr}")
        check(out.stderr.count("warning:") == 1, f"only the cut-off line is garbled (nan is read)\n{out.stderr}")
        check("old: no tokens_seen" in out.stderr, f"no note that 'old' lacks tokens_seen\n{out.stderr}")
        lines = {l.split(":")[1].strip(): l for l in out.stdout.splitlines() if "wrote" not in l}
        check(set(lines) == {"new", "old"}, f"summary lines {out.stdout}")
        check("30 logged steps up to step 300" in lines["new"] and "last loss 2.5000" in lines["new"],
              f"summary of new (the later step-300 record wins): {lines['new']}")
        check(f"best validation {best:.4f} bits/token (step 200)" in lines["new"], lines["new"])
        check("1 skipped step," in lines["new"] and "1 rollback" in lines["new"], lines["new"])
        check("20 logged steps up to step 200" in lines["old"] and "no validation" in lines["old"], lines["old"])

        # 2. only the old run, steps only, --names: no eval anywhere -> a note, no val-bits plot.
        out_dir2 = work / "plots2"
        out = run_tool(old, "--out", out_dir2, "--x", "step", "--names", "baseline")
        check(out.returncode == 0, f"exit {out.returncode}\n{out.stdout}{out.stderr}")
        expected2 = [out_dir2 / f"{m}-vs-step.png" for m in METRICS if m != "val-bits"]
        for png in expected2:
            check_png(png)
        check(sorted(out_dir2.iterdir()) == sorted(expected2), f"files {sorted(out_dir2.iterdir())}")
        check("val-bits-vs-step.png not drawn" in out.stderr, f"no note on val-bits\n{out.stderr}")
        check("plot_run: baseline: 20 logged steps" in out.stdout, out.stdout)

        # 3. user errors: exit 2, the path in the message, nothing drawn.
        missing = work / "no-such-run"
        out = run_tool(new, missing, "--out", work / "plots3")
        check(out.returncode == 2 and str(missing) in out.stderr, f"missing run: exit {out.returncode}\n{out.stderr}")
        check(not (work / "plots3").exists(), "plots drawn despite the error")
        empty = work / "empty-run"
        empty.mkdir()
        out = run_tool(empty, "--out", work / "plots3")
        check(out.returncode == 2 and f"{empty}: no metrics.jsonl" in out.stderr,
              f"run folder without metrics.jsonl: exit {out.returncode}\n{out.stderr}")
        out = run_tool(new, old, "--out", work / "plots3", "--names", "just-one")
        check(out.returncode == 2 and "--names" in out.stderr, f"--names count: {out.returncode}\n{out.stderr}")
        check_help(TOOL, "--smooth")
    print(f"plot_run: {len(expected)} + {len(expected2)} PNGs, summaries, notes and errors as expected")
    print("PASS")


if __name__ == "__main__":
    main()
