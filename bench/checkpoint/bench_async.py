#!/usr/bin/python3
"""Asynchronous checkpoints, measured in one run: the 150m model with AdamW
state (193.4M parameters; parameters + two moments = 2.32 GB, plus the carried state) trains a
few steps with a save every third step, once with checkpoint.async=false and once with true, and the
training stall per save is compared:

  stall ratio = median training stall per background save (the host snapshot, plus any wait
                for the previous save) / median synchronous save time      (target <= 0.15)

Segments are one window long (model.seq_len = 512) so a step takes seconds on a laptop; the
checkpoint is the full 150m one. The final save of each run is synchronous by design (it is
waited for before exit) and is left out.

  bench_async.py BRT_DIST [--dir DIR] [--steps N]

DIR (default: a temporary folder under the current directory) decides the disk.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def run(brt, mode, work, steps, every):
    ckpt = os.path.join(work, "ckpt-" + mode)
    metrics = os.path.join(work, mode + ".jsonl")
    config = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "150m.toml")
    cmd = [brt, "train", config, "optim.kind=adamw", "model.seq_len=512", "train.batch=1", "train.eval_every=0",
           f"train.steps={steps}", "log.every=1", f"log.metrics_path={metrics}", f"checkpoint.dir={ckpt}",
           f"checkpoint.every={every}", "checkpoint.keep=2", f"checkpoint.async={'true' if mode == 'async' else 'false'}",
           "train.peak_gflops=1000"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        sys.exit("bench_async: %s run failed:\n%s" % (mode, (done.stdout + done.stderr)[-3000:]))
    events = [json.loads(l) for l in open(metrics)]
    saves = [e for e in events if e["event"] == "checkpoint"]
    steps_s = [e for e in events if e["event"] == "train"]
    shutil.rmtree(ckpt, ignore_errors=True)
    return saves[:-1], steps_s  # the last save is the final, synchronous one


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("brt_dist")
    p.add_argument("--dir", default=None)
    p.add_argument("--steps", type=int, default=10)
    # Saves far enough apart for a background write to finish between them, as real intervals
    # (thousands of steps) are; the last background save is waited for by the final save one
    # step later, which the median leaves out.
    p.add_argument("--every", type=int, default=3, help="steps between saves")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="bench-async-", dir=a.dir or ".")
    try:
        sync_saves, _ = run(os.path.abspath(a.brt_dist), "sync", work, a.steps, a.every)
        async_saves, steps = run(os.path.abspath(a.brt_dist), "async", work, a.steps, a.every)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sync_s = statistics.median(e["seconds"] for e in sync_saves)
    stall_s = statistics.median(e["stall_seconds"] for e in async_saves)
    snap_s = statistics.median(e["snapshot_seconds"] for e in async_saves)
    write_s = statistics.median(e["seconds"] for e in async_saves)
    gb = sync_saves[0]["gb_per_s"] * sync_s
    step_s = statistics.median(512 / max(1e-9, e["tokens_per_s"]) for e in steps)  # 1 stream x 512 tokens
    ratio = stall_s / sync_s
    print(f"bench_async: 150m + AdamW, {gb:.2f} GB per checkpoint, a save every {a.every} steps of {a.steps} "
          f"(a step takes {step_s:.1f} s)")
    print(f"  synchronous save: {sync_s:.2f} s (median of {len(sync_saves)}), the training thread waits all of it")
    print(f"  background save: written in {write_s:.2f} s beside training; training stalled {stall_s:.3f} s "
          f"(median of {len(async_saves)}; the host snapshot {snap_s:.3f} s, the rest waiting for the previous save)")
    print(f"  stall per save, async / sync = {ratio:.3f}  (target <= 0.15) -> {'met' if ratio <= 0.15 else 'MISSED'}")
    return 0 if ratio <= 0.15 else 1


if __name__ == "__main__":
    sys.exit(main())
