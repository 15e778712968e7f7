#!/usr/bin/python3
"""The MQAR study (docs/fidelity.md, "MQAR"): multi-query associative recall trained as the task,
every model at every learning rate of a sweep, the best rate chosen on a validation grid, more
seeds at that rate, every model scored on a disjoint test grid (other seeds of the generator).

  mqar_study.py run STUDY_DIR --config configs/mqar.toml --models NAME... --lr-sweep A,B,...
                [--seeds 1,2,3] [--jobs J] [--pairs 2,4,8,16] [--gaps 0.5,1,2,4,8] [--samples N]
                [--capacity-pairs ...] [--capacity-gap G] [-- key=value ...]
  mqar_study.py collect STUDY_DIR [--no-plots]
  mqar_study.py heatmap EVAL_JSON --out PNG   (one `eval --task mqar --json` report: pairs x gap)

--init-from STUDY makes a curriculum: every run of this study starts from the weights of STUDY's
run of the same model and seed (at STUDY's best rate), e.g. recall learnt inside the window first,
then gaps past it.

`run` trains each model at each rate with the first seed, scores each on the validation grid
(`brt-dist eval --task mqar --task-seed 1`), takes the rate of the highest mean accuracy, trains
the other seeds at it, and scores every best-rate run on the test grid (--task-seed 2, --ablate)
and on the capacity grid (pairs at one gap beyond the window). Resumable: a run whose eval JSON
exists is skipped. `collect` writes mqar.md (tables: accuracy by gap, capacity, ablations, each
mean ± std over seeds, with each run's cost) and mqar-distance.png / mqar-capacity.png.
Models: NAME is model.variant (slide, xl, rec:..., feedback:..., bst:...), or LABEL=k=v,k=v for
any overrides (e.g. 'slide-2W=model.variant=slide,model.window=64'). Uses python3-matplotlib.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.dont_write_bytecode = True


def parse_list(text, kind):
    return [kind(x) for x in text.split(",") if x.strip()]


def model_overrides(spec):
    """'slide' -> ('slide', ['model.variant=slide']); 'a=k=v,k2=v2' -> ('a', ['k=v', 'k2=v2'])."""
    if "=" in spec and "." not in spec.split("=", 1)[0]:
        label, rest = spec.split("=", 1)
        return label, rest.split(",")
    extra = ["model.window=" + "{seq_len}"] if spec == "xl" else []  # xl: W = N (model.md §6)
    return spec, ["model.variant=" + spec] + extra


def safe(name):
    return name.replace(":", "-").replace("=", "-").replace(",", "_")


class Study:
    def __init__(self, args):
        self.args = args
        self.dir = Path(args.study_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.bin = args.brt_dist
        self.env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        self.base_window = int(self.config_value("model.window"))
        self.seq_len = self.config_value("model.seq_len")  # once: xl's W = N in model_overrides

    def run_dir(self, label, lr, seed):
        return self.dir / "runs" / f"{safe(label)}_lr{lr}_s{seed}"

    def train(self, label, overrides, lr, seed):
        d = self.run_dir(label, lr, seed)
        done = d / "train.done"
        if done.exists():
            return json.loads(done.read_text())
        d.mkdir(parents=True, exist_ok=True)
        over = [o.replace("{seq_len}", str(self.seq_len)) for o in overrides]
        cmd = [self.bin, "train", self.args.config, *self.args.extra, *over, f"optim.lr={lr}", f"train.seed={seed}",
               f"run.dir={d}"] + self.init_from(label, seed)
        t0 = time.monotonic()
        with open(d / "train.log", "w") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env).returncode
        if rc != 0:
            raise SystemExit(f"mqar_study: train failed ({rc}): {d / 'train.log'}")
        info = {"seconds": time.monotonic() - t0, "parameters": self.parameters(d / "train.log"),
                "window": self.window(d / "train.log"),
                "tokens": self.tokens(d / "metrics.jsonl")}
        done.write_text(json.dumps(info))
        return info

    def init_from(self, label, seed):
        """--init-from STUDY: a curriculum's second stage starts from that study's run of this
        model and seed at its best rate (checkpoint.init_from: the weights, a fresh optimizer)."""
        if not self.args.init_from:
            return []
        first = Path(self.args.init_from)
        lr = json.loads((first / "best.json").read_text())[label]
        ckpts = sorted((first / "runs" / f"{safe(label)}_lr{lr}_s{seed}" / "ckpt").glob("ckpt-*.h5"))
        if not ckpts:
            raise SystemExit(f"mqar_study: --init-from {first}: no checkpoint of {label} seed {seed} at lr {lr}")
        return [f"checkpoint.init_from={ckpts[-1]}"]

    def config_value(self, key, overrides=()):
        over = [o.replace("{seq_len}", "0") for o in overrides]  # xl's W = N: resolved by brt-dist itself
        out = subprocess.run([self.bin, "config", "show", self.args.config, *self.args.extra, *over],
                             capture_output=True, text=True, env=self.env).stdout
        section, name = key.split(".", 1)
        current = None
        for line in out.splitlines():
            if line.startswith("["):
                current = line.strip("[] ")
            elif current == section and line.split("=")[0].strip() == name:
                return line.split("=", 1)[1].split("#")[0].strip()
        raise SystemExit(f"mqar_study: {key} not in `brt-dist config show {self.args.config}`")

    @staticmethod
    def window(log):
        for line in log.read_text().splitlines():
            if line.startswith("brt-dist train:"):
                return int(line.split(" W ")[1].split(",")[0])
        raise SystemExit(f"mqar_study: no model line in {log}")

    @staticmethod
    def parameters(log):
        for line in log.read_text().splitlines():
            if line.startswith("parameters:"):
                return int(line.split()[1])
        return 0

    @staticmethod
    def tokens(metrics):
        steps = [json.loads(l) for l in metrics.read_text().splitlines() if '"event":"train"' in l]
        return int(steps[-1].get("tokens_seen", 0)) if steps else 0

    def evaluate(self, label, lr, seed, name, task_seed, pairs, gaps, ablate):
        """Gaps are in the base config's W; a model with another window gets them in its own."""
        d = self.run_dir(label, lr, seed)
        out = d / f"{name}.json"
        if not out.exists():
            scale = self.base_window / json.loads((d / "train.done").read_text())["window"]
            gaps = ",".join(f"{float(g) * scale:g}" for g in gaps.split(","))
            cmd = [self.bin, "eval", "--checkpoint", str(d / "ckpt"), "--task", "mqar", "--task-seed", str(task_seed),
                   "--pairs", pairs, "--gaps", gaps, "--samples", str(self.args.samples), "--json", str(out),
                   "--quiet"] + (["--ablate"] if ablate else [])
            with open(d / f"{name}.log", "w") as log:
                rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env).returncode
            if rc != 0:
                raise SystemExit(f"mqar_study: eval failed ({rc}): {d / (name + '.log')}")
        return json.loads(out.read_text())


def run(args):
    study = Study(args)
    models = [model_overrides(m) for m in args.models]
    lrs = parse_list(args.lr_sweep, str)
    seeds = parse_list(args.seeds, int)
    grid = (args.pairs, args.gaps)
    (study.dir / "study.json").write_text(json.dumps({"config": args.config, "models": args.models, "lrs": lrs,
                                                      "seeds": seeds, "extra": args.extra, "pairs": args.pairs,
                                                      "gaps": args.gaps, "capacity_pairs": args.capacity_pairs,
                                                      "capacity_gap": args.capacity_gap,
                                                      "base_window": study.base_window,
                                                      "init_from": args.init_from}, indent=1))

    def sweep_one(job):
        (label, over), lr = job
        study.train(label, over, lr, seeds[0])
        acc = study.evaluate(label, lr, seeds[0], "validation", 1, *grid, False)["accuracy"]
        print(f"  {label} lr {lr}: validation accuracy {acc:.3f}", flush=True)
        return label, lr, acc

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(sweep_one, [(m, lr) for m in models for lr in lrs]))
    best = {}
    for label, lr, acc in results:
        if label not in best or acc > best[label][1]:
            best[label] = (lr, acc)
    (study.dir / "best.json").write_text(json.dumps({k: v[0] for k, v in best.items()}, indent=1))

    def final_one(job):
        (label, over), seed = job
        lr = best[label][0]
        study.train(label, over, lr, seed)
        study.evaluate(label, lr, seed, "test", 2, *grid, True)
        cap_gap = str(args.capacity_gap)
        study.evaluate(label, lr, seed, "capacity", 3, args.capacity_pairs, cap_gap, True)
        return label, seed

    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(final_one, [(m, s) for m in models for s in seeds]))
    collect(args)


def mean_std(xs):
    if not xs:
        return float("nan"), float("nan")
    m = sum(xs) / len(xs)
    return m, (sum((x - m) ** 2 for x in xs) / max(1, len(xs) - 1)) ** 0.5 if len(xs) > 1 else 0.0


def collect(args):
    study_dir = Path(args.study_dir)
    meta = json.loads((study_dir / "study.json").read_text())
    best = json.loads((study_dir / "best.json").read_text())
    lines = ["# MQAR study", "", f"config `{meta['config']}`, overrides `{' '.join(meta['extra'])}`; "
             f"learning rates {', '.join(meta['lrs'])}; seeds {meta['seeds']}", ""]
    rows, curves, capacity = [], {}, {}
    for spec in meta["models"]:
        label = model_overrides(spec)[0]
        lr = best[label]
        runs = [study_dir / "runs" / f"{safe(label)}_lr{lr}_s{s}" for s in meta["seeds"]]
        tests = [json.loads((r / "test.json").read_text()) for r in runs if (r / "test.json").exists()]
        caps = [json.loads((r / "capacity.json").read_text()) for r in runs if (r / "capacity.json").exists()]
        info = [json.loads((r / "train.done").read_text()) for r in runs if (r / "train.done").exists()]
        sweep = []
        for rate in meta["lrs"]:
            v = study_dir / "runs" / f"{safe(label)}_lr{rate}_s{meta['seeds'][0]}" / "validation.json"
            sweep.append(f"{rate}: {json.loads(v.read_text())['accuracy']:.2f}" if v.exists() else f"{rate}: -")
        if not tests:
            continue
        base_w = meta["base_window"]
        gaps = sorted({c["gap_tokens"] / base_w for c in tests[0]["cells"]})
        by_gap = {g: [sum(c["accuracy"] for c in t["cells"] if c["gap_tokens"] / base_w == g) /
                      sum(1 for c in t["cells"] if c["gap_tokens"] / base_w == g) for t in tests] for g in gaps}
        ablated = {a["mode"]: [] for a in tests[0].get("ablations", [])}
        for t in tests:
            for a in t.get("ablations", []):
                ablated[a["mode"]].append(a["accuracy"])
        curves[label] = {g: mean_std(v) for g, v in by_gap.items()}
        cap_pairs = sorted({c["pairs"] for c in caps[0]["cells"]}) if caps else []
        capacity[label] = {p: mean_std([next(c["accuracy"] for c in k["cells"] if c["pairs"] == p) for k in caps])
                           for p in cap_pairs}
        rows.append((label, lr, info, curves[label], [mean_std([t["accuracy"] for t in tests])], ablated, sweep,
                     capacity[label], tests[0]["chance"]))
    if not rows:
        raise SystemExit("mqar_study: no finished runs to collect")
    gaps = sorted(rows[0][3])
    lines += [f"## Accuracy by gap (test grid, mean ± std over seeds, at each model's best rate; W = {meta['base_window']} "
              "tokens, the base config's window, for every model)", "",
              "| model | params | lr | " + " | ".join(f"{g:g} W" for g in gaps) + " | all | segment reset | block reset |",
              "|---|---:|---:|" + "---:|" * (len(gaps) + 3)]
    for label, lr, info, curve, overall, ablated, sweep, _, chance in rows:
        cells = " | ".join(f"{curve[g][0]:.2f} ± {curve[g][1]:.2f}" for g in gaps)
        abl = " | ".join(f"{mean_std(ablated.get(m, []))[0]:.2f}" for m in ("segment", "block"))
        lines.append(f"| {label} | {info[0]['parameters'] if info else '-'} | {lr} | {cells} | {overall[0][0]:.2f} | {abl} |")
    lines += ["", f"Chance: {rows[0][8]:.3f} (one value of the vocabulary's); a model that only knows the values "
              "present in its context does better (1/pairs).", ""]
    cap_pairs = sorted(rows[0][7])
    lines += [f"## Capacity: accuracy by pairs at a gap of {meta['capacity_gap']} W", "",
              "| model | " + " | ".join(f"{p} pairs" for p in cap_pairs) + " |", "|---|" + "---:|" * len(cap_pairs)]
    for label, *_rest in rows:
        cap = _rest[6]
        lines.append(f"| {label} | " + " | ".join(f"{cap[p][0]:.2f} ± {cap[p][1]:.2f}" for p in cap_pairs) + " |")
    lines += ["", "## Learning-rate sweep (validation accuracy, first seed) and cost", "",
              "| model | sweep | tokens per run | seconds per run (2 cores shared) |", "|---|---|---:|---:|"]
    for label, lr, info, *_r, sweep, _cap, _chance in rows:
        secs = mean_std([i["seconds"] for i in info])[0]
        lines.append(f"| {label} | {'; '.join(sweep)} | {info[0]['tokens'] if info else '-'} | {secs:.0f} |")
    (study_dir / "mqar.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if not args.no_plots:
        plot(study_dir, curves, capacity, rows[0][8], meta)


def plot(study_dir, curves, capacity, chance, meta):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for name, data, xlabel, log in (("distance", curves, "gap between the pairs and the queries (windows W)", True),
                                    ("capacity", capacity, f"key-value pairs (gap {meta['capacity_gap']} W)", False)):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for label, curve in data.items():
            xs = sorted(curve)
            ax.errorbar(xs, [curve[x][0] for x in xs], yerr=[curve[x][1] for x in xs], marker="o", capsize=3,
                        label=label)
        ax.axhline(chance, color="grey", linestyle=":", label="chance")
        if log:
            ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("answer accuracy (test grid)")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(study_dir / f"mqar-{name}.png", dpi=110)
        plt.close(fig)


def heatmap(args):
    """One `eval --task mqar --json` report as pairs x gap heatmaps: the plain pass, then each ablation."""
    report = json.loads(Path(args.eval_json).read_text())
    if report.get("task") != "mqar":
        raise SystemExit(f"mqar_study: {args.eval_json} is not an `eval --task mqar --json` report")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    passes = [("plain", report["cells"])] + [(a["mode"] + " reset", a["cells"]) for a in report.get("ablations", [])]
    pairs = sorted({c["pairs"] for c in report["cells"]})
    gaps = sorted({c["gap_windows"] for c in report["cells"]})
    fig, axes = plt.subplots(1, len(passes), figsize=(1.2 + 0.9 * len(gaps) * len(passes), 1.6 + 0.6 * len(pairs)),
                             squeeze=False)
    for ax, (name, cells) in zip(axes[0], passes):
        grid = [[next(c["accuracy"] for c in cells if c["pairs"] == p and c["gap_windows"] == g) for g in gaps]
                for p in pairs]
        ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(gaps)), [f"{g:g}" for g in gaps])
        ax.set_yticks(range(len(pairs)), [str(p) for p in pairs])
        ax.set_xlabel(f"gap (W = {report['window']})")
        ax.set_ylabel("pairs")
        ax.set_title(f"{name}: {sum(map(sum, grid)) / (len(pairs) * len(gaps)):.2f}", fontsize=8)
    fig.suptitle(f"MQAR accuracy (chance {report['chance']:.3f})", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"mqar_study: {args.out}: {len(pairs)} pair counts x {len(gaps)} gaps, {len(passes)} passes")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("study_dir")
    r.add_argument("--config", default="configs/mqar.toml")
    r.add_argument("--models", nargs="+", required=True)
    r.add_argument("--lr-sweep", required=True, help="learning rates, comma-separated")
    r.add_argument("--seeds", default="1,2,3")
    r.add_argument("--jobs", type=int, default=2, help="runs at once [%(default)s]")
    r.add_argument("--threads", type=int, default=1, help="OMP threads per run [%(default)s]")
    r.add_argument("--pairs", default="2,4,8,16")
    r.add_argument("--gaps", default="0.5,1,2,4,8", help="in windows W")
    r.add_argument("--samples", type=int, default=32)
    r.add_argument("--init-from", metavar="STUDY", help="a curriculum: every run starts from the weights of "
                   "STUDY's run of its model and seed at STUDY's best rate")
    r.add_argument("--capacity-pairs", default="2,4,8,16,24")
    r.add_argument("--capacity-gap", type=float, default=2)
    r.add_argument("--brt-dist", default=os.environ.get("BRT_DIST", "build/release/launch/brt-dist"))
    c = sub.add_parser("collect")
    c.add_argument("study_dir")
    for q in (r, c):
        q.add_argument("--no-plots", action="store_true")
    h = sub.add_parser("heatmap", help="one `eval --task mqar --json` report as pairs x gap heatmaps")
    h.add_argument("eval_json")
    h.add_argument("--out", required=True, help="the PNG")
    args = p.parse_args(argv)
    args.extra = extra
    {"run": run, "collect": collect, "heatmap": heatmap}[args.cmd](args)


if __name__ == "__main__":
    main()
