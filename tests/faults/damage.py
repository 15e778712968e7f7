#!/usr/bin/python3
"""Damages a brt-dist checkpoint in place, one way at a time (the fault suite's tool):
  damage.py FILE data DATASET     flip one byte inside DATASET's stored values
  damage.py FILE header           flip one byte in the root group's object header
  damage.py FILE config OLD NEW   replace the bytes OLD by NEW (same length) in the stored config
  damage.py FILE truncate         cut the file to half its size
  damage.py FILE nonfinite DATASET
                                  +inf and -inf into DATASET's first and last values, with every
                                  checksum, the manifest and the attribute table rewritten to
                                  match (diverged weights the checksums cannot tell from good)
"""
import os
import struct
import sys

import h5py
import numpy as np


def flip(path, offset, mask=0x5A):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ mask]))


def nonfinite(path, name):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    from brt_dist.checksum import attribute_hash, chunk_checksums, hex64
    with h5py.File(path, "r+") as f:
        dataset = f[name]
        values = dataset[()]
        values.reshape(-1)[0], values.reshape(-1)[-1] = np.inf, -np.inf
        dataset[...] = values
        sums = chunk_checksums(values, int(dataset.attrs["checksum_rows_per_chunk"]))
        total = sum(sums) % (1 << 64)
        dataset.attrs.modify("checksum_chunks", np.array(sums, dtype=np.uint64))
        dataset.attrs.modify("checksum", np.uint64(total))
        lines = [line.split("\t") for line in f.attrs["tensor_manifest"].splitlines()]
        manifest = "".join("\t".join(p[:3] + [hex64(total) if p[0] == name else p[3]]) + "\n" for p in lines)
        f.attrs.modify("tensor_manifest", manifest)
        table = dict(line.split("\t") for line in f.attrs["attribute_checksums"].splitlines())
        table["tensor_manifest"] = hex64(attribute_hash("tensor_manifest", "s", manifest.encode()))
        f.attrs.modify("attribute_checksums", "".join("%s\t%s\n" % kv for kv in sorted(table.items())))


def main(path, kind, *args):
    if kind == "data":
        with h5py.File(path, "r") as f:
            offset = f[args[0]].id.get_offset()
        flip(path, offset + 3)
    elif kind == "header":
        with open(path, "rb") as f:
            superblock = f.read(48)
        root = struct.unpack("<Q", superblock[36:44])[0]  # superblock v2: root object header
        flip(path, root + 12)
    elif kind == "config":
        old, new = args[0].encode(), args[1].encode()
        assert len(old) == len(new)
        data = open(path, "rb").read()
        at = data.find(old)
        if at < 0:
            sys.exit("damage.py: %r not found in %s" % (old, path))
        with open(path, "r+b") as f:
            f.seek(at)
            f.write(new)
    elif kind == "truncate":
        with open(path, "r+b") as f:
            f.seek(0, 2)
            f.truncate(f.tell() // 2)
    elif kind == "nonfinite":
        nonfinite(path, args[0])
    else:
        sys.exit("damage.py: unknown kind " + kind)


if __name__ == "__main__":
    main(*sys.argv[1:])
