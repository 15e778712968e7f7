#!/usr/bin/python3
"""Training curves of one or more brt-dist runs as PNGs, every run overlaid on the same axes so
two runs compare at a glance: loss (with bits/token on the right axis), validation bits/token,
learning rate, gradient norm, tokens/s and MFU, each against steps and against tokens seen.
See docs/scaling-studies.md ("Curves of a run").

  plot_run.py RUN... --out DIR [--x step|tokens|both] [--names A,B,...] [--smooth N]

RUN is a run folder holding metrics.jsonl (slurm/train.sbatch, tools/scaling_study.py) or a
metrics JSONL file itself (launch/train/metrics_log.cpp records). Each run id in it is its own
curve (every record carries its "run_id"; a folder's earlier runs, moved aside as
metrics.<run id>.jsonl, are drawn too), so runs that shared a folder are never spliced into one. Writes DIR/METRIC-vs-step.png and
DIR/METRIC-vs-tokens.png, then one summary line per run. Skipped steps are drawn as dotted and
rollbacks as dashed vertical lines in the run's colour. Uses only Debian's python3-numpy and
python3-matplotlib.
"""
import argparse
import math
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (ctest runs from it)
sys.path.insert(0, str(Path(__file__).resolve().parent))  # metrics_records, scaling_plots, scaling_study

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from metrics_records import number  # noqa: E402  (shared with fidelity_study.py)
from metrics_records import read_run as read_records  # noqa: E402
from metrics_records import run_files, run_ids  # noqa: E402
from scaling_plots import DPI, FIGSIZE, STYLE  # noqa: E402  (same look as the sweep plots)
from study_common import si  # noqa: E402

LN2 = math.log(2.0)
# (file stem, event, key, y label, title, y scale, smooth?) per plot. The learning rate is a
# schedule, not a noisy measurement, so it is never smoothed; eval points are sparse.
PLOTS = [
    ("loss", "train", "loss", "training loss (nats/token)", "Training loss", "linear", True),
    ("val-bits", "eval", "bits_per_token", "validation bits/token", "Validation bits/token", "linear", False),
    ("lr", "train", "lr", "learning rate", "Learning rate", "linear", False),
    ("grad-norm", "train", "grad_norm", "gradient norm", "Gradient norm", "auto", True),
    ("tokens-per-s", "train", "tokens_per_s", "throughput (tokens/s)", "Training throughput", "linear", True),
    ("mfu", "train", "mfu", "MFU (% of peak, as logged)", "Model FLOP utilisation", "linear", True),
]
XAXES = {"step": "optimizer step", "tokens": "tokens seen"}


class PlotError(RuntimeError):
    """A RUN argument that cannot be used; the message names the path."""


def warn(msg):
    print(f"plot_run: {msg}", file=sys.stderr)


def plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


# ---------------------------------------------------------------- reading runs
def metrics_file(run):
    path = Path(run)
    if path.is_dir():
        if not (path / "metrics.jsonl").is_file():
            raise PlotError(f"{path}: no metrics.jsonl in this run folder")
        return path / "metrics.jsonl"
    if path.is_file():
        return path
    raise PlotError(f"{path}: no such run folder or metrics file")


def default_name(run):
    path = Path(run).resolve()
    if path.is_file():  # RUN_DIR/metrics.jsonl is named after its folder, other files by stem
        return path.parent.name if path.name == "metrics.jsonl" else path.stem
    return path.name


def read_run(path, run_id=None):
    """metrics_records.read_run with its warnings printed as plot_run's."""
    return read_records(path, warn=warn, run_id=run_id)


def expand(arg, name):
    """(name, path, run id) of every run in one RUN argument: each file of a run folder, each run
    id in a file; the name gets the run id when the argument holds more than one run."""
    path = Path(arg)
    files = run_files(path) if path.is_dir() else [metrics_file(arg)]
    if not files:
        raise PlotError(f"{path}: no metrics.jsonl in this run folder")
    runs = [(f, rid) for f in files for rid in run_ids(f)]
    if len(runs) == 1:
        return [(name, runs[0][0], runs[0][1])]
    return [(f"{name} {rid or f.stem}", f, rid) for f, rid in runs]


def tokens_of_steps(train):
    """A function step -> tokens seen from the train records that have tokens_seen, or None
    when there are none (files from before tokens_seen was logged). Eval, skip and rollback
    events carry only a step; they are placed by interpolation, and past the last train record
    by its tokens per step."""
    pts = [(r["step"], r["tokens_seen"]) for r in train if number(r.get("tokens_seen"))]
    if not pts:
        return None
    steps = np.array([0.0] + [p[0] for p in pts])
    tokens = np.array([0.0] + [p[1] for p in pts])
    per_step = tokens[-1] / steps[-1] if steps[-1] > 0 else 0.0

    def at(s):
        s = np.asarray(s, dtype=float)
        return np.where(s <= steps[-1], np.interp(s, steps, tokens), s * per_step)
    return at


def series(run, event, key, x):
    """(x, y) arrays of one metric of a run, only records that have it (older files lack some
    keys); None when the run has no such point or no way to place it on this x axis."""
    recs = [r for r in run[event] if number(r.get(key))]
    if event == "eval" and key == "bits_per_token":  # an eval record with only a loss in nats
        recs = [r for r in run[event] if number(r.get(key)) or number(r.get("loss"))]
    if not recs:
        return None
    y = np.array([r[key] if number(r.get(key)) else r["loss"] / LN2 for r in recs], dtype=float)
    steps = np.array([r["step"] for r in recs], dtype=float)
    if x == "step":
        return steps, y
    if event == "train":
        keep = [i for i, r in enumerate(recs) if number(r.get("tokens_seen"))]
        if not keep:
            return None
        return np.array([recs[i]["tokens_seen"] for i in keep], dtype=float), y[keep]
    to_tokens = run["to_tokens"]
    return (to_tokens(steps), y) if to_tokens else None


def smooth(y, n):
    """Trailing mean over the last n logged points (fewer at the start), NaNs ignored, so a
    smoothed curve never runs ahead of the data."""
    if n <= 1 or len(y) < 2:
        return y
    ok = np.isfinite(y)
    sums = np.cumsum(np.where(ok, y, 0.0))
    counts = np.cumsum(ok)
    lo = np.maximum(np.arange(len(y)) - n, -1)
    win_sum = sums - np.where(lo >= 0, sums[np.maximum(lo, 0)], 0.0)
    win_cnt = counts - np.where(lo >= 0, counts[np.maximum(lo, 0)], 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(win_cnt > 0, win_sum / np.maximum(win_cnt, 1), np.nan)


# ---------------------------------------------------------------- drawing
def draw(runs, spec, x, path, smooth_n):
    """One PNG of one metric against one x axis; False (nothing written) when no run has it."""
    stem, event, key, ylabel, title, yscale, smoothable = spec
    curves = [(i, run, series(run, event, key, x)) for i, run in enumerate(runs)]
    curves = [(i, run, xy) for i, run, xy in curves if xy is not None]
    if not curves:
        return False
    scale = 100.0 if key == "mfu" else 1.0
    fig, ax = plt.subplots(figsize=FIGSIZE)
    marked = set()
    for i, run, (xs, ys) in curves:
        color, ys = f"C{i % 10}", ys * scale
        if event == "eval":
            ax.plot(xs, ys, "s-", color=color, markersize=3, label=run["name"])
        elif smoothable and smooth_n > 1:
            ax.plot(xs, ys, "-", color=color, alpha=0.25, linewidth=0.8)  # raw, faint, behind
            ax.plot(xs, smooth(ys, smooth_n), "-", color=color, label=run["name"])
        else:
            ax.plot(xs, ys, "-", color=color, label=run["name"])
        for kind, style in (("skips", ":"), ("rollbacks", "--")):
            steps = np.array(run[kind], dtype=float)
            if not len(steps):
                continue
            where = steps if x == "step" else (run["to_tokens"](steps) if run["to_tokens"] else None)
            if where is None:
                continue
            for v in where:
                ax.axvline(v, color=color, linestyle=style, linewidth=0.7, alpha=0.6)
            marked.add(kind)
    if "skips" in marked:
        ax.plot([], [], "k:", linewidth=0.7, alpha=0.6, label="skipped step")
    if "rollbacks" in marked:
        ax.plot([], [], "k--", linewidth=0.7, alpha=0.6, label="rollback")
    if yscale == "auto":  # gradient norms can span decades (a spike, then a quiet run)
        pos = np.concatenate([xy[1][np.isfinite(xy[1]) & (xy[1] > 0)] for _, _, xy in curves])
        if len(pos) and pos.max() / pos.min() > 100:
            ax.set_yscale("log")
    if key == "loss":  # bits/token is loss / ln 2: the same curve, read on the right axis
        sec = ax.secondary_yaxis("right", functions=(lambda v: v / LN2, lambda b: b * LN2))
        sec.set_ylabel("bits/token")
    if x == "tokens":
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: si(v) if v else "0"))
    ax.set_xlabel(XAXES[x])
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title} vs {'steps' if x == 'step' else 'tokens'}")
    ax.legend(loc="best", ncol=2 if len(curves) > 6 else 1)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return True


def write_plots(runs, out_dir, xs, smooth_n):
    """Every plot for every x axis; returns the paths written. Notes on stderr say which plots
    no run had data for, and which runs are missing from the vs-tokens plots."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with plt.rc_context(STYLE):
        for spec in PLOTS:
            for x in xs:
                path = out_dir / f"{spec[0]}-vs-{x}.png"
                if draw(runs, spec, x, path, smooth_n):
                    written.append(path)
                    print(f"plot_run: wrote {path}", flush=True)
                else:
                    what = "eval records" if spec[1] == "eval" else f"\"{spec[2]}\" values"
                    why = " with tokens seen" if x == "tokens" and any(
                        series(r, spec[1], spec[2], "step") for r in runs) else ""
                    warn(f"note: no run has {what}{why}; {path.name} not drawn")
    if "tokens" in xs:
        for r in runs:
            if r["train"] and not r["to_tokens"]:
                warn(f"note: {r['name']}: no tokens_seen in {r['path']} (older format); "
                     "left out of the vs-tokens plots")
    return written


def summary(run):
    train, evals = run["train"], run["eval"]
    if not train and not evals:
        return f"plot_run: {run['name']}: no train or eval records in {run['path']}"
    parts = []
    if train:
        last = train[-1]
        parts.append(f"{plural(len(train), 'logged step')} up to step {last['step']}")
        if number(last.get("tokens_seen")):
            parts.append(f"{si(last['tokens_seen'])} tokens")
        if number(last.get("loss")):
            parts.append(f"last loss {last['loss']:.4f} ({last['loss'] / LN2:.4f} bits/token)")
    xy = series(run, "eval", "bits_per_token", "step")
    vals = [(v, int(s)) for s, v in zip(*xy) if math.isfinite(v)] if xy else []
    if vals:
        best, at = min(vals)
        parts.append(f"best validation {best:.4f} bits/token (step {at})")
    else:
        parts.append("no validation")
    if run["skips"]:
        parts.append(plural(len(run["skips"]), "skipped step"))
    if run["rollbacks"]:
        parts.append(plural(len(run["rollbacks"]), "rollback"))
    return f"plot_run: {run['name']}: " + ", ".join(parts)


# ---------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("runs", nargs="+", metavar="RUN", help="run folder (with metrics.jsonl) or metrics JSONL file")
    ap.add_argument("--out", required=True, metavar="DIR", help="where the PNGs go (created if needed)")
    ap.add_argument("--x", choices=["step", "tokens", "both"], default="both",
                    help="x axis: optimizer steps, tokens seen, or a file for each [%(default)s]")
    ap.add_argument("--names", help="legend names, comma-separated, one per RUN [folder names]")
    ap.add_argument("--smooth", type=int, default=1, metavar="N",
                    help="trailing mean over N logged points for noisy curves; raw drawn faint [off]")
    args = ap.parse_args(argv)
    if args.smooth < 1:
        ap.error("--smooth must be at least 1")
    names = args.names.split(",") if args.names else None
    if names is not None and len(names) != len(args.runs):
        ap.error(f"--names has {len(names)} names for {len(args.runs)} runs")
    if names is None:
        names = [default_name(r) for r in args.runs]
        if len(set(names)) < len(names):  # e.g. a/run and b/run: the paths tell them apart
            names = [str(r) for r in args.runs]
    try:
        found = [run for arg, name in zip(args.runs, names) for run in expand(arg, name)]
    except PlotError as e:
        print(f"plot_run: error: {e}", file=sys.stderr)
        return 2
    paths = sorted({str(path) for _, path, _ in found})
    runs = []
    for name, path, rid in found:
        run = read_run(path, rid)
        run.update(name=name, path=path, run_id=rid, to_tokens=tokens_of_steps(run["train"]))
        runs.append(run)
    if not any(r["train"] or r["eval"] for r in runs):
        print("plot_run: error: no train or eval records in " + ", ".join(map(str, paths)), file=sys.stderr)
        return 2
    xs = ["step", "tokens"] if args.x == "both" else [args.x]
    try:
        write_plots(runs, Path(args.out), xs, args.smooth)
    except OSError as e:
        print(f"plot_run: error: cannot write plots to {args.out}: {e}", file=sys.stderr)
        return 2
    for run in runs:
        print(summary(run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
