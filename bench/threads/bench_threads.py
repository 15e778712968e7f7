#!/usr/bin/python3
"""Threads that fit the machine, measured in one run on this machine:

  1. tiny under `mpirun -np 2` and `-np 4` with the default thread choice, divided by the best
     explicit setting (train.threads = 1, 2, ... up to the cores) — target >= 0.9;
  2. tiny as one process with one competing busy process (a spinning shell loop on the same
     cores), divided by the same run on a quiet machine, both with the defaults — target >= 0.35;
     and, for comparison, the same with OpenMP's spinning wait (OMP_WAIT_POLICY=ACTIVE).

  bench_threads.py BRT_DIST [--steps N] [--config configs/tiny.toml]

Tokens/s is the median over the logged windows after the warm-up windows, and each setting is
run --repeats times (interleaved with the others) keeping its best: a 2-core machine's noise
between runs of the same setting is larger than the differences measured.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def tokens_per_s(cmd, env, steps, log_every):
    with tempfile.TemporaryDirectory() as work:
        metrics = os.path.join(work, "m.jsonl")
        full = cmd + [f"train.steps={steps}", f"log.every={log_every}", f"log.metrics_path={metrics}"]
        run = subprocess.run(full, env=env, cwd=work, capture_output=True, text=True, timeout=900)
        if run.returncode != 0:
            sys.exit("bench_threads: failed: %s\n%s" % (" ".join(full), run.stdout[-2000:] + run.stderr[-2000:]))
        rates = [json.loads(l)["tokens_per_s"] for l in open(metrics) if '"event":"train"' in l]
        chosen = [l for l in run.stdout.splitlines() if l.startswith("threads:")]
        return statistics.median(rates[2:] if len(rates) > 3 else rates), (chosen[0] if chosen else "")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("brt_dist")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--config", default=os.path.join(os.path.dirname(__file__), "..", "..", "configs", "tiny.toml"))
    a = p.parse_args()
    brt = os.path.abspath(a.brt_dist)
    config = os.path.abspath(a.config)
    base = [brt, "train", config, "data.source=synthetic", "train.eval_every=0", "train.peak_gflops=1"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("OMP_NUM_THREADS", None)  # the defaults under test decide
    env.pop("OMP_WAIT_POLICY", None)
    cores = os.cpu_count() or 1
    every = max(1, a.steps // 8)
    print(f"bench_threads: {config}, {a.steps} steps, {cores} cores")
    ratios = {}
    def best(settings):
        """{name: (cmd, env)} -> {name: (best tok/s, threads line)}, runs interleaved."""
        out = {}
        for _ in range(a.repeats):
            for name, (cmd, e) in settings.items():
                rate, line = tokens_per_s(cmd, e, a.steps, every)
                if name not in out or rate > out[name][0]:
                    out[name] = (rate, line)
        return out

    for np_ in (2, 4):
        mpirun = ["mpirun", "--oversubscribe", "-np", str(np_)]
        settings = {"default": (mpirun + base, env)}
        settings.update({t: (mpirun + base + [f"train.threads={t}"], env) for t in range(1, cores + 1)})
        measured = best(settings)
        default, line = measured.pop("default")
        explicit = {t: r for t, (r, _) in measured.items()}
        best_t = max(explicit, key=explicit.get)
        ratios[f"np{np_}"] = default / explicit[best_t]
        print(f"  mpirun -np {np_}: defaults {default:,.0f} tok/s ({line.split('(')[0].strip()}); explicit "
              + ", ".join(f"threads={t} {r:,.0f}" for t, r in explicit.items())
              + f"; defaults / best (threads={best_t}) = {ratios[f'np{np_}']:.3f}  (target >= 0.9)")
    quiet, line = best({"quiet": (base, env)})["quiet"]
    busy = subprocess.Popen(["bash", "-c", "while :; do :; done"])
    try:
        loaded = best({"busy": (base, env), "spin": (base, dict(env, OMP_WAIT_POLICY="ACTIVE"))})
    finally:
        busy.kill()
    loaded, spinning = loaded["busy"][0], loaded["spin"][0]
    ratios["busy"] = loaded / quiet
    print(f"  one process: quiet {quiet:,.0f} tok/s ({line.split('(')[0].strip()}); beside a busy process "
          f"{loaded:,.0f}; busy / quiet = {ratios['busy']:.3f}  (target >= 0.35)")
    print(f"  for comparison, spinning waits (OMP_WAIT_POLICY=ACTIVE) beside the busy process: {spinning:,.0f} "
          f"tok/s = {spinning / quiet:.3f} of quiet")
    ok = ratios["np2"] >= 0.9 and ratios["np4"] >= 0.9 and ratios["busy"] >= 0.35
    print("bench_threads: " + ("all targets met" if ok else "TARGET MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
