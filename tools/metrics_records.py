"""Reading brt-dist's metrics JSONL (launch/metrics_log.cpp records) robustly; shared by
tools/plot_run.py and tools/fidelity_study.py. A resumed run appends to the same file and may log
a step twice (the later record wins); a job killed mid-write leaves a cut-off line (skipped with
a warning naming file and line); printf writes a non-finite loss as nan/-nan/inf (read as NaN)."""
import json
import re

# printf's %g writes a non-finite value as nan/-nan/inf, which is not JSON; skip events carry
# exactly those losses, so turn them into the NaN/Infinity that Python's json accepts.
NONFINITE = re.compile(r"(?<=[:\[,])\s*(-?)(nan|inf|infinity)\b(?=\s*[,}\]])", re.IGNORECASE)


def json_nonfinite(m):
    """The JSON spelling Python accepts for a printf nan/-nan/inf/-inf (a NaN has no sign)."""
    return "NaN" if m.group(2).lower() == "nan" else m.group(1) + "Infinity"


def number(v):
    """A JSON value usable as a data point (bools are JSON true/false, not numbers)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def read_run(path, warn=None):
    """Train and eval records (by step; a resumed run appends and may log a step twice: the later
    record wins, as in scaling_study.read_metrics), plus the steps of skip and rollback events.
    Blank lines are ignored; a line that is not a JSON object with a numeric step is skipped, with
    warn("warning: FILE:LINE: skipped, ...") when warn is given, so a file cut off mid-line by a
    killed job still reads."""
    train, evals, skips, rollbacks = {}, {}, set(), set()
    with open(path, errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(NONFINITE.sub(json_nonfinite, line))
            except json.JSONDecodeError as e:
                if warn:
                    warn(f"warning: {path}:{lineno}: skipped, not JSON ({e.msg})")
                continue
            if not isinstance(rec, dict) or not number(rec.get("step")):
                if warn:
                    warn(f"warning: {path}:{lineno}: skipped, not a record with a numeric \"step\"")
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
