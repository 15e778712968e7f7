#!/usr/bin/python3
"""Reads a brt-dist checkpoint with h5py alone (docs/checkpoint-format.md), as an outside tool
would: follows `latest`, checks the root attributes, reads every dataset with its documented
shape and values, and recomputes every per-chunk checksum with numpy.

The checksums come from python/brt_dist/checksum.py (numpy only), the package users read
checkpoints with. Usage: h5py_check.py CHECKPOINT_DIR   (the directory ckpt_test_writer fixture wrote)
"""
import os
import sys

import h5py
import numpy as np

# The checksums of docs/checkpoint-format.md §4 (per-chunk sums of fmix64(bits + i·K)) and §4b
# (attribute hashes), as python/brt_dist implements them for every outside reader.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from brt_dist.checksum import attribute_hash, chunk_checksums  # noqa: E402


def attribute_kind_and_bytes(f, name):
    value = f.attrs[name]
    dtype = f.attrs.get_id(name).dtype
    if isinstance(value, (str, bytes)):
        return "s", value.encode() if isinstance(value, str) else value
    if dtype.kind == "i":
        return "i", np.atleast_1d(value).astype("<i8").tobytes()
    if dtype.kind == "u":
        return "u", np.atleast_1d(value).astype("<u8").tobytes()
    if dtype.kind == "f":
        return "d", np.atleast_1d(value).astype("<f8").tobytes()
    return "?", b""


def check_attribute_table(f, failures):
    table = {}
    for line in f.attrs["attribute_checksums"].splitlines():
        name, hexhash = line.split("\t")
        table[name] = int(hexhash, 16)
    names = [n for n in f.attrs if n != "attribute_checksums"]
    if sorted(names) != sorted(table):
        failures.append("attribute table lists %s, file has %s" % (sorted(table), sorted(names)))
    for name in names:
        kind, data = attribute_kind_and_bytes(f, name)
        if attribute_hash(name, kind, data) != table.get(name):
            failures.append("root attribute %s does not match its checksum" % name)
    return len(names)


def check_manifest(f, failures):
    manifest = {}
    for line in f.attrs["tensor_manifest"].splitlines():
        path, dtype, shape, checksum = line.split("\t")
        manifest[path.lstrip("/")] = (dtype, shape, int(checksum, 16))
    seen = []
    f.visititems(lambda name, obj: seen.append(name) if isinstance(obj, h5py.Dataset) else None)
    if sorted(seen) != sorted(manifest):
        failures.append("manifest lists %s, file has %s" % (sorted(manifest), sorted(seen)))
    names = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "uint64": np.uint64}
    for name in seen:
        dtype, shape, checksum = manifest.get(name, ("", "", 0))
        dataset = f[name]
        if names.get(dtype) != dataset.dtype or shape != "[" + ", ".join(str(d) for d in dataset.shape) + "]":
            failures.append("%s: manifest says %s %s, stored %s %s" % (name, dtype, shape, dataset.dtype, dataset.shape))
        if int(dataset.attrs["checksum"]) != checksum:
            failures.append("%s: manifest checksum differs" % name)


def main(directory):
    with open(os.path.join(directory, "latest")) as pointer:
        name = pointer.read().strip()
    path = os.path.join(directory, name)
    expected = {  # ckpt_test_writer.cpp write_fixture
        "model/embed": ((64, 16), np.float32, lambda i: i * 0.25 - 100),
        "model/layers.0.attn.wq": ((16, 32), np.float32, lambda i: (i % 7) - 3.0),
        "model/big": ((1100, 1000), np.float32, lambda i: (i % 1000) * 0.5),
        "optim/adamw.m/embed": ((64, 16), np.float32, lambda i: -i.astype(np.float64)),
        "state/stream0.kv": ((2, 3, 4), np.float32, lambda i: i + 0.5),
        "data/cursor": ((3, 2), np.int64, lambda i: i * 1000),
    }
    failures = []
    with h5py.File(path, "r") as f:
        attrs = f.attrs
        if attrs["format"] != "brt-dist-checkpoint" or int(attrs["format_version"]) != 2:
            failures.append("format attributes: %r %r" % (attrs["format"], attrs["format_version"]))
        covered = check_attribute_table(f, failures)
        check_manifest(f, failures)
        print("root attributes: %d, each matching its checksum; tensor manifest matches" % covered)
        for key, want in [("step", 42), ("tokens_seen", 42 * 512), ("world_size", 1), ("dp", 1), ("tp", 1)]:
            if int(attrs[key]) != want:
                failures.append("attribute %s = %r, expected %r" % (key, attrs[key], want))
        if attrs["tokenizer_hash"] != "fixture-tokenizer" or "d_model = 16" not in attrs["config_toml"]:
            failures.append("string attributes wrong")

        seen = []
        f.visititems(lambda name, obj: seen.append(name) if isinstance(obj, h5py.Dataset) else None)
        if sorted(seen) != sorted(expected):
            failures.append("datasets %s, expected %s" % (sorted(seen), sorted(expected)))
        for name in seen:
            dataset = f[name]
            shape, dtype, formula = expected.get(name, (None, None, None))
            values = dataset[()]
            if values.shape != shape or values.dtype != dtype:
                failures.append("%s: %s %s, expected %s %s" % (name, values.shape, values.dtype, shape, dtype))
                continue
            want = formula(np.arange(values.size, dtype=np.int64)).astype(dtype).reshape(shape)
            if not np.array_equal(values, want):
                failures.append("%s: values differ" % name)
            rows_per_chunk = int(dataset.attrs["checksum_rows_per_chunk"])
            stored = [int(v) for v in np.atleast_1d(dataset.attrs["checksum_chunks"])]
            if chunk_checksums(values, rows_per_chunk) != stored:
                failures.append("%s: checksum_chunks differ" % name)
            if int(dataset.attrs["checksum"]) != sum(stored) % (1 << 64):
                failures.append("%s: checksum != sum of chunks" % name)
            print("%-28s %-8s %-14s %d chunk(s) ok" % (name, values.dtype, values.shape, len(stored)))
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("h5py check passed: %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
