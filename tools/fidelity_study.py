#!/usr/bin/python3
"""Fidelity studies for brt-dist: train a list of models x seeds on one corpus at equal training
FLOPs (model.md §10) or equal tokens, evaluate held-out bits/token, and write a table
(fidelity.csv, fidelity.md, fidelity_runs.csv) and PNG plots (bits/token vs training FLOPs,
loss by position in the document, long- vs short-range loss). See docs/fidelity.md.

  fidelity_study.py run STUDY_DIR --config CONFIG DATA --models NAME... --seeds LIST BUDGET
                    [--ranks N] [--threads N] [--dry-run] [--task KINDS ...] [--lr-sweep A,B,...]
                    [-- key=value ...]
      DATA:   --data SHARDS_DIR | --corpus PG19_DIR | --books FILE... | --kjv
      BUDGET: --flops F (equal training FLOPs) | --tokens T (equal tokens) | --steps N
  fidelity_study.py collect STUDY_DIR [--out DIR] [--spread std|minmax] [--no-plots]

`run` trains every model x seed with `brt-dist train` (resumable: a model x seed whose eval JSON
exists is skipped, an unfinished one continues from its checkpoint), evaluates the validation and
test splits with `brt-dist eval --json` (with --ablate when the binary has it), then collects.
With --task, every model trains with long-range task documents mixed in and is also scored with
`brt-dist eval --task` by distance (tools/task_study.py: task.md, task.csv, task-KIND.png).
A model the binary refuses (its config is rejected) is reported and skipped. Exit status: 0 done
(refused models are listed, not failures), 1 a run failed, 2 unusable input (the message names the
file), 130 interrupted (run again to resume). Uses only Debian's python3-numpy/-matplotlib.
"""
import argparse
import json
import os
import re
import shlex
import signal
import sys
import time
import tomllib
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (ctest runs from it)
sys.path.insert(0, str(Path(__file__).resolve().parent))  # metrics_records, scaling_study

from scaling_study import parse_train_output  # noqa: E402
from study_common import StudyError, si  # noqa: E402
from fidelity_table import TOOL, SPLITS, best_rates, collect, say, spread, warn, write_tables  # noqa: E402,F401  (spread: tests)
from study_runner import Runner, error_line  # noqa: E402
import task_study  # noqa: E402

MODEL_HELP = """models (--models NAME ...):
  slide, xl, rec:{fixed|lstm}:{skip|dual}, bst:{sh|mh|mf}:{s4d|unstructured}, feedback:...
                   model.variant=NAME (xl also model.window = model.seq_len: W = N, model.md §6)
  NAME+K           the same with K more layers than the config's model.layers, e.g. slide+1
                   (the compute-matched Slide:13L analogue of a 12-layer model)
  NAME=OVERRIDES   any set of config overrides, e.g. 'rec-s32=model.variant=rec:fixed:skip
                   model.state_size=32' (applied after the overrides given after --)
  brt-dist checks every variant: one it refuses is reported and skipped."""
PROBE_OVERRIDES = ["train.steps=0", "optim.total_steps=1", "data.source=synthetic", "data.tasks.rate=0", "log.metrics_path=",
                   "checkpoint.dir=", "train.peak_gflops=1", "train.eval_every=0"]
SI_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


# ---------------------------------------------------------------- budgets and step counts
def parse_amount(text, what):
    """'3e12', '2.5P', '40M' -> a positive float (k/M/G(=B)/T/P/E suffixes)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?)\s*([kKMGBTPE]?)\s*", str(text))
    if not m or float(m.group(1)) * SI_SUFFIX[m.group(2)] <= 0:
        raise StudyError(f"{what}: expected a positive number such as 3e12 or 2.5P, got '{text}'")
    return float(m.group(1)) * SI_SUFFIX[m.group(2)]


def parse_seeds(text):
    """'1,2,3' or '1-3' or '1,4-5' -> [1, 2, 3] / [1, 4, 5] (duplicates are an error)."""
    seeds = []
    for part in str(text).split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
            raise StudyError(f"--seeds: expected a list such as 1,2,3 or 1-3, got '{text}'")
        seeds += range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1)
    if len(set(seeds)) != len(seeds):
        raise StudyError(f"--seeds: a seed is listed twice in '{text}'")
    return seeds


def steps_for_budget(budget_flops, flops_per_token, tokens_per_step):
    """Optimizer steps whose training FLOPs (model.md §10: tokens x training FLOPs/token) come
    closest to budget_flops, at least 1. A cheaper model gets more steps: equal compute."""
    if flops_per_token <= 0 or tokens_per_step <= 0:
        raise ValueError(f"FLOPs/token {flops_per_token} and tokens/step {tokens_per_step} must be positive")
    return max(1, int(round(budget_flops / (flops_per_token * tokens_per_step))))


def steps_for_tokens(tokens, tokens_per_step):
    """Optimizer steps that see closest to `tokens` tokens, at least 1: equal data."""
    if tokens_per_step <= 0:
        raise ValueError(f"tokens/step {tokens_per_step} must be positive")
    return max(1, int(round(tokens / tokens_per_step)))


def plan_steps(budget, flops_per_token, tokens_per_step):
    """budget = ("flops", F) | ("tokens", T) | ("steps", N) -> steps for one model."""
    kind, amount = budget
    if kind == "flops":
        return steps_for_budget(amount, flops_per_token, tokens_per_step)
    if kind == "tokens":
        return steps_for_tokens(amount, tokens_per_step)
    return int(amount)


# ---------------------------------------------------------------- models
MODEL_NAME = re.compile(r"[a-z][a-z0-9_]*(?::[a-z0-9_]+)*(?:\+\d+)?")


def parse_models(specs):
    """--models words -> [{"name", "variant" | "overrides", "extra_layers"}], names unique."""
    models = []
    for spec in specs:
        name, sep, rest = spec.partition("=")
        name = name.strip()
        if sep:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:+-]*", name) or not rest.strip():
                raise StudyError(f"--models: '{spec}': expected NAME=key=value [key=value ...]")
            words = shlex.split(rest)
            bad = [w for w in words if "=" not in w]
            if bad:
                raise StudyError(f"--models: '{spec}': '{bad[0]}' is not key=value")
            models.append({"name": name, "overrides": words})
        elif MODEL_NAME.fullmatch(name):
            variant, _, extra = name.partition("+")
            models.append({"name": name, "variant": variant, "extra_layers": int(extra or 0)})
        else:
            raise StudyError(f"--models: '{spec}' is neither a variant name (slide, rec:fixed:skip, "
                             "slide+1, ...) nor NAME=key=value ...")
    names = [m["name"] for m in models]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise StudyError(f"--models: {', '.join(dup)} listed twice")
    folders = [model_dir_name(n) for n in names]
    same = sorted({n for n, f in zip(names, folders) if folders.count(f) > 1})
    if same:
        raise StudyError(f"--models: {', '.join(same)} would share the folder runs/{model_dir_name(same[0])}; "
                         "rename one")
    return models


def sweep_models(models, lr_sweep):
    """--lr-sweep A,B,...: every model at every rate, named NAME@lr=A (optim.lr=A); collect then
    reports each at its best rate by validation bits/token (fidelity_table.best_rates)."""
    if not lr_sweep:
        return models
    rates = [r.strip() for r in lr_sweep.split(",") if r.strip()]
    for r in rates:
        parse_amount(r, "--lr-sweep")
    return [dict(m, name=f"{m['name']}@lr={r}", sweep_of=m["name"], lr=r) for m in models for r in rates]


def model_overrides(model, resolved):
    """The config overrides of a model, given the resolved config of the study's base
    (config file + overrides after --): model.layers and model.seq_len come from it."""
    if "lr" in model:  # a rate of --lr-sweep
        return model_overrides({k: v for k, v in model.items() if k != "lr"}, resolved) + [f"optim.lr={model['lr']}"]
    if "overrides" in model:
        return list(model["overrides"])
    m = resolved.get("model", {})
    words = [f"model.variant={model['variant']}"]
    if model["variant"] == "xl":  # one block per segment: W = N (model.md §6)
        words.append(f"model.window={m['seq_len']}")
    if model["extra_layers"]:
        words.append(f"model.layers={m['layers'] + model['extra_layers']}")
    return words


def model_dir_name(name):
    """A folder name for a model: ':' and anything unusual become '_' (rec:fixed:skip ->
    rec_fixed_skip); the real name is kept in model.json."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", name)


# ---------------------------------------------------------------- running brt-dist
def resolve_config(runner, config, overrides):
    """The fully resolved config (`brt-dist config show`) as a dict."""
    rc, out = runner.capture("config", "show", config, *overrides)
    if rc != 0:
        raise StudyError(f"{config}: brt-dist config show failed: {error_line(out)}")
    text = out[out.index("[model]"):] if "[model]" in out else out
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise StudyError(f"{config}: cannot read `brt-dist config show` output ({e})") from None


def probe(runner, config, overrides):
    """What brt-dist train says about a model without training it (train.steps=0, synthetic
    data): {"ok": True, training FLOPs/token (model.md §10, as brt-dist counts them), tokens per
    step, parameters, variant} or {"ok": False, "error": its error line}."""
    rc, out = runner.capture("train", config, *overrides, *PROBE_OVERRIDES, launcher=True)
    info = parse_train_output(out)
    if rc != 0 or "train_flops_per_token" not in info or "streams_seq" not in info:
        return {"ok": False, "error": error_line(out) if rc != 0 else
                "brt-dist train printed no 'FLOPs/token' or 'data:' line", "log": out}
    streams, seq_len = (int(v) for v in info["streams_seq"])
    dp = int(info["dp_log"][0]) if "dp_log" in info else 1
    return {"ok": True, "flops_per_token": info["train_flops_per_token"], "params": info.get("params"),
            "model_variant": info.get("model_variant"), "streams": streams, "seq_len": seq_len, "dp": dp,
            "tokens_per_step": streams * seq_len * dp, "log": out}


def eval_supports_ablate(runner):
    rc, out = runner.capture("eval", "--help")
    return "--ablate" in out


# ---------------------------------------------------------------- data
def manifest_splits(data_dir):
    """{split: documents} of a prepared shard folder (manifest.tsv, docs/data-format.md)."""
    manifest = Path(data_dir) / "manifest.tsv"
    if not manifest.is_file():
        raise StudyError(f"{data_dir}: not a prepared corpus (no manifest.tsv; see brt-dist prepare)")
    splits = {}
    for lineno, line in enumerate(manifest.read_text().splitlines(), 1):
        words = line.split("\t")
        if words[0] == "split":
            if len(words) < 4 or not words[3].isdigit():
                raise StudyError(f"{manifest}:{lineno}: expected 'split NAME SHARDS DOCUMENTS ...'")
            splits[words[1]] = int(words[3])
    return splits


def books_corpus(books, out_dir, held_out):
    """A PG19-style folder of symlinks: the last `held_out` books are test, the `held_out`
    before them validation, the rest train (in the order given)."""
    books = [Path(b) for b in books]
    for b in books:
        if not b.is_file():
            raise StudyError(f"{b}: no such book (--books)")
    if len(books) < 2 * held_out + 1:
        raise StudyError(f"--books: {len(books)} books; need at least {2 * held_out + 1} for "
                         f"{held_out} validation, {held_out} test and one training book (--held-out)")
    n = len(books)
    parts = {"train": books[:n - 2 * held_out], "validation": books[n - 2 * held_out:n - held_out],
             "test": books[n - held_out:]}
    for split, members in parts.items():
        d = out_dir / split
        d.mkdir(parents=True, exist_ok=True)
        for old in d.iterdir():
            old.unlink()
        for i, b in enumerate(members):
            (d / f"{i:05d}-{b.name}").symlink_to(b.resolve())
    return out_dir


def prepare_data(args, runner, study, vocab):
    """The shard folder to train on: --data as given, else STUDY/data prepared with brt-dist
    prepare from --corpus, --books or --kjv (skipped when its manifest.tsv is there)."""
    if args.data:
        manifest_splits(args.data)
        return Path(args.data).resolve()
    data = study / "data"
    if (data / "manifest.tsv").is_file():
        say(f"data: {data} already prepared")
        return data.resolve()
    if args.corpus:
        if not Path(args.corpus).is_dir():
            raise StudyError(f"{args.corpus}: no such corpus folder (--corpus)")
        source = ["--corpus", str(Path(args.corpus).resolve())]
    elif args.books:
        source = ["--corpus", str(books_corpus(args.books, study / "corpus", args.held_out).resolve())]
    else:
        source = ["--kjv"]
    cmd = ["prepare", *source, "--out", str(data), "--vocab", str(args.vocab or vocab)]
    say(f"data: brt-dist {shlex.join(cmd)} (log {study / 'prepare.log'})")
    rc = runner.to_log(cmd, study / "prepare.log", args.progress_s, "prepare")
    if rc != 0:
        raise StudyError(f"{study / 'prepare.log'}: brt-dist prepare failed (exit {rc}): "
                         f"{error_line((study / 'prepare.log').read_text(errors='replace'))}")
    return data.resolve()


# ---------------------------------------------------------------- run mode
def final_checkpoint(ckpt_dir):
    """(path, step) of the newest checkpoint (ckpt/latest), or (None, 0)."""
    latest = Path(ckpt_dir) / "latest"
    if not latest.is_file():
        return None, 0
    name = latest.read_text().strip()
    m = re.search(r"ckpt-(\d+)\.h5$", name)
    path = Path(ckpt_dir) / name
    return (path, int(m.group(1))) if m and path.is_file() else (None, 0)


def write_json(path, obj):
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    tmp.replace(path)


def fmt_duration(s):
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def run_study(args, extra):
    """Trains and evaluates every model x seed; returns (failed runs, refused models)."""
    study = Path(args.study_dir)
    study.mkdir(parents=True, exist_ok=True)
    runner = Runner(args.brt_dist, args.ranks, args.threads, args.mpirun, shlex.split(args.mpirun_args))
    runner.check_binary()
    if not Path(args.config).is_file():
        raise StudyError(f"{args.config}: no such config file (--config)")
    config = str(Path(args.config).resolve())
    models = sweep_models(parse_models(args.models), args.lr_sweep)
    seeds = parse_seeds(args.seeds)
    budget = (("flops", parse_amount(args.flops, "--flops")) if args.flops else
              ("tokens", parse_amount(args.tokens, "--tokens")) if args.tokens else ("steps", args.steps))
    if budget[0] == "steps" and budget[1] < 1:
        raise StudyError("--steps: must be at least 1")
    base = resolve_config(runner, config, extra)
    data = prepare_data(args, runner, study, base["model"]["vocab"])
    splits = manifest_splits(data)
    eval_splits = [s for s, _ in SPLITS if splits.get(s, 0) > 0]
    for s, _ in SPLITS:
        if s not in eval_splits:
            warn(f"note: {data}: the {s} split has no documents; not evaluated")
    if not eval_splits:
        raise StudyError(f"{data}: neither a validation nor a test split to evaluate on")
    common = list(extra) + ["data.source=shards", f"data.path={data}"]
    window, seq_len = base["model"]["window"], base["model"]["seq_len"]
    common += task_study.overrides(args, window)
    task_evals = task_study.plan(args, window)
    ablate = not args.no_ablate and eval_supports_ablate(runner)
    # The study's models: those of earlier invocations first (a study can grow), then new ones.
    known = []
    if (study / "study.json").is_file():
        try:
            known = json.loads((study / "study.json").read_text()).get("models", [])
        except json.JSONDecodeError as e:
            raise StudyError(f"{study / 'study.json'}: not JSON ({e})") from None
    names = known + [m["name"] for m in models if m["name"] not in known]
    write_json(study / "study.json", {
        "config": config, "overrides": list(extra), "models": names, "seeds": seeds,
        "budget": {"kind": budget[0], "amount": budget[1]}, "data": str(data), "ranks": args.ranks,
        "eval_splits": eval_splits, "ablate": ablate, "brt_dist": args.brt_dist,
        "task": sorted(task_evals), "task_window": window})

    # 1. Each model's FLOPs/token and tokens/step from brt-dist itself; the refused are skipped.
    planned, refused = [], []
    for m in models:
        overrides = common + model_overrides(m, base)
        info = probe(runner, config, overrides)
        mdir = study / "runs" / model_dir_name(m["name"])
        mdir.mkdir(parents=True, exist_ok=True)
        (mdir / "probe.log").write_text(info.pop("log"))
        desc = {"name": m["name"], "config": config, "overrides": overrides,
                **({"sweep_of": m["sweep_of"], "lr": m["lr"]} if "lr" in m else {})}
        if not info["ok"]:
            warn(f"model {m['name']}: refused by brt-dist, skipped: {info['error']} "
                 f"(log {mdir / 'probe.log'})")
            write_json(mdir / "model.json", dict(desc, status="refused", error=info["error"]))
            refused.append(m["name"])
            continue
        info.pop("ok")
        steps = plan_steps(budget, info["flops_per_token"], info["tokens_per_step"])
        desc.update(info, status="ok", steps=steps, tokens=steps * info["tokens_per_step"],
                    compute_flops=steps * info["tokens_per_step"] * info["flops_per_token"])
        write_json(mdir / "model.json", desc)
        planned.append((m, mdir, desc))
    what = {"flops": f"equal training FLOPs, {budget[1]:.4g} per run (model.md §10)",
            "tokens": f"equal tokens, {si(budget[1])} per run", "steps": f"{budget[1]} steps per run"}[budget[0]]
    say(f"plan: {len(planned)} models x {len(seeds)} seeds, {what}:")
    say(f"  {'model':<22} {'variant':<20} {'params':>8} {'FLOPs/tok':>10} {'tok/step':>9} "
        f"{'steps':>7} {'tokens':>8} {'compute':>10}")
    for m, _, d in planned:
        say(f"  {m['name']:<22} {str(d.get('model_variant')):<20} {si(d['params'] or 0):>8} "
            f"{d['flops_per_token']:>10.4g} {d['tokens_per_step']:>9} {d['steps']:>7} {si(d['tokens']):>8} "
            f"{d['compute_flops']:>10.4g}")
    if budget[0] == "flops":
        for m, _, d in planned:
            if d["steps"] == 1 and d["compute_flops"] > 1.5 * budget[1]:
                warn(f"note: {m['name']}: one step ({d['compute_flops']:.4g} FLOPs) exceeds the budget")
    if args.dry_run:
        return [], refused

    # 2. Train and evaluate, resumably.
    jobs = [(m, mdir, d, s) for m, mdir, d in planned for s in seeds]
    failed, done_flops, spent = [], 0.0, 0.0

    def evaluated(mdir, seed):
        return all((mdir / f"seed-{seed}" / name).is_file()
                   for name in [f"eval-{s}.json" for s in eval_splits] + list(task_evals))
    total_flops = sum(d["compute_flops"] for _, mdir, d, seed in jobs if not evaluated(mdir, seed))
    for k, (m, mdir, desc, seed) in enumerate(jobs, 1):
        tag = f"[{k}/{len(jobs)}] {m['name']} seed {seed}"
        run_dir = mdir / f"seed-{seed}"
        run_dir.mkdir(exist_ok=True)
        evals = {s: run_dir / f"eval-{s}.json" for s in eval_splits}
        run_json = run_dir / "run.json"
        try:
            previous = json.loads(run_json.read_text()) if run_json.is_file() else {}
        except json.JSONDecodeError:
            previous = {}
        changed = previous.get("steps") not in (None, desc["steps"])
        if evaluated(mdir, seed):
            note = (f"; note: trained for {previous['steps']} steps, the plan now says {desc['steps']} "
                    f"(delete {run_dir} to retrain)") if changed else ""
            say(f"{tag}: skipped, eval JSON exists ({', '.join(p.name for p in evals.values())}){note}")
            continue
        record = {"model": m["name"], "seed": seed, "steps": desc["steps"], "config": config,
                  "overrides": desc["overrides"] + [f"train.seed={seed}"], "ranks": args.ranks,
                  "flops_per_token": desc["flops_per_token"], "tokens_per_step": desc["tokens_per_step"],
                  "status": "running"}
        t0 = time.monotonic()
        if changed:
            warn(f"{tag}: note: started for {previous['steps']} steps, the plan now says {desc['steps']} "
                 f"(the learning-rate schedule changes; delete {run_dir} to start over)")
        ckpt, step = final_checkpoint(run_dir / "ckpt")
        if step >= desc["steps"]:
            say(f"{tag}: trained ({ckpt.name}); evaluating")
        else:
            write_json(run_json, record)  # status "running": the plan this run was started with
            resumed = f", resuming at step {step}" if step else ""
            say(f"{tag}: training {desc['steps']} steps ({si(desc['tokens'])} tokens, "
                f"{desc['compute_flops']:.4g} FLOPs{resumed}); log {run_dir / 'train.log'}")
            cmd = ["train", config, *record["overrides"], f"train.steps={desc['steps']}",
                   f"log.metrics_path={run_dir / 'metrics.jsonl'}", f"checkpoint.dir={run_dir / 'ckpt'}",
                   "checkpoint.resume=true"]
            rc = runner.to_log(cmd, run_dir / "train.log", args.progress_s, tag)
            ckpt, step = final_checkpoint(run_dir / "ckpt")
            if rc != 0 or step < desc["steps"]:
                why = error_line((run_dir / "train.log").read_text(errors="replace"))
                warn(f"{tag}: training failed (exit {rc}, checkpoint at step {step}): {why}; "
                     f"see {run_dir / 'train.log'}")
                write_json(run_json, dict(record, status="train failed", exit=rc, error=why))
                failed.append(f"{m['name']} seed {seed}")
                total_flops -= desc["compute_flops"]
                continue
        record["checkpoint"] = str(ckpt)
        ok = True
        for split, out in evals.items():
            if out.is_file():
                continue
            ok = run_eval(runner, ckpt, split, data, out, run_dir, ablate, args.eval_args, tag,
                          args.progress_s) and ok
        ok = task_study.run_evals(runner, ckpt, data, run_dir, task_evals, seq_len, tag) and ok
        record["status"] = "ok" if ok else "eval failed"
        write_json(run_json, record)
        if not ok:
            failed.append(f"{m['name']} seed {seed}")
            total_flops -= desc["compute_flops"]
            continue
        spent += time.monotonic() - t0
        done_flops += desc["compute_flops"]
        summary = ", ".join(f"{s} {json.loads(p.read_text())['bits_per_token']:.4f}" for s, p in evals.items())
        eta = ""
        if done_flops > 0 and total_flops > done_flops:
            eta = f"; study ETA {fmt_duration(spent / done_flops * (total_flops - done_flops))}"
        say(f"{tag}: done in {time.monotonic() - t0:.1f} s: bits/token {summary}{eta}")
    return failed, refused


def run_eval(runner, ckpt, split, data, out, run_dir, ablate, eval_args, tag, progress_s=0):
    """brt-dist eval of one split into out (written whole: through a .tmp file); with ablate, a
    failure is retried without --ablate (a variant the ablation does not cover)."""
    tmp = Path(str(out) + ".tmp")
    log = run_dir / f"eval-{split}.log"
    base = ["eval", "--checkpoint", ckpt, "--split", split, "--data", data, "--json", tmp,
            *shlex.split(eval_args or "")]
    for flags in ([["--ablate"], []] if ablate else [[]]):
        rc = runner.to_log(base + flags, log, progress_s, tag)
        if rc == 0 and tmp.is_file():
            tmp.replace(out)
            return True
        why = error_line(log.read_text(errors="replace"))
        if flags:
            warn(f"{tag}: eval {split} --ablate failed ({why}); again without --ablate")
        else:
            warn(f"{tag}: eval {split} failed (exit {rc}): {why}; see {log}")
    return False


# ---------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]) + "\n" + MODEL_HELP,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run", help="train and evaluate every model x seed, then collect",
                       epilog=MODEL_HELP + "\n\nrun ... -- key=value ...: config overrides for every model",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("study_dir", help="the study folder (created; running again resumes)")
    r.add_argument("--config", required=True, help="the base config file (e.g. configs/tiny.toml)")
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", metavar="DIR", help="a prepared shard folder (brt-dist prepare --out)")
    src.add_argument("--corpus", metavar="DIR", help="a PG19-style corpus (train/, validation/, test/) "
                     "to prepare into STUDY_DIR/data")
    src.add_argument("--books", nargs="+", metavar="FILE", help="text files, one book each: the last "
                     "--held-out are test, the --held-out before them validation, the rest train")
    src.add_argument("--kjv", action="store_true", help="the bundled King James Bible corpus")
    r.add_argument("--held-out", type=int, default=1, metavar="K", help="--books per held-out split [%(default)s]")
    r.add_argument("--vocab", type=int, help="tokenizer size when preparing [model.vocab]")
    r.add_argument("--models", nargs="+", required=True, metavar="NAME", help="models (see below)")
    r.add_argument("--seeds", default="1", help="train.seed values, e.g. 1,2,3 or 1-3 [%(default)s]")
    r.add_argument("--lr-sweep", metavar="A,B,...", help="every model at every optim.lr; the tables report "
                   "each at its best rate by validation bits/token (fidelity_sweep.md: all of them)")
    b = r.add_mutually_exclusive_group(required=True)
    b.add_argument("--flops", help="equal compute: training FLOPs per run (model.md §10), e.g. 3e15 or 3P")
    b.add_argument("--tokens", help="equal data: tokens per run, e.g. 50M")
    b.add_argument("--steps", type=int, help="the same number of steps for every model")
    r.add_argument("--brt-dist", default=os.environ.get("BRT_DIST", "brt-dist"),
                   help="the binary [$BRT_DIST, else brt-dist on PATH]")
    r.add_argument("--ranks", type=int, default=1, help="processes per run (mpirun when > 1) [%(default)s]")
    r.add_argument("--threads", type=int, help="OMP/BLAS threads per rank")
    r.add_argument("--mpirun", default="mpirun")
    r.add_argument("--mpirun-args", default="--oversubscribe", help="options before -np [%(default)s]")
    r.add_argument("--eval-args", default="", help="more `brt-dist eval` flags, one string (e.g. '--batch 8')")
    r.add_argument("--no-ablate", action="store_true", help="no `eval --ablate` even when brt-dist has it")
    r.add_argument("--progress-s", type=float, default=30.0, help="seconds between progress lines while "
                   "training [%(default)s]; 0 = none")
    r.add_argument("--dry-run", action="store_true", help="print the plan (steps per model) and stop")
    task_study.add_arguments(r)
    c = sub.add_parser("collect", help="the tables and plots of a study folder")
    c.add_argument("study_dir")
    for p in (r, c):
        p.add_argument("--out", help="where fidelity.csv, fidelity.md and the PNGs go [STUDY_DIR]")
        p.add_argument("--spread", choices=["std", "minmax"], default="std",
                       help="spread over seeds in fidelity.md and the error bars [%(default)s]")
        p.add_argument("--train-tail", type=float, default=0.1, help="fraction of the last steps "
                       "whose training loss is averaged [%(default)s]")
        p.add_argument("--no-plots", action="store_true", help="tables only")
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if not 0 < args.train_tail <= 1:
        ap.error("--train-tail must be in (0, 1]")
    bad = [w for w in extra if "=" not in w]
    if bad:
        ap.error(f"after --: '{bad[0]}' is not key=value")
    def stop(signum, frame):  # SIGTERM (kill, Slurm) like Ctrl-C: brt-dist checkpoints, then exit 130
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    try:
        failed, refused = [], []
        if args.mode == "run":
            if args.ranks < 1 or args.held_out < 1:
                ap.error("--ranks and --held-out must be at least 1")
            failed, refused = run_study(args, extra)
            if args.dry_run:
                return 0
        models, keys = collect(args.study_dir, args.train_tail)
        out = Path(args.out or args.study_dir)
        out.mkdir(parents=True, exist_ok=True)
        models, written = best_rates(models, out)
        written += write_tables(models, keys, out, args.spread, args.train_tail)
        written += task_study.collect(args.study_dir, out, args.spread, not args.no_plots)
        if not args.no_plots:
            from fidelity_plots import write_plots  # matplotlib only when plotting
            names, notes = write_plots(models, out, args.spread)
            written += names
            for n in notes:
                warn(f"note: {n}")
        runs = sum(len(m["runs"]) for m in models)
        say(f"{sum(1 for m in models if m['runs'])} models, {runs} evaluated runs -> "
            + ", ".join(str(out / w) for w in written))
        if refused:
            warn(f"refused by brt-dist (skipped): {', '.join(refused)}")
        if failed:
            warn(f"failed: {', '.join(failed)} (run again to retry)")
        return 1 if failed else 0
    except StudyError as e:
        print(f"{TOOL}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{TOOL}: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
