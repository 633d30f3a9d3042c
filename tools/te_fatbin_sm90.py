#!/usr/bin/env python3
"""Cut Transformer Engine's libtransformer_engine.so down to the GPU code one architecture runs.

The CUDA 13 wheel (transformer_engine_cu13) carries, in the ELF section `.nv_fatbin`, one fat binary
per translation unit, each with machine code (cubins) for sm_75, 80, 89, 90, 100, 103, 120 and PTX for
75-90. An H200 (sm_90) loads only the sm_90 cubins. This script keeps every entry of the kept
architecture and zeroes the payload of every other one in place: the section's size, the entry
headers and every file offset stay as they were (no relinking), and the zeroed bytes compress to
almost nothing. A fat binary with no cubin of the kept architecture keeps everything, so no kernel
is left without code the driver can load.

    python tools/te_fatbin_sm90.py IN.so OUT.so [--arch 90] [--json report.json]

The layout read here is the fat binary container as `cuobjdump` and the CUDA driver read it, as
reverse-engineered in public (e.g. gpgpu-sim's and cricket's `fatbin` headers): a 16-byte container
header (magic 0xBA55ED50, version, header size, payload size), then entries, each a header
(kind 1 = PTX, 2 = cubin; header size; payload size; ...; the architecture as major*10+minor) and
its payload. The script stops with a message at anything else rather than guess.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from collections import Counter
from typing import NamedTuple

FATBIN_MAGIC = 0xBA55ED50
CONTAINER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries after it
ENTRY = struct.Struct("<HHIQIIHHI")  # kind, ?, header size, payload size, compressed size, ?, minor, major, arch
KIND_PTX, KIND_CUBIN = 1, 2


class Entry(NamedTuple):
    kind: int
    arch: int
    offset: int  # of the payload, in the file
    size: int


def section(data: bytes, name: str) -> tuple[int, int]:
    """(file offset, size) of an ELF64 little-endian section by name."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise SystemExit("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx][4]
    for name_off, _type, _flags, _addr, off, size in headers:
        end = data.index(b"\0", strtab + name_off)
        if data[strtab + name_off:end].decode() == name:
            return off, size
    raise SystemExit(f"no {name} section")


def containers(data: bytes, start: int, size: int) -> list[list[Entry]]:
    """The fat binaries of a `.nv_fatbin` section, each a list of its entries."""
    out: list[list[Entry]] = []
    pos, end = start, start + size
    while pos < end:
        if end - pos < CONTAINER.size or struct.unpack_from("<I", data, pos)[0] != FATBIN_MAGIC:
            # alignment padding between containers is zero; anything else is a layout we do not know
            nxt = data.find(struct.pack("<I", FATBIN_MAGIC), pos, end)
            gap = data[pos:end if nxt < 0 else nxt]
            if gap.strip(b"\0"):
                raise SystemExit(f"unknown bytes at {pos:#x} in .nv_fatbin")
            if nxt < 0:
                break
            pos = nxt
            continue
        _magic, _version, header_size, entries_size = CONTAINER.unpack_from(data, pos)
        entries: list[Entry] = []
        e, cend = pos + header_size, pos + header_size + entries_size
        while e < cend:
            kind, _u1, ehs, payload, _csize, _u2, _minor, _major, arch = ENTRY.unpack_from(data, e)
            if kind not in (KIND_PTX, KIND_CUBIN) or ehs < ENTRY.size:
                raise SystemExit(f"unknown fat binary entry kind {kind} at {e:#x}")
            entries.append(Entry(kind, arch, e + ehs, payload))
            e += ehs + payload
        if e != cend:
            raise SystemExit(f"fat binary at {pos:#x}: entries overrun the container")
        out.append(entries)
        pos = cend
    return out


def cut(data: bytearray, arch: int) -> dict[str, object]:
    """Zero every payload the GPU of `arch` does not load; return what was kept and dropped."""
    start, size = section(bytes(data), ".nv_fatbin")
    kept: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    untouched = 0
    for entries in containers(bytes(data), start, size):
        if not any(e.kind == KIND_CUBIN and e.arch == arch for e in entries):
            untouched += 1  # no machine code for this GPU: the driver needs the rest (PTX)
            continue
        for e in entries:
            label = f"{'ptx' if e.kind == KIND_PTX else 'sm'}_{e.arch}"
            if e.kind == KIND_CUBIN and e.arch == arch:
                kept[label] += e.size
            else:
                data[e.offset:e.offset + e.size] = bytes(e.size)
                dropped[label] += e.size
    return {"section_bytes": size, "kept_bytes": dict(sorted(kept.items())),
            "dropped_bytes": dict(sorted(dropped.items())), "containers_left_whole": untouched}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--arch", type=int, default=90, help="keep cubins of this architecture (90: sm_90)")
    parser.add_argument("--json", help="write the report here too")
    args = parser.parse_args(argv)
    with open(args.source, "rb") as f:
        data = bytearray(f.read())
    report = cut(data, args.arch)
    with open(args.target, "wb") as f:
        f.write(data)
    text = json.dumps(report, indent=1, sort_keys=True)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
