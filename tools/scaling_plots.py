"""Paper-ready PNG plots of a collected sweep (tools/scaling_study.py): throughput and scaling
efficiency versus ranks per model, MFU per run, loss versus tokens seen and versus compute."""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from study_common import si  # noqa: E402

# Sized for one column of a two-column paper (3.4 in) at 300 dpi, fonts legible when printed.
FIGSIZE = (4.2, 3.0)
DPI = 300
STYLE = {"font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8, "legend.fontsize": 6.5,
         "xtick.labelsize": 7, "ytick.labelsize": 7, "lines.linewidth": 1.3, "lines.markersize": 4,
         "axes.grid": True, "grid.alpha": 0.3, "savefig.bbox": "tight"}


def group_label(rows):
    """A short legend label for a model group: variant and size (e.g. 'rec:fixed:skip 40.1M')."""
    r = rows[0]
    size = si(r["params"]) if isinstance(r.get("params"), (int, float)) else "?"
    return f"{Path(r['config']).stem} ({r['model_variant']}, {size})"


def groups(rows):
    out = {}
    for r in rows:
        out.setdefault(r["group"], []).append(r)
    ordered = sorted(out.values(), key=lambda v: (v[0].get("params") or 0, v[0]["group"]))
    return [sorted(v, key=lambda r: (r["ranks"], r["name"])) for v in ordered]


def rank_axis(ax, rows):
    ranks = sorted({r["ranks"] for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ranks)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.minorticks_off()
    ax.set_xlabel("ranks (data-parallel x tensor-parallel)")


def plot_throughput(rows, path):
    fig, ax = plt.subplots(figsize=FIGSIZE)
    for i, members in enumerate(groups(rows)):
        color = f"C{i}"
        x = [r["ranks"] for r in members]
        y = [r["tokens_per_s"] for r in members]
        ax.plot(x, y, "o-", color=color, label=group_label(members))
        base = members[0]
        ideal = [base["tokens_per_s_per_rank"] * n for n in x]
        ax.plot(x, ideal, ":", color=color, alpha=0.6)
    ax.plot([], [], "k:", alpha=0.6, label="linear scaling")
    rank_axis(ax, rows)
    ax.set_yscale("log")
    ax.set_ylabel("training throughput (tokens/s)")
    ax.set_title("Throughput vs ranks")
    ax.legend(loc="best")
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def plot_efficiency(rows, path):
    fig, ax = plt.subplots(figsize=FIGSIZE)
    for i, members in enumerate(groups(rows)):
        ax.plot([r["ranks"] for r in members], [100 * r["scaling_efficiency"] for r in members],
                "o-", color=f"C{i}", label=group_label(members))
    ax.axhline(100, color="k", linestyle=":", alpha=0.6, label="ideal (100%)")
    rank_axis(ax, rows)
    top = max(110, max(100 * r["scaling_efficiency"] for r in rows) * 1.08)
    ax.set_ylim(0, top)
    ax.set_ylabel("scaling efficiency (%)\n(tokens/s per rank vs fewest ranks)")
    ax.set_title("Scaling efficiency vs ranks")
    ax.legend(loc="lower left")
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def plot_mfu(rows, path):
    ordered = [r for members in groups(rows) for r in members]
    fig, ax = plt.subplots(figsize=(max(FIGSIZE[0], 0.45 * len(ordered) + 1.2), FIGSIZE[1]))
    colors = {g[0]["group"]: f"C{i}" for i, g in enumerate(groups(rows))}
    xs = range(len(ordered))
    bars = ax.bar(xs, [100 * r["mfu"] for r in ordered], color=[colors[r["group"]] for r in ordered])
    for bar, r in zip(bars, ordered):
        ax.annotate(f"{100 * r['mfu']:.1f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=6, xytext=(0, 1), textcoords="offset points")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r["name"] for r in ordered], rotation=40, ha="right")
    ax.set_ylabel("MFU (% of peak, all ranks)")
    ax.set_ylim(0, max(100 * r["mfu"] for r in ordered) * 1.45 or 1)  # room for the legend
    ax.set_title("Model FLOP utilisation per run")
    ax.grid(axis="x", visible=False)
    for g in groups(rows):
        ax.bar([0], [0], color=colors[g[0]["group"]], label=group_label(g))
    ax.legend(loc="upper right")
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def plot_loss(rows, path, x_key, xlabel, title):
    fig, ax = plt.subplots(figsize=FIGSIZE)
    styles = ["-", "--", "-.", ":"]
    for i, members in enumerate(groups(rows)):
        for j, r in enumerate(members):
            scale = r["train_flops_per_token"] if x_key == "compute" else 1.0
            x = [t * scale for t in r["curve_tokens"]]
            ax.plot(x, r["curve_loss"], styles[j % len(styles)], color=f"C{i}", label=r["name"])
            if r["eval_loss"]:
                ax.plot([t * scale for t in r["eval_tokens"]], r["eval_loss"], "s",
                        color=f"C{i}", markersize=3)
    if any(r["eval_loss"] for r in rows):
        ax.plot([], [], "s", color="gray", markersize=3, label="eval loss")
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("loss (nats/token)")
    ax.yaxis.set_major_locator(MaxNLocator(6))
    ax.set_title(title)
    ax.legend(loc="best", ncol=2 if len(rows) > 6 else 1)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def write_plots(rows, out_dir):
    out_dir = Path(out_dir)
    names = []
    with plt.rc_context(STYLE):
        for name, draw in [
            ("throughput_vs_ranks.png", plot_throughput),
            ("scaling_efficiency.png", plot_efficiency),
            ("mfu.png", plot_mfu),
            ("loss_vs_tokens.png", lambda rs, p: plot_loss(
                rs, p, "tokens", "tokens seen", "Training loss vs tokens")),
            ("loss_vs_compute.png", lambda rs, p: plot_loss(
                rs, p, "compute", "training compute (FLOPs, model.md §10)", "Training loss vs compute")),
        ]:
            draw(rows, out_dir / name)
            names.append(name)
    return names
