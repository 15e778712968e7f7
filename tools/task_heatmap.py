#!/usr/bin/python3
"""Depth x length heatmaps of a long-range task evaluation (`brt-dist eval --task ... --json`,
docs/evaluation.md "Long-range tasks"): exact-match accuracy and answer loss per cell, the fact's
depth down, the document length across (with its multiple of the training length and the
distance in windows), one panel per pass (the plain one, then each ablation in the JSON).

  task_heatmap.py EVAL_JSON --out PNG [--metric accuracy|answer_nats|both] [--title TEXT]

The cells show the value and the distance from the fact to the question in windows W. Prints
one summary line per pass (accuracy and answer loss per length). Exit status: 0 drawn,
2 unusable input (the file and the problem named). Uses only Debian's python3-matplotlib and
python3-numpy.
"""
import argparse
import json
import math
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (ctest runs from it)

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

CELL_FIELDS = ("length", "depth", "accuracy", "answer_nats", "n")
METRICS = {  # name -> (colour map, fixed range or None, label, cell text)
    "accuracy": ("RdYlGn", (0.0, 1.0), "exact-match accuracy", lambda v: f"{100 * v:.0f}%"),
    "answer_nats": ("viridis_r", None, "answer loss (nats/token)", lambda v: f"{v:.2f}"),
}


class InputError(Exception):
    """A problem with the input file: reported in one line, exit 2."""


def number(cell, key, where):
    v = cell.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise InputError(f"{where}: '{key}' is {v!r}, not a finite number")
    return float(v)


def read_cells(cells, where):
    if not isinstance(cells, list) or not cells:
        raise InputError(f"{where}: no cells")
    out = {}
    for i, cell in enumerate(cells):
        at = f"{where}[{i}]"
        if not isinstance(cell, dict):
            raise InputError(f"{at}: not an object")
        missing = [k for k in CELL_FIELDS if k not in cell]
        if missing:
            raise InputError(f"{at}: missing {', '.join(missing)}")
        values = {k: number(cell, k, at) for k in CELL_FIELDS}
        if "distance_windows" in cell:
            values["distance_windows"] = number(cell, "distance_windows", at)
        key = (int(values["length"]), values["depth"])
        if key in out:
            raise InputError(f"{at}: a second cell for length {key[0]}, depth {key[1]:g}")
        out[key] = values
    return out


def read_eval(path):
    """The passes of one eval JSON: [(name, {(length, depth): cell})], and the header."""
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not readable JSON ({e})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: not a JSON object")
    passes = [("plain", read_cells(doc.get("cells"), f"{path}: cells"))]
    for i, ablation in enumerate(doc.get("ablations") or []):
        if not isinstance(ablation, dict) or "mode" not in ablation:
            raise InputError(f"{path}: ablations[{i}] has no mode")
        if ablation.get("applies") is False:
            continue  # the same numbers as the plain pass (docs/evaluation.md)
        passes.append((f"ablation: {ablation['mode']}", read_cells(ablation.get("cells"), f"{path}: ablations[{i}].cells")))
    return doc, passes


def grid(cells, lengths, depths, metric):
    values = np.full((len(depths), len(lengths)), np.nan)
    for (length, depth), cell in cells.items():
        values[depths.index(depth), lengths.index(length)] = cell[metric]
    return values


def length_label(length, doc):
    label = f"{length:,}"
    trained = doc.get("trained_seq_len") or doc.get("seq_len")
    if isinstance(trained, (int, float)) and trained > 0:
        label += f"\n{length / trained:g}×N"
    return label


def draw_panel(ax, fig, cells, lengths, depths, metric, doc, title, vrange, outer):
    """One heatmap; `outer`: (first column, last row, first row) decide the axis labels."""
    cmap_name, _, label, text = METRICS[metric]
    values = grid(cells, lengths, depths, metric)
    cmap = plt.get_cmap(cmap_name).copy()
    cmap.set_bad("#cccccc")  # a cell the evaluation did not fill
    norm = matplotlib.colors.Normalize(vmin=vrange[0], vmax=vrange[1])
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, aspect="auto")
    first_column, last_row, first_row = outer
    ax.set_xticks(range(len(lengths)), [length_label(n, doc) for n in lengths] if last_row else [])
    ax.set_yticks(range(len(depths)), [f"{d:g}" for d in depths] if first_column else [])
    if last_row:
        ax.set_xlabel("document length (tokens)")
    if first_column:
        ax.set_ylabel("depth of the fact (0 = start)")
    if first_row:
        ax.set_title(title)
    ax.grid(False)
    for r in range(len(depths)):
        for c in range(len(lengths)):
            if np.isnan(values[r, c]):
                continue
            cell = cells[(lengths[c], depths[r])]
            windows = f"\n{cell['distance_windows']:.3g}W" if "distance_windows" in cell else ""
            red, green, blue, _ = cmap(norm(values[r, c]))
            light = 0.299 * red + 0.587 * green + 0.114 * blue > 0.5
            ax.text(c, r, text(values[r, c]) + windows, ha="center", va="center", fontsize=6.5,
                    color="black" if light else "white")
    fig.colorbar(image, ax=ax, label=label, fraction=0.05, pad=0.03)


def summary(name, cells, lengths):
    parts = []
    for length in lengths:
        row = [c for (n, _), c in cells.items() if n == length]
        total = sum(c["n"] for c in row)
        acc = sum(c["accuracy"] * c["n"] for c in row) / total if total else float("nan")
        nats = sum(c["answer_nats"] * c["n"] for c in row) / total if total else float("nan")
        parts.append(f"{length}: {100 * acc:.0f}% ({nats:.3f} nats)")
    return f"{name}: " + ", ".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("eval_json", help="the JSON of `brt-dist eval --task ... --json FILE`")
    ap.add_argument("--out", required=True, help="the PNG to write (its folder is created)")
    ap.add_argument("--metric", choices=["accuracy", "answer_nats", "both"], default="both")
    ap.add_argument("--title", help="figure title (default: the task, checkpoint and split)")
    args = ap.parse_args(argv)
    try:
        doc, passes = read_eval(args.eval_json)
    except InputError as e:
        print(f"task_heatmap: {e}", file=sys.stderr)
        return 2
    metrics = ["accuracy", "answer_nats"] if args.metric == "both" else [args.metric]
    lengths = sorted({n for _, cells in passes for (n, _) in cells})
    depths = sorted({d for _, cells in passes for (_, d) in cells})
    plt.rcParams.update({"font.size": 8, "axes.titlesize": 9, "savefig.bbox": "tight"})
    width = 1.6 + 0.8 * len(lengths)
    height = 1.0 + 0.45 * len(depths)
    fig, axes = plt.subplots(len(metrics), len(passes), figsize=(width * len(passes), height * len(metrics)),
                             squeeze=False, layout="constrained")
    for m, metric in enumerate(metrics):
        fixed = METRICS[metric][1]
        every = [c[metric] for _, cells in passes for c in cells.values()]
        vrange = fixed or (0.0, max(max(every), 1e-6))  # one scale across passes: they compare
        for p, (name, cells) in enumerate(passes):
            draw_panel(axes[m][p], fig, cells, lengths, depths, metric, doc, name, vrange,
                       (p == 0, m == len(metrics) - 1, m == 0))
    task = doc.get("task", "task")
    where = ", ".join(str(doc[k]) for k in ("checkpoint", "split") if doc.get(k))
    fig.suptitle(args.title or f"{task}" + (f" ({where})" if where else ""))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=200)
    plt.close(fig)
    for name, cells in passes:
        print(f"task_heatmap: {summary(name, cells, lengths)}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
