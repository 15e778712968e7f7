#!/usr/bin/python3
"""Damages a brt-dist checkpoint in place, one way at a time (the fault suite's tool):
  damage.py FILE data DATASET     flip one byte inside DATASET's stored values
  damage.py FILE header           flip one byte in the root group's object header
  damage.py FILE config OLD NEW   replace the bytes OLD by NEW (same length) in the stored config
  damage.py FILE truncate         cut the file to half its size
"""
import struct
import sys

import h5py


def flip(path, offset, mask=0x5A):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ mask]))


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
    else:
        sys.exit("damage.py: unknown kind " + kind)


if __name__ == "__main__":
    main(*sys.argv[1:])
