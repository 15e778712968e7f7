"""The long-range task part of a fidelity study (tools/fidelity_study.py run --task,
docs/fidelity.md "Long-range tasks"): every model trains with task documents mixed into its
streams (`data.tasks.*`), then `brt-dist eval --task KIND` scores it over a grid of document
lengths x depths (with --ablate: the carried state reset at every block as well), and plain
`eval` measures test bits/token at longer segments (length generalisation). `collect` turns the
JSONs into task.md / task.csv (accuracy and answer loss by distance in windows, mean and spread
over seeds) and task-KIND.png. Uses only Debian's python3-numpy/-matplotlib."""
import csv
import json
import math
from pathlib import Path

import numpy as np

from fidelity_table import say, spread, warn
from study_common import StudyError

KINDS = ("passkey", "needle", "facts")
# Chance accuracy of an exact match (docs/evaluation.md "Scoring"), by kind.
CHANCE = {"passkey": 1 / 90000, "needle": 1 / 16, "facts": 1 / 12}


def parse_kinds(text):
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if not kinds or bad:
        raise StudyError(f"--task: '{(bad or [text])[0]}' is not one of {', '.join(KINDS)}")
    return kinds


def parse_ints(text, what):
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise StudyError(f"{what}: '{text}' is not a comma-separated list of integers") from None
    if not values or min(values) < 1:
        raise StudyError(f"{what}: every value must be at least 1 ('{text}')")
    return values


def add_arguments(r):
    """fidelity_study.py run's --task flags."""
    g = r.add_argument_group("long-range tasks (docs/fidelity.md \"Long-range tasks\")")
    g.add_argument("--task", metavar="KINDS", help="passkey,needle,facts: train with them mixed in and "
                   "evaluate each with eval --task")
    g.add_argument("--task-rate", type=float, default=0.5, help="data.tasks.rate: the share of each "
                   "stream's documents that are tasks [%(default)s]")
    g.add_argument("--task-distance", default="1,16", metavar="A,B", help="training distances between "
                   "fact and question, in windows W (data.tasks.min/max_distance) [%(default)s]")
    g.add_argument("--task-windows", default="2,4,8,16,32,64", metavar="LIST", help="eval document "
                   "lengths in windows W; depths 0 and 0.5 put the fact about L and L/2 back [%(default)s]")
    g.add_argument("--task-samples", type=int, default=8, help="documents per grid cell [%(default)s]")
    g.add_argument("--task-seq-lens", default="", metavar="LIST", help="also test bits/token at these "
                   "multiples of model.seq_len, e.g. 2,4,8 (length generalisation) [none]")


def overrides(args, window):
    """The training overrides that mix the tasks in (every model of the study, the same)."""
    if not args.task:
        return []
    span = parse_ints(args.task_distance, "--task-distance")
    lo, hi = span[0], span[-1]
    if lo > hi:
        raise StudyError(f"--task-distance: {lo} > {hi}")
    if not 0 < args.task_rate <= 1:
        raise StudyError(f"--task-rate: {args.task_rate} is not in (0, 1]")
    return [f"data.tasks.rate={args.task_rate}", f"data.tasks.kinds={args.task}",
            f"data.tasks.min_distance={lo * window}", f"data.tasks.max_distance={hi * window}"]


def plan(args, window):
    """What each trained run gets evaluated on: {file name: (eval arguments, segment length as a
    multiple of the trained model.seq_len or None)}."""
    if not args.task:
        return {}
    lengths = ",".join(str(w * window) for w in parse_ints(args.task_windows, "--task-windows"))
    if args.task_samples < 1:
        raise StudyError("--task-samples: must be at least 1")
    evals = {f"task-{k}.json": (["--task", k, "--lengths", lengths, "--depths", "0,0.5",
                                 "--samples", str(args.task_samples), "--split", "test"], None)
             for k in parse_kinds(args.task)}
    for m in parse_ints(args.task_seq_lens, "--task-seq-lens") if args.task_seq_lens else []:
        evals[f"eval-test-n{m}.json"] = (["--split", "test"], m)
    return evals


def run_evals(runner, ckpt, data, run_dir, evals, seq_len, tag):
    """The task and longer-segment evaluations of one run that are not there yet; True when all
    are. A task eval is tried with --ablate first (a variant the ablation does not cover: without)."""
    ok = True
    for name, (extra, mult) in evals.items():
        out = run_dir / name
        if out.is_file():
            continue
        extra = extra + ([f"model.seq_len={seq_len * mult}"] if mult else [])
        tmp, log = Path(str(out) + ".tmp"), run_dir / (out.stem + ".log")
        base = ["eval", "--checkpoint", ckpt, "--data", data, "--json", tmp, "--quiet", *extra]
        tries = [["--ablate"], []] if extra[0] == "--task" else [[]]
        for flags in tries:
            rc = runner.to_log(base + flags, log, 0, tag)
            if rc == 0 and tmp.is_file():
                tmp.replace(out)
                break
            warn(f"{tag}: eval {' '.join(map(str, extra[:2]))} {' '.join(flags)} failed (exit {rc}); "
                 f"see {log}")
        ok = ok and out.is_file()
    return ok


# ---------------------------------------------------------------- collect
def bucket(distance_windows):
    """The power of two of windows a distance is reported under (1, 2, 4, ... 64)."""
    return 2 ** max(0, round(math.log2(max(distance_windows, 1e-9))))


def run_cells(path, window=None):
    """{(pass, bucket): (accuracy, answer_nats, n)} of one eval --task JSON, pooled over cells;
    distances in `window`s (the study's W, so that xl's W = N does not move its buckets), else
    in the report's own."""
    try:
        rep = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise StudyError(f"{path}: not JSON ({e})") from None
    if "cells" not in rep:
        raise StudyError(f"{path}: no cells (not a brt-dist eval --task --json report?)")
    window = window or rep.get("window")
    out = {}
    passes = [("plain", rep["cells"])] + [(a["mode"], a["cells"]) for a in rep.get("ablations", [])
                                         if a.get("applies")]
    for name, cells in passes:
        for c in cells:
            dist = c["distance_tokens"] / window if window else c["distance_windows"]
            acc = out.setdefault((name, bucket(dist)), [0.0, 0.0, 0])
            acc[0] += c["accuracy"] * c["n"]
            acc[1] += c["answer_nats"] * c["n"]
            acc[2] += c["n"]
    return {k: (a / n, nats / n, n) for k, (a, nats, n) in out.items() if n}


def collect_tasks(study_dir):
    """[{model, kind, pass, bucket, acc: [per seed], nats: [...]}] and the length-generalisation
    rows [{model, seq_mult, bits: [per seed]}] of a study folder."""
    study = Path(study_dir)
    rows, lengths = {}, {}
    meta = study / "study.json"
    window = json.loads(meta.read_text()).get("task_window") if meta.is_file() else None
    for mdir in sorted((study / "runs").glob("*")):
        desc_path = mdir / "model.json"
        if not desc_path.is_file():
            continue
        name = json.loads(desc_path.read_text())["name"]
        for run in sorted(mdir.glob("seed-*")):
            for path in sorted(run.glob("task-*.json")):
                kind = path.stem[5:]
                for (p, b), (acc, nats, _) in run_cells(path, window).items():
                    r = rows.setdefault((name, kind, p, b), {"acc": [], "nats": []})
                    r["acc"].append(acc)
                    r["nats"].append(nats)
            for path in sorted(run.glob("eval-test-n*.json")):
                mult = int(path.stem.split("-n")[1])
                lengths.setdefault((name, mult), []).append(json.loads(path.read_text())["bits_per_token"])
            test = run / "eval-test.json"
            if test.is_file() and any(run.glob("eval-test-n*.json")):
                lengths.setdefault((name, 1), []).append(json.loads(test.read_text())["bits_per_token"])
    return rows, lengths


def fmt(values, how, digits=2):
    """mean ± std over seeds, or mean [min, max] (how = minmax); the mean alone for one seed."""
    st = spread(values)
    if st["n"] < 2:
        return f"{st['mean']:.{digits}f}"
    if how == "std":
        return f"{st['mean']:.{digits}f} ± {st['std']:.{digits}f}"
    return f"{st['mean']:.{digits}f} [{st['min']:.{digits}f}, {st['max']:.{digits}f}]"


def write_task_tables(rows, lengths, out_dir, how="std"):
    """task.csv (one row per model x kind x pass x distance, every seed) and task.md."""
    out = Path(out_dir)
    if not rows and not lengths:
        return []
    with open(out / "task.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "kind", "pass", "distance_windows", "seeds", "accuracy_mean", "accuracy_min",
                    "accuracy_max", "answer_nats_mean"])
        for (m, k, p, b), r in sorted(rows.items()):
            w.writerow([m, k, p, b, len(r["acc"]), f"{np.mean(r['acc']):.4f}", f"{min(r['acc']):.4f}",
                        f"{max(r['acc']):.4f}", f"{np.mean(r['nats']):.4f}"])
    models = list(dict.fromkeys(m for m, _, _, _ in rows))
    lines = []
    for kind in dict.fromkeys(k for _, k, _, _ in rows):
        buckets = sorted({b for (_, k, _, b) in rows if k == kind})
        lines += [f"### {kind}: exact-match accuracy by distance (windows W; chance {CHANCE[kind]:.3g})", "",
                  "| model | pass | " + " | ".join(f"{b} W" for b in buckets) + " |",
                  "|---|---|" + "---|" * len(buckets)]
        for m in models:
            for p in ("plain", "block", "segment"):
                cells = [rows.get((m, kind, p, b)) for b in buckets]
                if any(cells):
                    lines.append(f"| {m} | {p} | " + " | ".join(fmt(c["acc"], how) if c else "" for c in cells) + " |")
        lines.append("")
    if lengths:
        mults = sorted({x for _, x in lengths})
        lines += ["### Test bits/token at longer segments (× the trained model.seq_len)", "",
                  "| model | " + " | ".join(f"{x}N" for x in mults) + " |", "|---|" + "---|" * len(mults)]
        for m in dict.fromkeys(m for m, _ in lengths):
            lines.append(f"| {m} | " + " | ".join(fmt(lengths[(m, x)], how, 3) if (m, x) in lengths else ""
                                                 for x in mults) + " |")
        lines.append("")
    (out / "task.md").write_text("\n".join(lines))
    return ["task.csv", "task.md"]


def write_task_plots(rows, out_dir):
    """task-KIND.png: accuracy vs distance (log2 windows), one line per model, seeds' min-max shaded."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []
    for kind in dict.fromkeys(k for _, k, _, _ in rows):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for m in dict.fromkeys(m for m, k, _, _ in rows if k == kind):
            bs = sorted(b for (mm, k, p, b) in rows if mm == m and k == kind and p == "plain")
            acc = [rows[(m, kind, "plain", b)]["acc"] for b in bs]
            line, = ax.plot(bs, [np.mean(a) for a in acc], marker="o", label=m)
            ax.fill_between(bs, [min(a) for a in acc], [max(a) for a in acc], alpha=0.15, color=line.get_color())
        ax.axhline(CHANCE[kind], color="grey", ls=":", label="chance")
        ax.set_xscale("log", base=2)
        ax.set(xlabel="distance fact → question (windows W)", ylabel="exact-match accuracy",
               title=f"{kind}: accuracy by distance", ylim=(-0.02, 1.02))
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(Path(out_dir) / f"task-{kind}.png", dpi=110)
        plt.close(fig)
        written.append(f"task-{kind}.png")
    return written


def collect(study_dir, out_dir, how="std", plots=True):
    rows, lengths = collect_tasks(study_dir)
    written = write_task_tables(rows, lengths, out_dir, how)
    if plots and rows:
        written += write_task_plots(rows, out_dir)
    if written:
        say(f"tasks: {len({(m, k) for m, k, _, _ in rows})} model x kind pairs -> "
            + ", ".join(str(Path(out_dir) / w) for w in written))
    return written
