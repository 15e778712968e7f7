"""PNG plots of a collected fidelity study (tools/fidelity_study.py), in the sweep plots' style
(tools/scaling_plots.py): bits/token vs training FLOPs (one point per model, error bars over
seeds), loss by position in the document (one line per model), long- vs short-range loss (bars
per model) and, with `eval --ablate` results, the carried-state ablation deltas."""
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fidelity_table import LONG_RANGE, metric_order, pretty  # noqa: E402
from scaling_plots import DPI, FIGSIZE, STYLE  # noqa: E402

SPREAD_LABEL = {"std": "error bars: ±1 std over seeds", "minmax": "error bars: min–max over seeds"}


def plotted(models):
    """Models with at least one evaluated run, in the table's order."""
    return [m for m in models if m["runs"] and m["desc"].get("status") != "refused"]


def err(stat, how):
    """(below, above) error-bar lengths of a stat (0 when one seed or none)."""
    if stat["mean"] is None or stat["n"] < 2:
        return 0.0, 0.0
    if how == "minmax":
        return stat["mean"] - stat["min"], stat["max"] - stat["mean"]
    return stat["std"], stat["std"]


def value(stat):
    return math.nan if stat is None or stat["mean"] is None else stat["mean"]


def headline_key(models):
    """test bits/token when any run has it, else validation."""
    return "test_bits" if any(m["stats"].get("test_bits", {}).get("n") for m in models) else "val_bits"


def plot_bits_vs_flops(models, path, how):
    key = headline_key(models)
    pts = [m for m in models if m["stats"].get(key, {}).get("n") and m["stats"].get("compute_flops", {}).get("n")]
    if not pts:
        return "no run has both compute and held-out bits/token; bits_vs_flops.png not drawn"
    fig, ax = plt.subplots(figsize=FIGSIZE)
    for i, m in enumerate(pts):
        st, color = m["stats"], m["color"]
        x, y = value(st["compute_flops"]), value(st[key])
        lo, hi = err(st[key], how)
        seeds_x = [r["values"].get("compute_flops") for r in m["runs"]]
        seeds_y = [r["values"].get(key) for r in m["runs"]]
        ax.plot([a for a, b in zip(seeds_x, seeds_y) if a and b], [b for a, b in zip(seeds_x, seeds_y) if a and b],
                ".", color=color, alpha=0.35, markersize=3)
        ax.errorbar([x], [y], yerr=[[lo], [hi]], fmt="o", color=color, capsize=2.5, label=m["name"])
    xs = [value(m["stats"]["compute_flops"]) for m in pts]
    ax.set_xscale("log")
    if max(xs) / min(xs) < 1.5:  # equal FLOPs: every point in one column; give it room
        ax.set_xlim(min(xs) / 2, max(xs) * 2)
    ax.set_xlabel("training compute (FLOPs, model.md §10)")
    ax.set_ylabel(("test" if key == "test_bits" else "validation") + " bits/token")
    ax.set_title("Held-out bits/token vs training compute")
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi + 0.25 * (1 + len(pts) // 2) * (hi - lo))  # room above for the legend
    ax.legend(loc="upper left", ncol=2 if len(pts) > 1 else 1, title=SPREAD_LABEL[how], title_fontsize=6)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return None


def grouped_bars(ax, models, keys, labels, how):
    """Bars grouped by key (x), one bar per model, error bars over seeds."""
    models = [m for m in models if any(m["stats"].get(k, {}).get("n") for k in keys)]
    width = 0.8 / max(1, len(models))
    xs = np.arange(len(keys))
    for i, m in enumerate(models):
        st = m["stats"]
        ys = [value(st.get(k)) for k in keys]
        errs = np.array([err(st[k], how) if k in st else (0.0, 0.0) for k in keys]).T
        ax.bar(xs - 0.4 + width * (i + 0.5), ys, width, yerr=errs, capsize=1.5, color=m["color"],
               label=m["name"], error_kw={"elinewidth": 0.7})
    ax.set_xticks(xs)
    ax.set_xticklabels(labels)
    ax.grid(axis="x", visible=False)


def plot_loss_vs_position(models, path, how, keys):
    keys = [k for k in keys if k.startswith("pos_") and any(m["stats"][k]["n"] for m in models)]
    if not keys:
        return "no eval JSON has position buckets with tokens; loss_vs_position.png not drawn"
    fig, ax = plt.subplots(figsize=FIGSIZE)
    xs = np.arange(len(keys))
    for i, m in enumerate(models):
        st = m["stats"]
        if not any(st[k]["n"] for k in keys):
            continue
        ys = [value(st[k]) for k in keys]
        errs = np.array([err(st[k], how) for k in keys]).T
        ax.errorbar(xs + (i - (len(models) - 1) / 2) * 0.04, ys, yerr=errs, fmt="o-", color=m["color"],
                    capsize=2, label=m["name"])
    ax.set_xticks(xs)
    ax.set_xticklabels([pretty(k) for k in keys])
    ax.set_xlabel("target's position in its document (tokens)")
    ax.set_ylabel("bits/token")
    ax.set_title("Loss by position in the document")
    ax.legend(loc="best", ncol=2 if len(models) > 6 else 1, title=SPREAD_LABEL[how], title_fontsize=6)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return None


def plot_long_short(models, path, how, keys):
    order = [n for n, _ in LONG_RANGE]
    keys = [k for k in keys if k.startswith("range_") and any(m["stats"][k]["n"] for m in models)]
    keys.sort(key=lambda k: order.index(k[6:-5]) if k[6:-5] in order else 99)
    if not keys:
        return ("no eval JSON has \"long_range\" (a brt-dist eval without the long-range "
                "diagnostics); long_vs_short_range.png not drawn")
    fig, ax = plt.subplots(figsize=(max(FIGSIZE[0], 0.25 * len(models) * len(keys) + 1.5), FIGSIZE[1]))
    grouped_bars(ax, models, keys, [pretty(k) for k in keys], how)
    # The classes differ by tenths of a bit on bits/token of several: zoom in on the bar tops
    # (the axis does not start at 0), leaving room above for the legend.
    lows = [value(m["stats"][k]) - err(m["stats"][k], how)[0] for m in models for k in keys if m["stats"][k]["n"]]
    highs = [value(m["stats"][k]) + err(m["stats"][k], how)[1] for m in models for k in keys if m["stats"][k]["n"]]
    span = max(max(highs) - min(lows), 0.05)
    ax.set_ylim(max(0.0, min(lows) - 0.4 * span), max(highs) + 0.8 * span)
    ax.set_xlabel("distance to the token's previous occurrence in the document")
    ax.set_ylabel("bits/token")
    ax.set_title("Long- vs short-range loss")
    ax.legend(loc="upper right", ncol=2 if len(models) > 4 else 1, title=SPREAD_LABEL[how], title_fontsize=6)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return None


def plot_ablation(models, path, how, keys):
    keys = [k for k in keys if k.startswith("ablate_") and any(m["stats"][k]["n"] for m in models)]
    if not keys:
        return ""  # no --ablate results: not drawn, nothing to say (no such table columns either)
    keys.sort(key=metric_order)
    fig, ax = plt.subplots(figsize=(max(FIGSIZE[0], 0.2 * len(models) * len(keys) + 1.5), FIGSIZE[1]))
    grouped_bars(ax, models, keys, [pretty(k).replace("Δ ", "").replace(" reset", "") for k in keys], how)
    ax.axhline(0, color="k", linewidth=0.6)
    ax.set_ylabel("Δ bits/token (state reset − normal)")
    ax.set_title("Carried-state ablation")
    for label in ax.get_xticklabels():
        label.set_rotation(30)
        label.set_ha("right")
    ax.legend(loc="best", ncol=2 if len(models) > 4 else 1, title=SPREAD_LABEL[how], title_fontsize=6)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return None


def write_plots(models, out_dir, how="std"):
    """Returns (file names written, notes on plots not drawn). Each plot_* returns None when it
    drew its file, else the note saying why not."""
    out_dir = Path(out_dir)
    models = [dict(m, color=f"C{i % 10}") for i, m in enumerate(plotted(models))]  # one colour per model
    keys = sorted({k for m in models for k in m["stats"]}, key=metric_order)
    names, notes = [], []
    if not models:
        return names, ["no evaluated run; no plots"]
    with plt.rc_context(STYLE):
        for name, draw in [("bits_vs_flops.png", lambda p: plot_bits_vs_flops(models, p, how)),
                           ("loss_vs_position.png", lambda p: plot_loss_vs_position(models, p, how, keys)),
                           ("long_vs_short_range.png", lambda p: plot_long_short(models, p, how, keys)),
                           ("ablation.png", lambda p: plot_ablation(models, p, how, keys))]:
            note = draw(out_dir / name)  # None: drawn; else why not ("" : nothing to say)
            if note is None:
                names.append(name)
            elif note:
                notes.append(note)
    return names, notes
