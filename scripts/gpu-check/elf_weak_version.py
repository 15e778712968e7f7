#!/usr/bin/env python3
"""Makes a shared library's need of one symbol version (e.g. GLIBC_2.36) weak, in place.

usage: elf_weak_version.py FILE VERSION

The loader then loads FILE on a C library without that version (a weak version need is not
fatal), and the undefined symbols that asked for it are made unversioned (version index 1), so
they bind to whatever object defines them: glibc's own where it has them, else a library that
FILE also needs (scripts/gpu-check/glibc_compat.c). Prints the symbols changed; exits 1 if FILE
has no need of VERSION. ELF64 little-endian only (x86-64).
"""
import struct
import sys

SHT_DYNSYM = 11
SHT_GNU_VERNEED = 0x6FFFFFFE
SHT_GNU_VERSYM = 0x6FFFFFFF
VER_FLG_WEAK = 0x2


def cstr(data, off):
    return data[off:data.index(b"\0", off)].decode()


def main(path, version):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        sys.exit(f"{path}: not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for i in range(shnum):
        (name, typ, flags, addr, off, size, link, info, align,
         entsize) = struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
        sections.append(dict(type=typ, off=off, size=size, link=link))
    by_type = {s["type"]: s for s in sections}
    if SHT_GNU_VERNEED not in by_type or SHT_GNU_VERSYM not in by_type:
        sys.exit(f"{path}: no version needs")
    vn = by_type[SHT_GNU_VERNEED]
    strtab = sections[vn["link"]]["off"]
    index = None
    off = vn["off"]
    while True:
        _, cnt, file_, aux, nxt = struct.unpack_from("<HHIII", data, off)
        a = off + aux
        for _ in range(cnt):
            _, flags, other, name, anext = struct.unpack_from("<IHHII", data, a)
            if cstr(data, strtab + name) == version:
                struct.pack_into("<H", data, a + 4, flags | VER_FLG_WEAK)
                index = other & 0x7FFF
            a += anext
        if nxt == 0:
            break
        off += nxt
    if index is None:
        print(f"{path}: needs no {version}")
        return 1
    dynsym, versym = by_type[SHT_DYNSYM], by_type[SHT_GNU_VERSYM]
    dynstr = sections[dynsym["link"]]["off"]
    changed = []
    for i in range(dynsym["size"] // 24):
        name, info, other, shndx = struct.unpack_from("<IBBH", data, dynsym["off"] + i * 24)
        v, = struct.unpack_from("<H", data, versym["off"] + i * 2)
        if (v & 0x7FFF) == index and shndx == 0:
            struct.pack_into("<H", data, versym["off"] + i * 2, 1)
            changed.append(cstr(data, dynstr + name))
    with open(path, "wb") as f:
        f.write(data)
    print(f"{path}: {version} need made weak; unversioned: {' '.join(changed)}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
