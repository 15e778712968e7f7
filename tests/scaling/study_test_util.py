"""Shared by tests/scaling's scripts that run a tool under tools/ as a user would and read the PNGs
it draws: the failing check, the run with no traceback allowed, the --help check and the whole-PNG
check."""
import subprocess
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (ctest runs from it)
REPO = Path(__file__).resolve().parents[2]
PY = "/usr/bin/python3"


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def run_tool(tool, *args):
    """Runs tools/<tool> (a Path) with args; a traceback on stderr fails, any exit status is returned."""
    out = subprocess.run([PY, str(tool), *map(str, args)], capture_output=True, text=True, timeout=120)
    check("Traceback" not in out.stderr, f"{tool.stem} {args}: traceback\n{out.stderr}")
    return out


def check_help(tool, option):
    """tools/<tool> --help exits 0 and names option."""
    out = run_tool(tool, "--help")
    check(out.returncode == 0 and option in out.stdout, "--help")


def read_png(path, min_bytes):
    """The bytes of a whole PNG at path of more than min_bytes; fails if missing, short or not a PNG."""
    data = path.read_bytes() if path.is_file() else b""
    check(len(data) > min_bytes, f"{path}: missing or only {len(data)} bytes")
    check(data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path}: not a PNG")
    check(data[-8:-4] == b"IEND", f"{path}: truncated PNG")
    return data
