#!/usr/bin/python3
"""Damages a prepared corpus in place (the fault suite's data tool, docs/data-format.md).
Documents are named by split and their position K in that split (index.tsv order). Each command
prints what it hit as "SHARD_PATH<TAB>DOC_ID<TAB>SOURCE" for the caller's assertions.
  shard_damage.py DIR flip SPLIT K          flip the lowest bit of the byte in the middle of document K
  shard_damage.py DIR token SPLIT K VALUE   set token 5 of document K to VALUE (raw uint16/uint32)
  shard_damage.py DIR truncate SPLIT K N    cut the last N bytes off document K's shard
  shard_damage.py DIR index-field SPLIT K COLUMN TEXT
                                            set column COLUMN (0-based) of document K's index.tsv row
  shard_damage.py DIR meta-tokenizer SPLIT K HASH
                                            set the tokenizer hash in document K's shard .meta
"""
import os
import sys


def token_bytes(data):
    for line in open(os.path.join(data, "manifest.tsv")):
        fields = line.rstrip("\n").split("\t")
        if fields[0] == "token_bytes":
            return int(fields[1])
    raise SystemExit("manifest.tsv has no token_bytes")


def document(data, split, k):
    """(row index in index.tsv, fields) of the K-th document of SPLIT."""
    lines = open(os.path.join(data, "index.tsv")).read().split("\n")
    seen = 0
    for i, line in enumerate(lines[1:], 1):
        fields = line.split("\t")
        if len(fields) == 8 and fields[1] == split:
            if seen == k:
                return i, fields
            seen += 1
    raise SystemExit(f"index.tsv has no document {k} of split {split}")


def shard_path(data, split, shard, ext="bin"):
    return os.path.join(data, "shards", "%s-%05d.%s" % (split, int(shard), ext))


def main(data, command, split, k, *rest):
    row, f = document(data, split, int(k))
    width = token_bytes(data)
    shard, offset, tokens = f[2], int(f[3]), int(f[4])
    path = shard_path(data, split, shard)
    if command == "flip":
        at = (offset + tokens // 2) * width
        with open(path, "r+b") as out:
            out.seek(at)
            b = out.read(1)
            out.seek(at)
            out.write(bytes([b[0] ^ 1]))
    elif command == "token":
        with open(path, "r+b") as out:
            out.seek((offset + 5) * width)
            out.write(int(rest[0]).to_bytes(width, "little"))
    elif command == "truncate":
        os.truncate(path, os.path.getsize(path) - int(rest[0]))
    elif command == "index-field":
        index = os.path.join(data, "index.tsv")
        lines = open(index).read().split("\n")
        fields = lines[row].split("\t")
        fields[int(rest[0])] = rest[1]
        lines[row] = "\t".join(fields)
        open(index, "w").write("\n".join(lines))
        path = index
    elif command == "meta-tokenizer":
        path = shard_path(data, split, shard, "meta")
        lines = open(path).read().split("\n")
        lines = ["tokenizer\t" + rest[0] if line.startswith("tokenizer\t") else line for line in lines]
        open(path, "w").write("\n".join(lines))
    else:
        raise SystemExit("unknown command " + command)
    print(f"{path}\t{f[0]}\t{f[7]}")


if __name__ == "__main__":
    main(*sys.argv[1:])
