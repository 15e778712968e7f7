#!/usr/bin/python3
"""tools/fidelity_study.py, three parts:
 1. unit checks: equal-FLOPs and equal-token step counts by hand, budgets, seeds, model names
    (slide+1 = one more layer than the config, xl = window N), mean and spread;
 2. collect on a hand-written study with known numbers (3 seeds of one model, 2 of another whose
    eval JSON predates the long-range fields, a refused model, a failed run, a metrics file cut
    off mid-line): every mean/std/min/max equals the value computed here, blanks where a field
    is absent, the Markdown's spread (std and min-max), the four PNGs;
 3. `run` end to end with brt-dist: a tiny corpus prepared by the tool, slide and rec:fixed:skip
    (d_model 32, 2 layers, N 64, W 16) x 2 seeds at equal training FLOPs, plus
    nosuch:fixed:skip, which brt-dist refuses (reported and skipped; a variant that will never
    exist, unlike feedback:fixed:skip, refused only until it is implemented); checks the step counts
    against the FLOPs/token brt-dist printed, the table against the eval JSONs, the PNGs, and
    that running again resumes without training anything.
usage: test_fidelity_study.py BRT_DIST   (from anywhere; ~1 minute on 2 cores)"""
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True
REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "fidelity_study.py"
PY = "/usr/bin/python3"
sys.path.insert(0, str(REPO / "tools"))
import fidelity_study as fs  # noqa: E402

LN2 = math.log(2.0)
REFUSED = "nosuch:fixed:skip"  # a model brt-dist refuses (its variant does not exist)
TRAINING = re.compile(r": training \d+ steps")  # the tool's line when it starts brt-dist train
TINY = ["model.layers=2", "model.recurrent_layers=[1]", "model.d_model=32", "model.heads=2", "model.head_dim=16",
        "model.d_ff=64", "model.vocab=320", "model.seq_len=64", "model.window=16", "model.state_size=16",
        "train.batch=2", "optim.warmup=2", "train.eval_every=0", "train.peak_gflops=1", "log.every=1"]


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def close(a, b, rel=1e-9):
    return a is not None and b is not None and math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-12)


def tool(*args, env=None):
    out = subprocess.run([PY, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=240,
                         env=env)
    check("Traceback" not in out.stderr, f"fidelity_study {args}: traceback\n{out.stderr}")
    return out


def check_png(path):
    data = path.read_bytes() if path.is_file() else b""
    check(len(data) > 10000, f"{path}: missing or only {len(data)} bytes")
    check(data[:8] == b"\x89PNG\r\n\x1a\n" and data[-8:-4] == b"IEND", f"{path}: not a whole PNG")


def std(values):
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


# ---------------------------------------------------------------- 1. unit checks
def unit_checks():
    # Equal FLOPs: steps = budget / (training FLOPs/token x tokens/step), to the nearest step.
    check(fs.steps_for_budget(1e12, 6e6, 4096) == 41, "1e12 / (6e6 x 4096) = 40.69 -> 41")
    check(fs.steps_for_budget(1e12, 3e6, 4096) == 81, "half the FLOPs/token: 81.4 -> 81 steps")
    check(fs.steps_for_budget(3e8, 1.72e5, 128) == 14 and fs.steps_for_budget(3e8, 2.458e5, 128) == 10,
          "the tiny slide / rec budgets")
    check(fs.steps_for_budget(1.0, 6e6, 4096) == 1, "at least one step")
    check(fs.steps_for_tokens(1e6, 4096) == 244 and fs.steps_for_tokens(10, 4096) == 1, "equal tokens")
    check(fs.plan_steps(("flops", 1e12), 6e6, 4096) == 41 and fs.plan_steps(("tokens", 8192), 6e6, 4096) == 2
          and fs.plan_steps(("steps", 7), 6e6, 4096) == 7, "plan_steps")
    for bad in ((1e12, 0, 4096), (1e12, 6e6, 0)):
        try:
            fs.steps_for_budget(*bad)
            raise AssertionError(f"steps_for_budget{bad} accepted")
        except ValueError:
            pass
    check(fs.parse_amount("2.5P", "x") == 2.5e15 and fs.parse_amount("3e12", "x") == 3e12
          and fs.parse_amount("40M", "x") == 4e7, "parse_amount")
    check(fs.parse_seeds("1,3-5") == [1, 3, 4, 5] and fs.parse_seeds("7") == [7], "parse_seeds")
    for bad in (lambda: fs.parse_amount("lots", "--flops"), lambda: fs.parse_seeds("1,1"),
                lambda: fs.parse_models(["slide", "slide"]), lambda: fs.parse_models(["Bad Name"]),
                lambda: fs.parse_models(["x=notkv"])):
        try:
            bad()
            raise AssertionError("bad input accepted")
        except fs.StudyError:
            pass
    resolved = {"model": {"layers": 12, "seq_len": 512}}
    models = {m["name"]: m for m in fs.parse_models(
        ["slide", "slide+1", "xl", "rec:lstm:dual", "mine=model.variant=slide model.d_ff=64"])}
    check(fs.model_overrides(models["slide"], resolved) == ["model.variant=slide"], "slide")
    check(fs.model_overrides(models["slide+1"], resolved) == ["model.variant=slide", "model.layers=13"],
          "slide+1: Slide:13L of a 12-layer config")
    check(fs.model_overrides(models["xl"], resolved) == ["model.variant=xl", "model.window=512"], "xl: W = N")
    check(fs.model_overrides(models["rec:lstm:dual"], resolved) == ["model.variant=rec:lstm:dual"], "rec")
    check(fs.model_overrides(models["mine"], resolved) == ["model.variant=slide", "model.d_ff=64"], "custom")
    check(fs.model_dir_name("rec:fixed:skip") == "rec_fixed_skip", "folder name")
    s = fs.spread([3.0, 3.2, 3.7])
    check(close(s["mean"], 3.3) and close(s["std"], math.sqrt(0.13)) and s["min"] == 3.0 and s["max"] == 3.7
          and s["n"] == 3, f"spread {s}")
    s = fs.spread([5.0, None])
    check(s["mean"] == 5.0 and s["std"] is None and s["n"] == 1, f"one value: {s}")
    print("unit checks: equal-FLOPs/equal-token step counts, budgets, seeds, model names, spread")


# ---------------------------------------------------------------- 2. a hand-written study
def eval_json(bits, long_range=True, ablation=True, layers=True):
    """A `brt-dist eval --json` report with test bits/token `bits` and fields offset from it."""
    rep = {"split": "test", "tokens": 1000, "bits_per_token": bits, "bits_per_byte": bits / 2,
           "position_buckets": [{"begin": 0, "end": 512, "tokens": 500, "bits_per_token": bits + 0.1},
                                {"begin": 512, "end": 4096, "tokens": 500, "bits_per_token": bits - 0.1},
                                {"begin": 4096, "end": 32768, "tokens": 0, "bits_per_token": 0},
                                {"begin": 32768, "end": -1, "tokens": 0, "bits_per_token": 0}]}
    if long_range:
        rep["long_range"] = [{"name": n, "tokens": 250, "nats": 0, "bits_per_token": bits + d}
                             for n, d in (("first", 1.0), ("within_w", -0.5), ("within_wl", 0.0),
                                          ("beyond_wl", 0.25))]
    if ablation:
        rep["ablation"] = [{"mode": "segment", "applies": True, "bits_per_token": bits + 0.05,
                            "delta_bits_per_token": 0.05,
                            "long_range": [{"name": n, "tokens": 250, "bits_per_token": bits + d + e}
                                           for n, d, e in (("first", 1.0, 0.0), ("within_w", -0.5, 0.01),
                                                           ("within_wl", 0.0, 0.02), ("beyond_wl", 0.25, 0.2))]},
                           {"mode": "block", "applies": False, "bits_per_token": bits,
                            "delta_bits_per_token": 0.0, "long_range": []}]
    if layers:
        rep["layers"] = [{"layer": 1, "kind": "recurrent", "gate": {"kind": "fixed", "mean": bits / 10, "std": 0.1},
                          "state_share": 0.5}]
    return rep


def write_study(root):
    """Model A (rec-like): 3 seeds with test bits 3.0, 3.2, 3.7 and every diagnostic. Model B:
    2 seeds (4.0, 4.5) whose eval JSON has no long_range/ablation/layers (an older brt-dist),
    and seed 2 has no validation eval. Model C refused; model D's one run failed to train."""
    (root / "runs").mkdir(parents=True)
    (root / "study.json").write_text(json.dumps({"models": ["B", "A", "C", "D"]}))

    def model(name, **desc):
        d = root / "runs" / fs.model_dir_name(name)
        d.mkdir()
        (d / "model.json").write_text(json.dumps(dict({"name": name, "status": "ok", "overrides": []}, **desc)))
        return d

    a = model("A", model_variant="rec:fixed:skip", params=1000, flops_per_token=6e3, tokens_per_step=100, steps=10)
    b = model("B", model_variant="slide", params=900, flops_per_token=4e3, tokens_per_step=100, steps=15)
    model("C", status="refused", error="brt-dist train: error: the feedback variant is not implemented yet")
    d = model("D", model_variant="xl", params=900, flops_per_token=5e3, tokens_per_step=100, steps=12)
    losses = {}
    for mdir, seeds, steps in ((a, {1: 3.0, 2: 3.2, 3: 3.7}, 10), (b, {1: 4.0, 2: 4.5}, 15)):
        for seed, test in seeds.items():
            run = mdir / f"seed-{seed}"
            run.mkdir()
            (run / "run.json").write_text(json.dumps({"model": mdir.name, "seed": seed, "status": "ok"}))
            loss = [2.0 + seed + 0.1 * (steps - s) for s in range(1, steps + 1)]
            lines = [json.dumps({"event": "train", "step": s, "loss": l, "tokens_seen": 100 * s})
                     for s, l in zip(range(1, steps + 1), loss)]
            if mdir == a and seed == 1:
                lines.insert(3, '{"event":"train","step":4,"loss":')  # a job killed mid-line, resumed
            (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
            losses[(mdir.name, seed)] = loss
            full = mdir == a
            (run / "eval-test.json").write_text(json.dumps(eval_json(test, full, full, full)))
            if not (mdir == b and seed == 2):
                (run / "eval-validation.json").write_text(json.dumps(eval_json(test + 0.5, full, full, full)))
    run = d / "seed-1"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"model": "D", "seed": 1, "status": "train failed"}))
    return losses


def hand_written(work):
    study = work / "hand"
    losses = write_study(study)
    out = tool("collect", study, "--train-tail", "0.3")
    check(out.returncode == 0, f"collect: exit {out.returncode}\n{out.stdout}{out.stderr}")
    check(f"{study / 'runs' / 'A' / 'seed-1' / 'metrics.jsonl'}:4:" in out.stderr,
          f"no warning naming the cut-off line\n{out.stderr}")
    rows = {r["model"]: r for r in csv.DictReader(open(study / "fidelity.csv"))}
    check(list(rows) == ["B", "A", "C", "D"], f"rows in the study's order: {list(rows)}")
    a, b = rows["A"], rows["B"]
    f = float
    check(close(a["test_bits_mean"], 3.3) and close(a["test_bits_std"], math.sqrt(0.13))
          and close(a["test_bits_min"], 3.0) and close(a["test_bits_max"], 3.7) and a["test_bits_n"] == "3",
          f"A test bits {a['test_bits_mean']} {a['test_bits_std']}")
    check(close(b["test_bits_mean"], 4.25) and close(b["test_bits_std"], std([4.0, 4.5])), "B test bits")
    check(close(b["val_bits_mean"], 4.5) and b["val_bits_std"] == "" and b["val_bits_n"] == "1",
          "B validation: one seed only -> no std")
    # Train loss: the last 30% of 10 steps = steps 8, 9, 10 (the cut-off line is skipped).
    tail = [sum(losses[("A", s)][7:]) / 3 / LN2 for s in (1, 2, 3)]
    check(close(a["train_bits_mean"], sum(tail) / 3) and close(a["train_bits_std"], std(tail)),
          f"A train bits {a['train_bits_mean']} vs {sum(tail) / 3}")
    tail_b = [sum(losses[("B", s)][10:]) / 5 / LN2 for s in (1, 2)]  # steps > 10.5: 11..15
    check(close(b["train_bits_mean"], sum(tail_b) / 2), "B train bits")
    check(close(a["compute_flops_mean"], 1000 * 6e3) and close(b["compute_flops_mean"], 1500 * 4e3), "compute")
    check(close(a["pos_0-512_bits_mean"], 3.4) and close(a["pos_512-4k_bits_mean"], 3.2), "position buckets")
    check(a["pos_4k-32k_bits_mean"] == "" and a["pos_32k+_bits_n"] == "0", "empty buckets are blank")
    check(close(a["range_first_bits_mean"], 4.3) and close(a["range_within_w_bits_mean"], 2.8)
          and close(a["range_beyond_wl_bits_std"], math.sqrt(0.13)), "long-range classes")
    check(b["range_first_bits_mean"] == "" and b["ablate_segment_delta_bits_mean"] == "",
          "no long_range in B's JSON -> blank cells")
    check(close(a["ablate_segment_delta_bits_mean"], 0.05) and close(a["ablate_segment_beyond_wl_delta_bits_mean"], 0.2)
          and close(a["ablate_segment_within_w_delta_bits_mean"], 0.01), "ablation deltas")
    check(a["ablate_block_delta_bits_mean"] == "", "an ablation that does not apply is blank")
    check(close(a["layer1_gate_mean_mean"], 0.33) and close(a["layer1_state_share_mean"], 0.5), "layers")
    check(rows["C"]["status"] == "refused" and rows["C"]["seeds"] == "0", "refused model row")
    md = (study / "fidelity.md").read_text()
    check("| A | rec:fixed:skip | 1k | 6000 | 10 | 1k | 6e+06 | 3 | " in md, f"A's row\n{md}")
    check(f"{3.3:.4f} ± {math.sqrt(0.13):.4f}" in md, "mean ± std in fidelity.md")
    check("**C**: refused by brt-dist: brt-dist train: error: the feedback variant" in md, "refused listed")
    check("D seed 1: train failed" in md, f"failed run listed\n{md}")
    check("### Long-range diagnostics" in md and "### Carried-state ablation" in md and "> W·L" in md, "md tables")
    runs = list(csv.DictReader(open(study / "fidelity_runs.csv")))
    check(len(runs) == 5 and {r["model"] for r in runs} == {"A", "B"}, "fidelity_runs.csv: 5 runs")
    for png in ("bits_vs_flops", "loss_vs_position", "long_vs_short_range", "ablation"):
        check_png(study / f"{png}.png")
    out2 = tool("collect", study, "--out", work / "hand-minmax", "--spread", "minmax", "--no-plots")
    check(out2.returncode == 0, out2.stderr)
    check(f"{3.3:.4f} [3.0000, 3.7000]" in (work / "hand-minmax" / "fidelity.md").read_text(), "min-max spread")
    check(not list((work / "hand-minmax").glob("*.png")), "--no-plots")
    print("hand-written study: mean/std/min/max over seeds, train-loss tail, buckets, long-range, ablation, "
          "layers, blanks, refused and failed runs, both spreads and 4 PNGs as computed by hand")


# ---------------------------------------------------------------- 3. end to end with brt-dist
def swept(work):
    """--lr-sweep's collect: model E at two rates (E@lr=0.01 validation 3.6, E@lr=0.03 validation
    3.4): the tables show E at 0.03 only, fidelity_sweep.md both; sweep_models names and overrides."""
    check([m["name"] for m in fs.sweep_models([{"name": "E", "variant": "slide", "extra_layers": 0}], "0.01,0.03")]
          == ["E@lr=0.01", "E@lr=0.03"], "sweep names")
    over = fs.model_overrides(fs.sweep_models([{"name": "E", "variant": "slide", "extra_layers": 0}], "0.01")[0],
                              {"model": {"seq_len": 8, "layers": 2}})
    check(over == ["model.variant=slide", "optim.lr=0.01"], f"sweep overrides {over}")
    study = work / "swept"
    (study / "runs").mkdir(parents=True)
    (study / "study.json").write_text(json.dumps({"models": ["E@lr=0.01", "E@lr=0.03"]}))
    for lr, val in (("0.01", 3.6), ("0.03", 3.4)):
        d = study / "runs" / fs.model_dir_name(f"E@lr={lr}")
        (d / "seed-1").mkdir(parents=True)
        (d / "model.json").write_text(json.dumps({"name": f"E@lr={lr}", "status": "ok", "overrides": [],
                                                  "sweep_of": "E", "lr": lr, "model_variant": "slide"}))
        (d / "seed-1" / "run.json").write_text(json.dumps({"seed": 1, "status": "ok"}))
        (d / "seed-1" / "eval-test.json").write_text(json.dumps(eval_json(val - 0.2, False, False, False)))
        (d / "seed-1" / "eval-validation.json").write_text(json.dumps(eval_json(val, False, False, False)))
    out = tool("collect", study, "--no-plots")
    check(out.returncode == 0, f"collect of a sweep: {out.stderr}")
    rows = [r["model"] for r in csv.DictReader(open(study / "fidelity.csv"))]
    check(rows == ["E (lr 0.03)"], f"the best rate stands for E: {rows}")
    sweep = (study / "fidelity_sweep.md").read_text()
    check("| E | 3.6000 | 3.4000 | 0.03 |" in sweep, f"fidelity_sweep.md\n{sweep}")
    print("lr sweep: each model at its best validation rate, every rate in fidelity_sweep.md")


def write_corpus(root):
    import random
    rng = random.Random(3)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 6))) for _ in range(300)]
    for split, n in (("train", 3), ("validation", 1), ("test", 1)):
        (root / split).mkdir(parents=True)
        for d in range(n):
            (root / split / f"doc{d}.txt").write_text(
                "\n".join(" ".join(rng.choice(words) for _ in range(10)) + "." for _ in range(200)))


def end_to_end(work, brt_dist):
    corpus, study = work / "corpus", work / "study"
    write_corpus(corpus)
    budget = 3e8
    cmd = ["run", study, "--config", REPO / "configs" / "tiny.toml", "--corpus", corpus, "--brt-dist", brt_dist,
           "--models", "slide", "rec:fixed:skip", REFUSED, "--seeds", "1,2", "--flops", f"{budget:g}",
           "--threads", "1", "--", *TINY]
    out = tool(*cmd)
    logs = "".join(f"== {p}\n{p.read_text()[-1500:]}\n" for p in study.glob("runs/*/seed-*/*.log"))
    check(out.returncode == 0, f"run: exit {out.returncode}\n{out.stdout}{out.stderr}\n{logs}")
    check(re.search(rf"model {REFUSED}: refused by brt-dist, skipped: brt-dist train: error: .*{REFUSED}.* is "
                    "not a variant", out.stderr), f"no refusal message naming the variant\n{out.stderr}")
    check(not (study / "runs" / fs.model_dir_name(REFUSED) / "seed-1").exists(), "refused model was trained")
    rows = {r["model"]: r for r in csv.DictReader(open(study / "fidelity.csv"))}
    check(set(rows) == {"slide", "rec:fixed:skip", REFUSED}, f"rows {sorted(rows)}")
    check(rows[REFUSED]["status"] == "refused", "refused row")
    md = (study / "fidelity.md").read_text()
    check(f"**{REFUSED}**: refused by brt-dist" in md, "refusal in fidelity.md")
    steps = {}
    for name in ("slide", "rec:fixed:skip"):
        r, mdir = rows[name], study / "runs" / fs.model_dir_name(name)
        # FLOPs/token as brt-dist printed it at the start of training (model.md §10) x tokens/step.
        log = (mdir / "seed-1" / "train.log").read_text()
        fpt = float(re.search(r"FLOPs/token \(model.md §10, training = 3x forward\): ([0-9.e+-]+);", log).group(1))
        check(close(r["flops_per_token"], fpt), f"{name}: FLOPs/token {r['flops_per_token']} vs train.log {fpt}")
        check(r["tokens_per_step"] == "128", f"{name}: 2 streams x 64 tokens per step, got {r['tokens_per_step']}")
        want = max(1, round(budget / (fpt * 128)))
        check(int(r["planned_steps"]) == want and close(r["steps_mean"], want), f"{name}: {r['planned_steps']} "
              f"steps planned, {r['steps_mean']} trained; {budget:g} / ({fpt:g} x 128) -> {want}")
        check(abs(float(r["compute_flops_mean"]) - budget) <= 0.5 * fpt * 128, f"{name}: compute off budget")
        steps[name] = want
        tests = [json.loads((mdir / f"seed-{s}" / "eval-test.json").read_text()) for s in (1, 2)]
        vals = [json.loads((mdir / f"seed-{s}" / "eval-validation.json").read_text())["bits_per_token"] for s in (1, 2)]
        tb = [t["bits_per_token"] for t in tests]
        check(close(r["test_bits_mean"], sum(tb) / 2) and close(r["test_bits_std"], std(tb)), f"{name}: test bits")
        check(close(r["val_bits_mean"], sum(vals) / 2), f"{name}: validation bits")
        check(0 < float(r["test_bits_mean"]) < math.log2(320) + 1, f"{name}: test bits {r['test_bits_mean']}")
        check(r["pos_0-512_bits_n"] == "2" and float(r["train_bits_mean"]) > 0, f"{name}: position bucket, train")
        has_lr = all("long_range" in t for t in tests)
        check((r.get("range_beyond_wl_bits_n") == "2") == has_lr, f"{name}: long-range columns vs the eval JSON")
    check(steps["slide"] > steps["rec:fixed:skip"], f"the cheaper slide gets more steps at equal FLOPs: {steps}")
    pngs = ["bits_vs_flops", "loss_vs_position"]
    if rows["slide"].get("range_first_bits_n") == "2":
        pngs.append("long_vs_short_range")
    else:
        check("long_vs_short_range.png not drawn" in out.stderr, "note on the missing long-range plot")
    if rows["rec:fixed:skip"].get("ablate_segment_delta_bits_n") == "2":  # brt-dist eval --ablate
        pngs.append("ablation")
    for png in pngs:
        check_png(study / f"{png}.png")

    # Running again: every model x seed has its eval JSON -> nothing is trained or evaluated.
    before = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in study.glob("runs/*/seed-*/*")}
    out = tool(*cmd)
    check(out.returncode == 0, f"rerun: exit {out.returncode}\n{out.stdout}{out.stderr}")
    check(out.stdout.count("skipped, eval JSON exists") == 4 and not TRAINING.search(out.stdout),
          f"rerun trained something\n{out.stdout}")
    after = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in study.glob("runs/*/seed-*/*")}
    check(before == after, "rerun changed run files: " + ", ".join(str(p) for p in after if before.get(p) != after[p]))
    # An interrupted run (eval JSON gone, checkpoint there): only that eval runs again.
    (study / "runs" / "slide" / "seed-2" / "eval-test.json").unlink()
    out = tool(*cmd)
    check(out.returncode == 0 and "slide seed 2: trained (ckpt-" in out.stdout and not TRAINING.search(out.stdout),
          f"resume of an evaluation\n{out.stdout}{out.stderr}")
    check((study / "runs" / "slide" / "seed-2" / "eval-test.json").is_file(), "eval JSON rewritten")

    # User errors: exit 2 naming the file.
    out = tool("run", work / "s2", "--config", work / "no.toml", "--data", corpus, "--brt-dist", brt_dist,
               "--models", "slide", "--steps", "1")
    check(out.returncode == 2 and "no.toml" in out.stderr, f"missing config: {out.returncode} {out.stderr}")
    out = tool("run", work / "s2", "--config", REPO / "configs" / "tiny.toml", "--data", corpus,
               "--brt-dist", brt_dist, "--models", "slide", "--steps", "1")
    check(out.returncode == 2 and f"{corpus}: not a prepared corpus" in out.stderr, f"--data: {out.stderr}")
    out = tool("collect", work / "nothing")
    check(out.returncode == 2 and "nothing" in out.stderr, f"collect of no study: {out.stderr}")
    check(tool("--help").returncode == 0 and "slide+1" in tool("run", "--help").stdout, "--help")
    print(f"end to end: slide {steps['slide']} and rec:fixed:skip {steps['rec:fixed:skip']} steps at "
          f"{budget:g} FLOPs x 2 seeds, {REFUSED} refused and skipped, table = eval JSONs, "
          f"{len(pngs)} PNGs; a rerun trains nothing, an interrupted eval resumes; user errors exit 2")


def main():
    brt_dist = str(Path(sys.argv[1]).resolve())
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    unit_checks()
    with tempfile.TemporaryDirectory(prefix="fidelity-study-") as tmp:
        work = Path(tmp)
        hand_written(work)
        swept(work)
        end_to_end(work, brt_dist)
    print("PASS")


if __name__ == "__main__":
    main()
