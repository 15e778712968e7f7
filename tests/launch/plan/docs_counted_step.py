#!/usr/bin/python3
"""docs/gpu.md's predicted device steps are `brt-dist plan`'s output, not typed: every block
between "<!-- counted step: ARGS -->" and "<!-- end counted step -->" must equal the counted-step
lines `brt-dist plan ARGS` prints (launch/plan/counted_step.h), indented as a code block.
usage: docs_counted_step.py BRT_DIST [--write]   (--write regenerates the blocks)"""
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "gpu.md"
BLOCK = re.compile(r"(<!-- counted step: (?P<args>[^>]*) -->\n)(?P<body>.*?)(<!-- end counted step -->)", re.S)


def counted_lines(bin_path, args):
    out = subprocess.run([bin_path, "plan", *args.split()], cwd=REPO, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("counted step on "))
    return "\n".join("    " + l for l in lines[start:]) + "\n"


def main(bin_path, write):
    text = DOC.read_text()
    blocks = list(BLOCK.finditer(text))
    if not blocks:
        print("docs/gpu.md has no counted-step block")
        return 1
    bad = 0
    new = text
    for m in blocks:
        want = "\n" + counted_lines(bin_path, m.group("args")) + "\n"
        if m.group("body") != want:
            bad += 1
            print("docs/gpu.md: the block of `brt-dist plan %s` is not its output:\n%s" % (m.group("args"), want))
            new = new.replace(m.group(0), m.group(1) + want + m.group(4))
    if write and bad:
        DOC.write_text(new)
        print("rewrote %d block(s)" % bad)
        return 0
    print("docs/gpu.md: %d counted-step block(s), %s" % (len(blocks), "all current" if not bad else "%d stale" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], "--write" in sys.argv[2:]))
