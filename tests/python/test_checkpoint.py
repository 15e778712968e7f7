#!/usr/bin/python3
"""brt_dist (numpy + h5py only) against brt-dist itself:
 - load_checkpoint reads config, step, model.md §9 parameters, optimizer and carried state;
 - verify_checkpoint prints exactly the lines of `brt-dist ckpt verify` for a good file and for
   each kind of damage tests/faults/damage.py makes (plus changed, extra and deleted entries);
   where the C++ quotes HDF5's own error stack, the text up to that quote is compared;
 - load_checkpoint refuses each damaged file with the C++ message;
 - save_weights writes a file `brt-dist ckpt verify` accepts and `brt-dist eval` loads with the
   same result; export_safetensors round-trips;
 - read_metrics reads a run's JSONL (and skips a cut-off line with a warning).
usage: test_checkpoint.py BRT_DIST   (~15 s)"""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ENV, REPO, check, prepare, run, train

import h5py
import numpy as np

from brt_dist import (CorruptCheckpointError, export_safetensors, load_checkpoint, read_metrics,
                      save_weights, verify_checkpoint)
from brt_dist.weights import read_safetensors

DAMAGE = REPO / "tests" / "faults" / "damage.py"
HDF5_QUOTES = ("(truncated, damaged or not HDF5): ", "(object header damaged?): ")


def cpp_verify(bin_path, path):
    done = subprocess.run([str(bin_path), "ckpt", "verify", str(path)], env=ENV, capture_output=True, text=True)
    return done.returncode, done.stdout.splitlines()


def comparable(line):
    """The line up to where the C++ quotes HDF5's error stack (h5py words that part differently)."""
    for quote in HDF5_QUOTES:
        if quote in line:
            return line[:line.index(quote) + len(quote)]
    return line


def check_same_report(bin_path, path, what):
    rc, cpp = cpp_verify(bin_path, path)
    py = verify_checkpoint(str(path)).lines(str(path))
    check([comparable(l) for l in py] == [comparable(l) for l in cpp],
          "%s: verify differs\n  brt-dist: %s\n  brt_dist: %s" % (what, cpp, py))
    return rc, cpp


def damage_cases(good):
    """(name, function damaging a copy in place)."""
    def tool(*args):
        return lambda p: subprocess.run(["/usr/bin/python3", DAMAGE, p, *args], check=True)

    def attrs(change):
        def apply(p):
            with h5py.File(p, "r+") as f:
                change(f)
        return apply
    return [
        ("data", tool("data", "/model/layers.0.attn.wq")),
        ("config", tool("config", "d_model = 32", "d_model = 33")),
        ("header", tool("header")),
        ("truncate", tool("truncate")),
        ("step changed", attrs(lambda f: f.attrs.modify("step", np.int64(7)))),
        ("extra attribute", attrs(lambda f: f.attrs.create("extra", "x", dtype=h5py.string_dtype()))),
        ("dataset deleted", attrs(lambda f: f.__delitem__("model/final_norm.scale"))),
        ("chunk table", attrs(lambda f: f["model/embed"].attrs.modify("checksum_chunks", np.array([1], "<u8")))),
        ("whole checksum", attrs(lambda f: f["optim/embed.adafactor.m"].attrs.modify("checksum", np.uint64(5)))),
    ]


def check_checkpoints(bin_path, work, data):
    slide = train(bin_path, work, "slide", data, 2)
    bst = train(bin_path, work, "bst:sh:s4d", data, 2)
    ckpt = load_checkpoint(bst)
    cfg = ckpt.model_config
    check(ckpt.step == 2 and cfg.variant == "bst:sh:s4d" and ckpt.config["model"]["d_model"] == 32, "metadata")
    check(ckpt.parameters["embed"].shape == (320, 32) and ckpt.parameters["layers.0.ssm.a_re"].shape == (1, 8, 8),
          "parameter shapes (model.md §9)")
    check("layers.0.ssm.carry" in ckpt.state and ckpt.state["layers.0.cache.k"].shape == (4, 16, 32), "carried state")
    check(any(k.endswith(".adafactor.m") for k in ckpt.optimizer) and ckpt.data_cursor is not None, "optimizer, cursor")
    for path in (slide, bst):
        rc, lines = check_same_report(bin_path, path, "good file")
        check(rc == 0 and lines[-1].endswith("OK" + lines[-1].split("OK", 1)[1]), "good file not OK: %s" % lines)
    for name, damage in damage_cases(slide):
        copy = Path(work) / ("damaged-" + name.replace(" ", "-") + ".h5")
        shutil.copy(slide, copy)
        damage(str(copy))
        rc, cpp = check_same_report(bin_path, copy, name)
        check(rc == 1, "%s: brt-dist ckpt verify accepted it" % name)
        try:
            load_checkpoint(str(copy))
            raise AssertionError("%s: load_checkpoint accepted a damaged file" % name)
        except CorruptCheckpointError as e:
            # The C++ open checks raise what verify reports first; past them, a whole-tensor read
            # (CheckpointReader::read) raises the first bad chunk of that dataset.
            first = cpp[0][len("DAMAGED: "):]
            text = str(e)
            read_error = first.split(":")[0] + ":" in text and "checksum mismatch in chunk" in text
            check(comparable(text) == comparable(first) or read_error,
                  "%s: load_checkpoint says %r, brt-dist %r" % (name, text, first))
        print("  %-16s refused, as brt-dist: %s" % (name, cpp[0][:110]))
    return slide, bst


def check_weights(bin_path, work, bst):
    ckpt = load_checkpoint(bst)
    out = Path(work) / "weights.h5"
    save_weights(ckpt, out, ckpt)
    rc, lines = cpp_verify(bin_path, out)
    check(rc == 0, "brt-dist ckpt verify refuses save_weights' file: %s" % lines)
    back = load_checkpoint(out)
    check(back.parameters.keys() == ckpt.parameters.keys() and all(
        np.array_equal(back.parameters[k], ckpt.parameters[k]) for k in ckpt.parameters), "weights round trip")
    reports = []
    for path in (bst, out):
        run([bin_path, "eval", "--checkpoint", path, "--quiet", "--json", Path(work) / "eval.json"])
        reports.append(json.loads((Path(work) / "eval.json").read_text()))
    check(abs(reports[0]["nats"] - reports[1]["nats"]) <= 1e-9 * reports[0]["nats"],
          "brt-dist eval of save_weights' file differs: %s vs %s" % (reports[0]["nats"], reports[1]["nats"]))
    st = Path(work) / "weights.safetensors"
    export_safetensors(ckpt, st, {"variant": "bst:sh:s4d"})
    tensors, meta = read_safetensors(st)
    check(meta == {"variant": "bst:sh:s4d"} and all(np.array_equal(tensors[k], ckpt.parameters[k]) for k in tensors)
          and len(tensors) == len(ckpt.parameters), "safetensors round trip")
    raw = st.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    check(json.loads(raw[8:8 + n])["embed"]["dtype"] == "F32" and (8 + n) % 8 == 0, "safetensors header")
    print("  save_weights: brt-dist ckpt verify OK, brt-dist eval equal (%.6f nats); safetensors round trip"
          % reports[1]["nats"])


def check_metrics(bin_path, work, data):
    metrics = Path(work) / "run" / "metrics.jsonl"
    train(bin_path, work, "slide", data, 3, extra=("log.metrics_path=%s" % metrics, "log.every=1"))
    with open(metrics, "a") as f:
        f.write('{"event":"train","step":4,"loss":\n')   # a line cut off by a killed job
    warnings = []
    records = read_metrics(metrics.parent, warn=warnings.append)
    steps = [r["step"] for r in records if r["event"] == "train"]
    check(steps == [1, 2, 3] and all(isinstance(r["loss"], float) for r in records if r["event"] == "train"),
          "train records: %s" % records)
    check(len(warnings) == 1 and ":%d: skipped" % (len(records) + 1) in warnings[0], "warning: %s" % warnings)
    check(read_metrics(metrics, events={"train"}, dedupe=True, warn=warnings.append)[-1]["step"] == 3, "dedupe")
    print("  read_metrics: %d records (%s), cut-off line skipped with a warning" % (
        len(records), ", ".join(sorted({r["event"] for r in records}))))


def main(bin_path):
    with tempfile.TemporaryDirectory() as work:
        data = prepare(bin_path, work, "kv", train_docs=2, validation_docs=2)
        _, bst = check_checkpoints(bin_path, work, data)
        check_weights(bin_path, work, bst)
        check_metrics(bin_path, work, data)
    print("python checkpoint tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve()))
