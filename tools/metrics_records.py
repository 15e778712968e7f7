"""A run's metrics JSONL (launch/train/metrics_log.cpp records) grouped for plots and tables; shared by
tools/plot_run.py and tools/fidelity_study.py. Reading the lines is python/brt_dist/metrics.py's
(one reader for the format): a resumed run appends to the same file and may log a step twice (the
later record wins here); a line cut off by a killed job is skipped with a warning naming file and
line; printf's nan/-nan/inf read as NaN/Infinity."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))  # brt_dist

from brt_dist.metrics import is_number as number, iter_records  # noqa: E402,F401  (number: re-exported)


def read_run(path, warn=None, run_id=None):
    """Train and eval records (by step, the later record of a step winning, as in
    scaling_study.read_metrics), plus the steps of skip and rollback events; only run `run_id`'s
    records when one is given. A line that is not a JSON object with a numeric step is skipped,
    with warn("warning: FILE:LINE: skipped, ...") when warn is given."""
    train, evals, skips, rollbacks = {}, {}, set(), set()
    for _, rec in iter_records(path, warn or (lambda message: None)):
        if run_id is not None and rec.get("run_id") != run_id:
            continue
        step, event = int(rec["step"]), rec.get("event")
        if event == "train":
            train[step] = rec
        elif event == "eval":
            evals[step] = rec
        elif event == "skip":
            skips.add(step)
        elif event == "rollback":
            rollbacks.add(step)
    return {"train": [train[s] for s in sorted(train)], "eval": [evals[s] for s in sorted(evals)],
            "skips": sorted(skips), "rollbacks": sorted(rollbacks)}


def run_ids(path):
    """The run ids of a metrics file in the order they first appear (launch/train/run_identity.h:
    every record of a run carries its "run_id"); [None] for a file from before run ids."""
    ids = []
    for _, rec in iter_records(path, lambda message: None):
        rid = rec.get("run_id")
        if rid not in ids:
            ids.append(rid)
    return [i for i in ids if i is not None] or [None]


def run_files(folder):
    """A run folder's metrics files: metrics.jsonl and the earlier runs' moved aside beside it
    (metrics.<run id>.jsonl), oldest first by modification time, the current file last."""
    folder = Path(folder)
    aside = sorted(folder.glob("metrics.*.jsonl"), key=lambda p: p.stat().st_mtime)
    current = folder / "metrics.jsonl"
    return aside + ([current] if current.is_file() else [])
