#!/usr/bin/python3
"""Scaling studies for brt-dist: run or collect a sweep (sizes x layouts x models), then write a
table (sweep.csv, sweep.md) and paper-ready PNG plots (throughput, MFU, scaling efficiency, loss
versus tokens and versus compute). See docs/scaling-studies.md.

  scaling_study.py collect SWEEP_DIR [--out DIR] [--warmup-steps N]
  scaling_study.py run TABLE.tsv SWEEP_DIR --brt-dist PATH [--ranks-all N] [-- key=value ...]

A sweep folder holds one folder per run, as slurm/scaling-study.sbatch (or `run`) writes it:
metrics.jsonl (launch/train/metrics_log.cpp records), train.log (brt-dist's output), run.json (name,
config, overrides, ranks, dp, tp, model variant, parameters) or, from older scripts, run.txt.
Uses only Debian's python3-numpy and python3-matplotlib.
"""
import argparse
import csv
import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

from study_common import StudyError, si

# Columns of sweep.csv, in order, with the Markdown header and format of each.
COLUMNS = [
    ("name", "run", "{}"),
    ("model_variant", "variant", "{}"),
    ("params", "params", "si"),
    ("config", "config", "{}"),
    ("ranks", "ranks", "{}"),
    ("dp", "DP", "{}"),
    ("tp", "TP", "{}"),
    ("zero", "ZeRO", "{}"),
    ("global_batch_tokens", "batch tok", "{}"),
    ("steps", "steps", "{}"),
    ("tokens_per_s", "tok/s (median)", "{:,.0f}"),
    ("tokens_per_s_per_rank", "tok/s/rank", "{:,.0f}"),
    ("gflops", "GFLOP/s", "{:.4g}"),
    ("peak_gflops_per_rank", "peak GFLOP/s/rank", "{:.4g}"),
    ("mfu", "MFU", "{:.2%}"),
    ("scaling_efficiency", "scaling eff.", "{:.1%}"),
    ("baseline", "baseline run", "{}"),
    ("final_loss", "final loss", "{:.4f}"),
    ("final_eval_bits_per_token", "eval bits/tok", "{:.4f}"),
    ("tokens_seen", "tokens", "si"),
    ("train_flops_per_token", "FLOPs/tok", "{:.4g}"),
    ("compute_flops", "compute (FLOPs)", "{:.4g}"),
]
TEXT_COLUMNS = {"name", "model_variant", "config", "baseline"}
LAYOUT_PREFIXES = ("train.", "log.", "checkpoint.", "data.", "optim.")  # not the model's identity


# ---------------------------------------------------------------- reading one run folder
def read_metrics(path):
    """(train records by step, eval records by step) of a metrics JSONL. A resumed run appends
    to the same file and may log a step twice; the later record wins."""
    train, evals = {}, {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise StudyError(f"{path}:{lineno}: not JSON ({e})") from None
            if rec.get("event") == "train":
                train[int(rec["step"])] = rec
            elif rec.get("event") == "eval":
                evals[int(rec["step"])] = rec
    return [train[s] for s in sorted(train)], [evals[s] for s in sorted(evals)]


def read_run_txt(path):
    out = {}
    for line in Path(path).read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def parse_train_log(path):
    """What brt-dist prints about the run (launch/train/trainer.cpp), the last start's lines."""
    if not Path(path).is_file():
        return {}
    return parse_train_output(Path(path).read_text(errors="replace"))


def parse_train_output(text):
    """parse_train_log of brt-dist train's output as text (fidelity_study.py's probe)."""
    info = {}
    patterns = {
        "model_variant": (r"^brt-dist train: ([^,]+),", str),
        "params": (r"^parameters: (\d+) ", int),
        "dp_log": (r"^data parallel: (\d+) ranks x (\d+) streams", None),
        "zero": (r"ZeRO-1 (on|off)", lambda v: 1 if v == "on" else 0),
        "train_flops_per_token": (r"^FLOPs/token .*?: ([0-9.eE+-]+); peak", float),
        "peak_gflops_per_rank": (r"; peak ([0-9.eE+-]+) GFLOP/s", float),
        "streams_seq": (r"^data: (\d+) streams x (\d+) tokens per step", None),
    }
    for line in text.splitlines():
        for key, (pattern, convert) in patterns.items():
            m = re.search(pattern, line)
            if m:
                info[key] = m.groups() if convert is None else convert(m.group(1))
    return info


def describe_run(run_dir):
    """Name, config, overrides, ranks, dp, tp, model variant and parameters of a run folder:
    run.json if there is one, else run.txt; train.log fills in what either lacks."""
    run_dir = Path(run_dir)
    desc = {"name": run_dir.name, "overrides": [], "tp": 1}
    if (run_dir / "run.json").is_file():
        try:
            desc.update({k: v for k, v in json.loads((run_dir / "run.json").read_text()).items()
                         if v not in (None, "")})
        except json.JSONDecodeError as e:
            raise StudyError(f"{run_dir / 'run.json'}: not JSON ({e})") from None
    elif (run_dir / "run.txt").is_file():
        txt = read_run_txt(run_dir / "run.txt")
        desc.update({"name": txt.get("name", run_dir.name), "config": txt.get("config", "?"),
                     "overrides": txt.get("overrides", "").split()})
        if txt.get("ranks", "").isdigit():
            desc["ranks"] = int(txt["ranks"])
    log = parse_train_log(run_dir / "train.log")
    for key in ("model_variant", "params", "zero", "train_flops_per_token", "peak_gflops_per_rank"):
        if key in log and key not in desc:
            desc[key] = log[key]
    if "dp_log" in log:
        desc.setdefault("dp", int(log["dp_log"][0]))
    for word in desc["overrides"]:
        if word.startswith("train.tp="):
            desc["tp"] = int(word.split("=", 1)[1])
        if word.startswith("train.zero="):
            desc.setdefault("zero", int(word.split("=", 1)[1]))
    if "ranks" not in desc:
        desc["ranks"] = desc.get("dp", 1) * desc["tp"]
    desc.setdefault("dp", desc["ranks"] // desc["tp"])
    desc.setdefault("zero", 0)
    desc.setdefault("config", "?")
    desc.setdefault("model_variant", "?")
    if "streams_seq" in log:
        streams, seq = (int(v) for v in log["streams_seq"])
        desc["global_batch_tokens"] = streams * seq * desc["dp"]
    return desc


def model_group(desc):
    """Runs of the same model (config file + model.* overrides) share a scaling baseline;
    layout keys (train.*, ...) and the rank count do not change the model."""
    last_value = {}
    for word in desc["overrides"]:  # a later key=value overrides an earlier one, as in brt-dist
        key, _, value = word.partition("=")
        if not key.startswith(LAYOUT_PREFIXES):
            last_value[key] = value
    return " ".join([desc["config"]] + [f"{k}={v}" for k, v in sorted(last_value.items())])


def summarize_run(run_dir, warmup_steps=None):
    """One table row (plus the loss curve) of a run folder; None if it logged no train step."""
    run_dir = Path(run_dir)
    metrics = run_dir / "metrics.jsonl"
    if not metrics.is_file():
        raise StudyError(f"{run_dir}: no metrics.jsonl")
    train, evals = read_metrics(metrics)
    if not train:
        return None
    desc = describe_run(run_dir)
    last = train[-1]
    # Warm-up: the first steps (allocation, BLAS start-up, a resume) are slow; by default skip
    # the first 10% of the run (at least step 1) when taking the median throughput.
    skip = warmup_steps if warmup_steps is not None else max(1, int(0.1 * last["step"]))
    steady = [r for r in train if r["step"] > skip] or train
    tps = float(np.median([r["tokens_per_s"] for r in steady]))
    gflops = float(np.median([r["gflops"] for r in steady]))
    # Training FLOPs/token (model.md §10): printed by brt-dist, else gflops / tokens_per_s.
    flops_per_token = desc.get("train_flops_per_token") or last["gflops"] * 1e9 / last["tokens_per_s"]
    # Peak per rank: printed by brt-dist, else from the logged MFU (gflops / peak).
    # (brt-dist's logged MFU divides the job's rate by ranks x peak per rank.)
    peak = desc.get("peak_gflops_per_rank") or (
        last["gflops"] / last["mfu"] / desc["ranks"] if last["mfu"] else math.nan)
    if "global_batch_tokens" not in desc and len(train) >= 2:
        a, b = train[-2], train[-1]
        desc["global_batch_tokens"] = (b["tokens_seen"] - a["tokens_seen"]) // (b["step"] - a["step"])
    row = dict(desc)
    row.update({
        "steps": last["step"],
        "tokens_per_s": tps,
        "tokens_per_s_per_rank": tps / desc["ranks"],
        "gflops": gflops,
        "peak_gflops_per_rank": peak,
        # MFU of the whole job: achieved FLOP/s over every rank's peak.
        "mfu": gflops / (peak * desc["ranks"]),
        "final_loss": last["loss"],
        "final_eval_bits_per_token": evals[-1]["bits_per_token"] if evals else None,
        "tokens_seen": last["tokens_seen"],
        "train_flops_per_token": flops_per_token,
        "compute_flops": last["tokens_seen"] * flops_per_token,
        "group": model_group(desc),
        "curve_tokens": [r["tokens_seen"] for r in train],
        "curve_loss": [r["loss"] for r in train],
        "eval_tokens": [e["step"] * row_tokens_per_step(train) for e in evals],
        "eval_loss": [e["loss"] for e in evals],
    })
    return row


def row_tokens_per_step(train):
    r = train[-1]
    return r["tokens_seen"] / r["step"]


def add_scaling_efficiency(rows):
    """Per model group: (tokens/s per rank) / (the smallest-rank run's tokens/s per rank)."""
    for group in {r["group"] for r in rows}:
        members = [r for r in rows if r["group"] == group]
        base = min(members, key=lambda r: (r["ranks"], -r["tokens_per_s"]))
        for r in members:
            r["scaling_efficiency"] = r["tokens_per_s_per_rank"] / base["tokens_per_s_per_rank"]
            r["baseline"] = base["name"]


def collect(sweep_dir, warmup_steps=None):
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise StudyError(f"{sweep_dir}: no such sweep folder")
    rows, skipped = [], []
    for run_dir in sorted(p for p in sweep_dir.iterdir() if p.is_dir()):
        row = summarize_run(run_dir, warmup_steps) if (run_dir / "metrics.jsonl").is_file() else None
        if row is None:  # not a run, or one that died before its first step
            skipped.append(run_dir.name)
            continue
        rows.append(row)
    if not rows:
        raise StudyError(f"{sweep_dir}: no run folder with train records in a metrics.jsonl")
    for name in skipped:
        print(f"scaling_study: skipping {sweep_dir / name} (no train records in metrics.jsonl)",
              file=sys.stderr)
    add_scaling_efficiency(rows)
    rows.sort(key=lambda r: (r.get("params") or 0, r["group"], r["ranks"], r["name"]))
    return rows


# ---------------------------------------------------------------- tables
def cell(row, key, fmt):
    v = row.get(key)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return si(v) if fmt == "si" else fmt.format(v)


def write_tables(rows, out_dir):
    out_dir = Path(out_dir)
    with open(out_dir / "sweep.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([c[0] for c in COLUMNS])
        for r in rows:
            w.writerow(["" if r.get(k) is None else (repr(r[k]) if isinstance(r[k], float) else r[k])
                        for k, _, _ in COLUMNS])
    with open(out_dir / "sweep.md", "w") as f:
        f.write("| " + " | ".join(c[1] for c in COLUMNS) + " |\n")
        f.write("|" + "|".join("---" if c[0] in TEXT_COLUMNS else "---:" for c in COLUMNS) + "|\n")
        for r in rows:
            f.write("| " + " | ".join(cell(r, k, fmt).replace("|", "\\|") for k, _, fmt in COLUMNS) + " |\n")
        f.write("\nMedian throughput after warm-up; MFU = achieved FLOP/s / (ranks x peak per rank); "
                "scaling efficiency = tokens/s per rank / that of the baseline run (fewest ranks, "
                "same model); compute = tokens seen x training FLOPs/token (model.md §10).\n")


# ---------------------------------------------------------------- run mode
def read_table(path):
    """Rows of a study table (slurm/scaling-study.tsv): NAME CONFIG RANKS [OVERRIDES...]."""
    rows = []
    for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        words = line.split()
        if len(words) < 3 or not words[2].isdigit():
            raise StudyError(f"{path}:{lineno}: expected NAME CONFIG RANKS [key=value ...], got '{line}'")
        rows.append({"name": words[0], "config": words[1], "ranks": int(words[2]), "overrides": words[3:]})
    names = [r["name"] for r in rows]
    if len(set(names)) != len(names):
        raise StudyError(f"{path}: run names must be unique")
    return rows


def launch_env(threads=None):
    """The environment brt-dist runs in: mpirun allowed as root (containers), and with threads
    OMP_NUM_THREADS/OPENBLAS_NUM_THREADS per rank. Shared with fidelity_study.py."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    return env


def run_sweep(table, sweep_dir, brt_dist, mpirun="mpirun", ranks_all=None, extra=(), threads=None,
              mpirun_args=("--oversubscribe",)):
    sweep_dir = Path(sweep_dir)
    ranks_all = ranks_all or os.cpu_count() or 1
    env = launch_env(threads)
    failed = []
    for row in read_table(table):
        ranks = row["ranks"] or ranks_all
        run_dir = sweep_dir / row["name"]
        (run_dir / "ckpt").mkdir(parents=True, exist_ok=True)
        overrides = row["overrides"] + list(extra)
        cmd = [mpirun, *mpirun_args, "-np", str(ranks), brt_dist, "train", row["config"], *overrides,
               f"log.metrics_path={run_dir / 'metrics.jsonl'}", f"checkpoint.dir={run_dir / 'ckpt'}",
               "checkpoint.resume=true"]
        print(f"scaling_study: {row['name']}: {shlex.join(cmd)}", flush=True)
        with open(run_dir / "train.log", "a") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
        tp = next((int(w.split("=", 1)[1]) for w in overrides if w.startswith("train.tp=")), 1)
        info = parse_train_log(run_dir / "train.log")
        (run_dir / "run.json").write_text(json.dumps({
            "name": row["name"], "config": row["config"], "overrides": overrides, "ranks": ranks,
            "dp": ranks // tp, "tp": tp, "threads_per_rank": int(env.get("OMP_NUM_THREADS", 0) or 0),
            "model_variant": info.get("model_variant"), "params": info.get("params"),
            "launcher": "mpirun", "status": rc}) + "\n")
        if rc != 0:
            failed.append(row["name"])
            print(f"scaling_study: {row['name']} failed (exit {rc}); see {run_dir / 'train.log'}",
                  file=sys.stderr)
    return failed


# ---------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("collect", help="tables and plots from a sweep folder")
    c.add_argument("sweep_dir")
    r = sub.add_parser("run", help="run a study table locally with mpirun, then collect")
    r.add_argument("table", help="study table (slurm/scaling-study.tsv format)")
    r.add_argument("sweep_dir")
    r.add_argument("--brt-dist", default=os.environ.get("BRT_DIST", "brt-dist"))
    r.add_argument("--mpirun", default="mpirun")
    r.add_argument("--mpirun-args", default="--oversubscribe",
                   help="options for mpirun before -np, one string [%(default)s]")
    r.add_argument("--ranks-all", type=int, help="ranks for rows with RANKS 0 [CPU count]")
    r.add_argument("--threads", type=int, help="OMP/BLAS threads per rank")
    for p in (c, r):
        p.add_argument("--out", help="where sweep.csv, sweep.md and the PNGs go [SWEEP_DIR]")
        p.add_argument("--warmup-steps", type=int, help="steps left out of the median throughput "
                       "[10%% of the run, at least 1]")
        p.add_argument("--no-plots", action="store_true")
    ap.epilog = "run ... -- key=value ...: overrides added to every row of the table"
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    try:
        failed = []
        if args.mode == "run":
            failed = run_sweep(args.table, args.sweep_dir, args.brt_dist, args.mpirun,
                               args.ranks_all, extra, args.threads,
                               shlex.split(args.mpirun_args))
        rows = collect(args.sweep_dir, args.warmup_steps)
        out = Path(args.out or args.sweep_dir)
        out.mkdir(parents=True, exist_ok=True)
        write_tables(rows, out)
        written = ["sweep.csv", "sweep.md"]
        if not args.no_plots:
            from scaling_plots import write_plots  # matplotlib only when plotting
            written += write_plots(rows, out)
        print(f"scaling_study: {len(rows)} runs -> " + ", ".join(str(out / w) for w in written))
        return 1 if failed else 0
    except StudyError as e:
        print(f"scaling_study: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree (ctest runs from it)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
