"""The metrics JSONL of a run (launch/train/metrics_log.cpp): one JSON object per line with an
"event" ("train", "eval", "skip", "rollback", "checkpoint", ...) and a "step".

    records = read_metrics("runs/tiny")          # a run folder or the .jsonl itself
    df = to_dataframe(records)                   # pandas, when installed
"""
import json
import re
import sys
from pathlib import Path

# printf's %g writes a non-finite value as nan/-nan/inf, which is not JSON (older files carry
# such values in skip events); turn them into the NaN/Infinity that Python's json accepts.
NONFINITE = re.compile(r"(?<=[:\[,])\s*(-?)(nan|inf|infinity)\b(?=\s*[,}\]])", re.IGNORECASE)


class MetricsError(RuntimeError):
    """A path that is neither a run folder with metrics.jsonl nor a metrics file."""


def _json_nonfinite(m):
    return "NaN" if m.group(2).lower() == "nan" else m.group(1) + "Infinity"


def metrics_file(run):
    """RUN_DIR/metrics.jsonl for a run folder, the path itself for a file."""
    path = Path(run)
    if path.is_dir():
        if not (path / "metrics.jsonl").is_file():
            raise MetricsError(f"{path}: no metrics.jsonl in this run folder")
        return path / "metrics.jsonl"
    if path.is_file():
        return path
    raise MetricsError(f"{path}: no such run folder or metrics file")


def is_number(v):
    """A JSON value usable as a data point (bools are JSON true/false, not numbers)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def parse_line(line):
    """One JSONL line -> a dict, or None for a blank line. Raises ValueError (with the reason)
    for a line that is not a JSON object with a numeric "step"."""
    line = line.strip()
    if not line:
        return None
    try:
        rec = json.loads(NONFINITE.sub(_json_nonfinite, line))
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg})") from None
    if not isinstance(rec, dict) or not is_number(rec.get("step")):
        raise ValueError("not a record with a numeric \"step\"")
    return rec


def iter_records(path, warn=None):
    """(line number, record) for each usable line. A line cut off by a killed job, or garbled,
    is skipped and reported through warn(message) (default: stderr)."""
    warn = warn or (lambda msg: print(msg, file=sys.stderr))
    with open(path, errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            try:
                rec = parse_line(line)
            except ValueError as e:
                warn(f"warning: {path}:{lineno}: skipped, {e}")
                continue
            if rec is not None:
                yield lineno, rec


def read_metrics(run, events=None, dedupe=False, warn=None):
    """Every record of a run's metrics, in file order (a list of dicts).
    events: keep only these event kinds (e.g. {"train"}).
    dedupe: a resumed run appends and may log a step twice; keep the later record of each
            (event, step), ordered by (event, step)."""
    records = [rec for _, rec in iter_records(metrics_file(run), warn)
               if events is None or rec.get("event") in events]
    if not dedupe:
        return records
    latest = {}
    for rec in records:
        latest[(rec.get("event"), rec["step"])] = rec
    return [latest[k] for k in sorted(latest, key=lambda k: (str(k[0]), k[1]))]


def to_dataframe(records):
    """A pandas DataFrame of the records (one row each, a column per key). Needs pandas
    (Debian: python3-pandas)."""
    try:
        import pandas
    except ImportError as e:
        raise ImportError("to_dataframe needs pandas (apt-get install python3-pandas)") from e
    return pandas.DataFrame.from_records(records)
