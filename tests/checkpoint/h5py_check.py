#!/usr/bin/python3
"""Reads a brt-dist checkpoint with h5py alone (docs/checkpoint-format.md), as an outside tool
would: follows `latest`, checks the root attributes, reads every dataset with its documented
shape and values, and recomputes every per-chunk checksum with numpy.

Usage: h5py_check.py CHECKPOINT_DIR   (the directory ckpt_test_writer fixture wrote)
"""
import os
import sys

import h5py
import numpy as np

MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def fmix64(x):
    x = x ^ (x >> np.uint64(33))
    x = x * np.uint64(0xFF51AFD7ED558CCD)
    x = x ^ (x >> np.uint64(33))
    x = x * np.uint64(0xC4CEB9FE1A85EC53)
    return x ^ (x >> np.uint64(33))


def chunk_checksums(values, rows_per_chunk):
    """docs/checkpoint-format.md section 4: sum of fmix64(bits + i * K) per chunk of rows."""
    flat = np.ascontiguousarray(values).reshape(-1)
    bits = flat.view(np.uint32 if flat.dtype.itemsize == 4 else np.uint64).astype(np.uint64)
    index = np.arange(flat.size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        terms = fmix64(bits + index * np.uint64(0x9E3779B97F4A7C15))
    row_elems = flat.size // values.shape[0] if values.shape[0] else 1
    chunk_elems = rows_per_chunk * row_elems
    sums = []
    for start in range(0, flat.size, chunk_elems):
        sums.append(int(np.sum(terms[start:start + chunk_elems], dtype=np.uint64)))
    return sums


K = 0x9E3779B97F4A7C15
M64 = (1 << 64) - 1


def fmix64_int(x):
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M64
    return x ^ (x >> 33)


def mix_words(h, data):
    for at in range(0, len(data), 8):
        word = int.from_bytes(data[at:at + 8].ljust(8, b"\0"), "little")
        h = (fmix64_int(h ^ word) + K) & M64
    return h


def attribute_hash(name, kind, value_bytes):
    """docs/checkpoint-format.md section 4b."""
    name_bytes = name.encode()
    h = fmix64_int((len(name_bytes) + K) & M64)
    h = mix_words(h, name_bytes)
    h = mix_words(h, kind.encode())
    h = (fmix64_int(h ^ len(value_bytes)) + K) & M64
    return mix_words(h, value_bytes)


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
