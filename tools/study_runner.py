"""How a study starts brt-dist (tools/fidelity_study.py, tools/task_study.py): the binary, the
launcher (mpirun for --ranks > 1), the environment, long commands into a log with progress lines,
and the error line of a failed run's log."""
import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

from fidelity_table import say
from scaling_study import launch_env
from study_common import StudyError


class Runner:
    """How brt-dist is started: the binary, the launcher (mpirun for --ranks > 1) and the env."""

    def __init__(self, brt_dist, ranks=1, threads=None, mpirun="mpirun", mpirun_args=("--oversubscribe",)):
        self.brt_dist = brt_dist
        self.ranks = ranks
        self.env = launch_env(threads)
        self.prefix = [mpirun, *mpirun_args, "-np", str(ranks)] if ranks > 1 else []

    def check_binary(self):
        path = Path(self.brt_dist)
        if "/" in self.brt_dist and not (path.is_file() and os.access(path, os.X_OK)):
            raise StudyError(f"{self.brt_dist}: no such executable (--brt-dist, or $BRT_DIST)")

    def cmd(self, *args, launcher=True):
        return (self.prefix if launcher else []) + [self.brt_dist, *map(str, args)]

    def capture(self, *args, launcher=False):
        """(exit status, stdout + stderr) of a short command."""
        try:
            out = subprocess.run(self.cmd(*args, launcher=launcher), capture_output=True, text=True,
                                 env=self.env)
        except OSError as e:
            raise StudyError(f"{self.brt_dist}: cannot run it ({e.strerror})") from None
        return out.returncode, out.stdout + out.stderr

    def to_log(self, args, log_path, progress_s=0, label=""):
        """Runs a long command with its output appended to log_path; every progress_s seconds a
        line with the newest progress line of the log ('step 120/600 ... ETA'). Returns the exit
        status. Ctrl-C reaches brt-dist too (it checkpoints and stops); then KeyboardInterrupt."""
        cmd = self.cmd(*args)
        with open(log_path, "a") as log:
            log.write(f"\n$ {shlex.join(cmd)}\n")
            log.flush()
            try:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env)
            except OSError as e:
                raise StudyError(f"{self.brt_dist}: cannot run it ({e.strerror})") from None
            start, last = time.monotonic(), time.monotonic()
            try:
                while True:
                    try:
                        return proc.wait(timeout=1.0)
                    except subprocess.TimeoutExpired:
                        pass
                    if progress_s and time.monotonic() - last >= progress_s:
                        last = time.monotonic()
                        line = newest_progress(log_path)
                        say(f"  {label}: {line or 'running'} ({time.monotonic() - start:.0f} s)")
            except KeyboardInterrupt:
                # A Ctrl-C on the terminal reached brt-dist too; a signal sent to this process
                # alone did not: SIGTERM asks it to stop at the next step with a checkpoint (a
                # second SIGINT would end it at once). Then wait for that checkpoint.
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=300)
                except (subprocess.TimeoutExpired, KeyboardInterrupt):
                    proc.kill()
                raise


def newest_progress(log_path):
    """The newest progress line of a log: a train log's 'step N/M | loss ... | ETA ...'
    condensed, else the last line (eval's and prepare's progress), cut to 100 characters."""
    try:
        with open(log_path, "rb") as f:
            f.seek(max(0, os.path.getsize(log_path) - 8192))
            tail = f.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [l.strip() for l in re.split(r"[\r\n]+", tail) if l.strip()]
    starts = [i for i, l in enumerate(lines) if l.startswith("$ ")]
    lines = lines[starts[-1] + 1:] if starts else lines  # this command's output only
    for line in reversed(lines):
        m = re.match(r"step\s+(\d+)/(\d+).*?loss ([0-9.]+).*?ETA (\S+)", line)
        if m:
            return f"step {m.group(1)}/{m.group(2)}, loss {m.group(3)}, ETA {m.group(4)}"
    return lines[-1][:100] if lines else ""


def error_line(text):
    """The line that says why brt-dist stopped (its 'error:' line), else the last line; in a
    log the tool appends to, only the output of its last command (after the last '$ ' line)."""
    lines = []
    for line in text.splitlines():
        if line.startswith("$ "):
            lines = []
        elif line.strip():
            lines.append(line.strip())
    errors = [l for l in lines if "error" in l.lower()]
    return (errors or lines or ["(no output)"])[-1]
