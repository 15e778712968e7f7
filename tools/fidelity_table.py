"""The tables of a fidelity study (tools/fidelity_study.py, docs/fidelity.md): each model x
seed's numbers from its metrics JSONL and eval JSONs, their mean and spread over seeds, and
fidelity.csv, fidelity.md, fidelity_runs.csv. Uses only Debian's python3-numpy."""
import csv
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

from metrics_records import number, read_run
from study_common import StudyError, si

LN2 = math.log(2.0)
TOOL = "fidelity_study"
# Long-range classes of `eval --json` (distance to the previous occurrence of the same token in
# the document): the order of the table's columns and plot's bars.
LONG_RANGE = [("first", "first"), ("within_w", "≤ W"), ("within_wl", "(W, W·L]"), ("beyond_wl", "> W·L")]
SPLITS = [("validation", "val"), ("test", "test")]


def say(msg):
    print(f"{TOOL}: {msg}", flush=True)


def warn(msg):
    print(f"{TOOL}: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- collect: one run's numbers
def bucket_label(begin, end):
    def n(v):
        if v >= 1 << 20 and v % (1 << 20) == 0:
            return f"{v >> 20}M"
        if v >= 1024 and v % 1024 == 0:
            return f"{v >> 10}k"
        return str(v)
    return f"{n(begin)}+" if end is None or end < 0 else f"{n(begin)}-{n(end)}"


def bits(entry):
    """bits/token of a bucket or class; None when it holds no token."""
    if not isinstance(entry, dict) or not number(entry.get("bits_per_token")):
        return None
    if number(entry.get("tokens")) and entry["tokens"] <= 0:
        return None
    return float(entry["bits_per_token"])


def run_values(run_dir, desc, train_tail):
    """The numbers of one model x seed (an ordered dict; absent ones are left out) and the
    split the diagnostics come from."""
    v = {}
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        train = [r for r in read_run(metrics, warn=warn)["train"] if number(r.get("loss"))]
        if train:
            last = train[-1]
            tail = [r for r in train if r["step"] > last["step"] * (1 - train_tail)] or [last]
            v["train_bits"] = float(np.mean([r["loss"] for r in tail])) / LN2
            v["steps"] = last["step"]
            if number(last.get("tokens_seen")):
                v["tokens"] = last["tokens_seen"]
                if number(desc.get("flops_per_token")):
                    v["compute_flops"] = last["tokens_seen"] * desc["flops_per_token"]
    reports = {}
    for split, short in SPLITS:
        path = run_dir / f"eval-{split}.json"
        if not path.is_file():
            continue
        try:
            rep = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise StudyError(f"{path}: not JSON ({e})") from None
        if not number(rep.get("bits_per_token")):
            raise StudyError(f"{path}: no bits_per_token (not a brt-dist eval --json report?)")
        reports[split] = rep
        v[f"{short}_bits"] = float(rep["bits_per_token"])
        if number(rep.get("bits_per_byte")):
            v[f"{short}_bits_per_byte"] = float(rep["bits_per_byte"])
    diag = "test" if "test" in reports else ("validation" if reports else None)
    if diag:
        rep = reports[diag]
        for b in rep.get("position_buckets") or []:
            v[f"pos_{bucket_label(b['begin'], b['end'])}_bits"] = bits(b)
        base_lr = {c.get("name"): bits(c) for c in rep.get("long_range") or []}
        for name, value in base_lr.items():
            v[f"range_{name}_bits"] = value
        for a in rep.get("ablation") or []:
            mode = a.get("mode", "?")
            applies = a.get("applies", True) is not False
            delta = a.get("delta_bits_per_token")
            if not number(delta) and number(a.get("bits_per_token")):
                delta = a["bits_per_token"] - rep["bits_per_token"]
            v[f"ablate_{mode}_delta_bits"] = float(delta) if applies and number(delta) else None
            for c in a.get("long_range") or []:
                ab, b0 = bits(c), base_lr.get(c.get("name"))
                v[f"ablate_{mode}_{c.get('name')}_delta_bits"] = (
                    ab - b0 if applies and ab is not None and b0 is not None else None)
        for layer in rep.get("layers") or []:
            i = layer.get("layer", "?")
            for gate in ("gate", "gate2"):
                g = layer.get(gate)
                if isinstance(g, dict) and number(g.get("mean")):
                    v[f"layer{i}_{gate}_mean"] = float(g["mean"])
            if number(layer.get("state_share")):
                v[f"layer{i}_state_share"] = float(layer["state_share"])
    return v, diag


def spread(values):
    """mean, sample standard deviation (n - 1; None for one value), min, max and n of the
    values that exist."""
    vals = [float(x) for x in values if number(x) and math.isfinite(x)]
    if not vals:
        return {"mean": None, "std": None, "min": None, "max": None, "n": 0}
    return {"mean": float(np.mean(vals)), "std": float(np.std(vals, ddof=1)) if len(vals) > 1 else None,
            "min": min(vals), "max": max(vals), "n": len(vals)}


def metric_order(key):
    """Columns in a stable order: losses, positions by start, long-range classes, ablations,
    layers, then anything else."""
    fixed = ["steps", "tokens", "compute_flops", "train_bits", "val_bits", "test_bits",
             "val_bits_per_byte", "test_bits_per_byte"]
    if key in fixed:
        return (0, fixed.index(key), 0, key)
    lr_names = [n for n, _ in LONG_RANGE]
    m = re.fullmatch(r"pos_(\d+)([kM]?)[-+].*", key)
    if m:
        return (1, int(m.group(1)) * {"": 1, "k": 1024, "M": 1 << 20}[m.group(2)], 0, key)
    m = re.fullmatch(r"range_(.+)_bits", key)
    if m:
        return (2, lr_names.index(m.group(1)) if m.group(1) in lr_names else 99, 0, key)
    m = re.fullmatch(r"ablate_([a-z]+)_(?:(.+)_)?delta_bits", key)
    if m:
        sub = m.group(2)
        return (3, {"segment": 0, "block": 1}.get(m.group(1), 9),
                -1 if sub is None else (lr_names.index(sub) if sub in lr_names else 99), key)
    m = re.fullmatch(r"layer(\d+)_(.+)", key)
    if m:
        return (4, int(m.group(1)), {"gate_mean": 0, "gate2_mean": 1, "state_share": 2}.get(m.group(2), 9), key)
    return (5, 0, 0, key)


def collect(study_dir, train_tail=0.1):
    """Models (in the study's order) with their runs' values and the spread over seeds."""
    study = Path(study_dir)
    runs_dir = study / "runs"
    if not runs_dir.is_dir():
        raise StudyError(f"{study}: no runs/ folder (not a fidelity study; see fidelity_study.py run)")
    order = []
    if (study / "study.json").is_file():
        try:
            order = json.loads((study / "study.json").read_text()).get("models", [])
        except json.JSONDecodeError as e:
            raise StudyError(f"{study / 'study.json'}: not JSON ({e})") from None
    models = []
    for mdir in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        mjson = mdir / "model.json"
        if not mjson.is_file():
            warn(f"note: skipping {mdir} (no model.json)")
            continue
        try:
            desc = json.loads(mjson.read_text())
        except json.JSONDecodeError as e:
            raise StudyError(f"{mjson}: not JSON ({e})") from None
        model = {"name": desc.get("name", mdir.name), "desc": desc, "runs": [], "failed": [], "dir": mdir}
        for rdir in sorted((p for p in mdir.glob("seed-*") if p.is_dir()),
                           key=lambda p: int(p.name[5:]) if p.name[5:].isdigit() else 0):
            run = json.loads((rdir / "run.json").read_text()) if (rdir / "run.json").is_file() else {}
            values, diag = run_values(rdir, desc, train_tail)
            seed = run.get("seed", rdir.name[5:])
            if not any(k.endswith("_bits") for k in values):  # failed, never started, or running
                if run.get("status") not in (None, "ok", "running"):
                    model["failed"].append({"seed": seed, "status": run["status"], "dir": rdir,
                                            "error": run.get("error")})
                continue
            model["runs"].append({"seed": seed, "status": run.get("status", "?"), "values": values,
                                  "diag_split": diag, "dir": rdir})
        models.append(model)
    if not models:
        raise StudyError(f"{runs_dir}: no model folder with a model.json")
    rank = {n: i for i, n in enumerate(order)}
    models.sort(key=lambda m: (rank.get(m["name"], len(rank)), m["name"]))
    keys = sorted({k for m in models for r in m["runs"] for k in r["values"]}, key=metric_order)
    for m in models:
        m["stats"] = {k: spread([r["values"].get(k) for r in m["runs"]]) for k in keys}
        m["diag_splits"] = sorted({r["diag_split"] for r in m["runs"] if r["diag_split"]})
    return models, keys


def best_rates(models, out_dir):
    """A study run with --lr-sweep: its models NAME@lr=R (model.json's sweep_of, lr) grouped by
    NAME; each group's rate of the lowest mean validation bits/token (test bits if no validation)
    stands for NAME in the tables, and fidelity_sweep.md lists every rate. Returns (models,
    files written); a study without a sweep comes back unchanged."""
    groups = {}
    for m in models:
        if m["desc"].get("sweep_of"):
            groups.setdefault(m["desc"]["sweep_of"], []).append(m)
    if not groups:
        return models, []

    def score(m):
        for key in ("val_bits", "test_bits"):
            if m["stats"].get(key, {}).get("mean") is not None:
                return m["stats"][key]["mean"]
        return float("inf")

    best = {name: min(group, key=score) for name, group in groups.items()}
    lines = ["# Learning-rate sweep", "", "Mean validation bits/token (test where there is no validation "
             "split) of every rate; the best stands for the model in fidelity.md.", "",
             "| model | " + " | ".join(f"lr {g['desc']['lr']}" for g in next(iter(groups.values()))) + " | best |",
             "|---|" + "---:|" * (len(next(iter(groups.values()))) + 1)]
    for name, group in groups.items():
        cells = " | ".join("" if score(g) == float("inf") else f"{score(g):.4f}" for g in group)
        lines.append(f"| {name} | {cells} | {best[name]['desc']['lr']} |")
    (Path(out_dir) / "fidelity_sweep.md").write_text("\n".join(lines) + "\n")
    kept = []
    for m in models:
        name = m["desc"].get("sweep_of")
        if name is None:
            kept.append(m)
        elif m is best[name]:
            kept.append(dict(m, name=f"{name} (lr {m['desc']['lr']})"))
    return kept, ["fidelity_sweep.md"]


# ---------------------------------------------------------------- tables
def pretty(key):
    """The Markdown header of a metric column."""
    lr = dict(LONG_RANGE)
    m = re.fullmatch(r"pos_(.+)_bits", key)
    if m:
        return m.group(1)
    m = re.fullmatch(r"range_(.+)_bits", key)
    if m:
        return lr.get(m.group(1), m.group(1))
    m = re.fullmatch(r"ablate_([a-z]+)_(?:(.+)_)?delta_bits", key)
    if m:
        return f"Δ {m.group(1)} reset" + (f", {lr.get(m.group(2), m.group(2))}" if m.group(2) else "")
    m = re.fullmatch(r"layer(\d+)_(gate|gate2)_mean", key)
    if m:
        return f"layer {m.group(1)} {m.group(2)} mean"
    m = re.fullmatch(r"layer(\d+)_state_share", key)
    if m:
        return f"layer {m.group(1)} state share"
    return {"train_bits": "train bits/tok (last part)", "val_bits": "val bits/tok", "test_bits": "test bits/tok",
            "val_bits_per_byte": "val bits/byte", "test_bits_per_byte": "test bits/byte",
            "steps": "steps", "tokens": "tokens", "compute_flops": "compute (FLOPs)"}.get(key, key)


def ms(stat, how, digits=4):
    """'3.1234 ± 0.0100' (std) or '3.1234 [3.1100, 3.1300]' (minmax); one value alone; '' none."""
    if stat["mean"] is None:
        return ""
    f = f"{{:.{digits}f}}"
    if stat["n"] < 2:
        return f.format(stat["mean"])
    if how == "minmax":
        return f"{f.format(stat['mean'])} [{f.format(stat['min'])}, {f.format(stat['max'])}]"
    return f"{f.format(stat['mean'])} ± {f.format(stat['std'])}"


def cell_mean(stats, key, fmt):
    return fmt(stats[key]["mean"]) if key in stats and stats[key]["mean"] is not None else ""


def csv_value(v):
    return "" if v is None else (repr(v) if isinstance(v, float) else v)


def write_tables(models, keys, out_dir, how="std", train_tail=0.1):
    out_dir = Path(out_dir)
    desc_cols = ["status", "model_variant", "params", "flops_per_token", "tokens_per_step", "steps"]
    with open(out_dir / "fidelity.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", *[("planned_steps" if c == "steps" else c) for c in desc_cols], "seeds", "overrides",
                    *[f"{k}_{s}" for k in keys for s in ("mean", "std", "min", "max", "n")]])
        for m in models:
            d = m["desc"]
            w.writerow([m["name"], *[csv_value(d.get(c)) for c in desc_cols], len(m["runs"]),
                        " ".join(d.get("overrides", [])),
                        *[csv_value(m["stats"][k][s]) for k in keys for s in ("mean", "std", "min", "max", "n")]])
    with open(out_dir / "fidelity_runs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "seed", "status", "diag_split", *keys])
        for m in models:
            for r in m["runs"]:
                w.writerow([m["name"], r["seed"], r["status"], r["diag_split"] or "",
                            *[csv_value(r["values"].get(k)) for k in keys]])

    def table(f, title, cols, note=""):
        cols = [k for k in cols if any(m["stats"][k]["n"] for m in models)]
        if not cols:
            return
        f.write(f"\n### {title}\n\n")
        if note:
            f.write(note + "\n\n")
        f.write("| model | " + " | ".join(pretty(k) for k in cols) + " |\n")
        f.write("|---|" + "---:|" * len(cols) + "\n")
        for m in models:
            if not m["runs"]:
                continue
            digits = {k: (3 if k.startswith("layer") else 4) for k in cols}
            f.write(f"| {m['name']} | " + " | ".join(ms(m["stats"][k], how, digits[k]) for k in cols) + " |\n")

    spread_text = ("mean ± sample standard deviation (n − 1) over seeds" if how == "std"
                   else "mean [min, max] over seeds")
    diag = sorted({s for m in models for s in m["diag_splits"]})
    diag_text = "/".join(diag) if diag else "test"
    with open(out_dir / "fidelity.md", "w") as f:
        f.write(f"## Fidelity study\n\nEach cell: {spread_text}; one value when only one seed has it; "
                "blank when no run reports it. Bits/token of `brt-dist eval` on whole held-out documents; "
                f"train = mean training loss over the last {train_tail:.0%} of steps, in bits/token; "
                "compute = tokens seen × training FLOPs/token (model.md §10, as brt-dist counts them).\n\n")
        f.write("| model | variant | params | FLOPs/tok | steps | tokens | compute (FLOPs) | seeds | "
                "train bits/tok | val bits/tok | test bits/tok |\n")
        f.write("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
        for m in models:
            d, st = m["desc"], m["stats"]
            if not m["runs"]:
                continue
            cells = [m["name"], d.get("model_variant") or "",
                     si(d["params"]) if number(d.get("params")) else "",
                     f"{d['flops_per_token']:.4g}" if number(d.get("flops_per_token")) else "",
                     cell_mean(st, "steps", lambda v: f"{v:.0f}"), cell_mean(st, "tokens", si),
                     cell_mean(st, "compute_flops", lambda v: f"{v:.4g}"), str(len(m["runs"]))]
            cells += [ms(st[k], how) if k in st else "" for k in ("train_bits", "val_bits", "test_bits")]
            f.write("| " + " | ".join(cells) + " |\n")
        table(f, "Loss by position in the document",
              [k for k in keys if k.startswith("pos_")],
              f"Bits/token on the {diag_text} split by the target's position in its document.")
        table(f, "Long-range diagnostics", [k for k in keys if k.startswith("range_")],
              f"Bits/token on the {diag_text} split by the distance to the previous occurrence of the "
              "same token in the document (first: no previous occurrence; ≤ W; (W, W·L]; > W·L).")
        table(f, "Carried-state ablation", [k for k in keys if k.startswith("ablate_")],
              f"`brt-dist eval --ablate`, {diag_text} split: bits/token with the carried state "
              "(recurrent state, or BST SSM carry) reset at every segment or every block, minus the "
              "normal evaluation, overall and per long-range class (positive: the model uses the "
              "state); blank where the ablation does not apply.")
        table(f, "Recurrent and BST layers", [k for k in keys if k.startswith("layer")],
              "Gate means and the share of each layer's output that comes from the state "
              f"(`eval --json` \"layers\", {diag_text} split).")
        refused = [m for m in models if m["desc"].get("status") == "refused"]
        failed = [(m, r) for m in models for r in m["runs"] + m["failed"] if r["status"] not in ("ok", "?")]
        pending = [m for m in models if not m["runs"] and not m["failed"] and m not in refused]
        if refused or failed or pending:
            f.write("\n### Not in the table\n\n")
            for m in refused:
                f.write(f"- **{m['name']}**: refused by brt-dist: {m['desc'].get('error', '?')}\n")
            for m, r in failed:
                why = f": {r['error']}" if r.get("error") else ""
                f.write(f"- {m['name']} seed {r['seed']}: {r['status']}{why} (`{r['dir']}`)\n")
            for m in pending:
                f.write(f"- {m['name']}: planned ({m['desc'].get('steps', '?')} steps), no evaluated run yet\n")
    return ["fidelity.csv", "fidelity.md", "fidelity_runs.csv"]
