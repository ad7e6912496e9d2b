#!/usr/bin/env python3
"""Writes each frame of classic pcap files as one file in a directory: a libFuzzer seed corpus.
Usage: pcap-to-corpus.py OUT_DIR FILE.pcap..."""
import os
import struct
import sys


def frames(path):
    with open(path, "rb") as f:
        header = f.read(24)
        magic = struct.unpack("<I", header[:4])[0]
        endian = {0xA1B2C3D4: "<", 0xA1B23C4D: "<", 0xD4C3B2A1: ">", 0x4D3CB2A1: ">"}.get(magic)
        if endian is None:
            raise SystemExit(f"{path}: not a classic pcap file")
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            caplen = struct.unpack(endian + "IIII", rec)[2]
            yield f.read(caplen)


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seen = set()
    for path in sys.argv[2:]:
        for frame in frames(path):
            if frame in seen:
                continue
            seen.add(frame)
            with open(os.path.join(out, f"seed{len(seen):05d}"), "wb") as f:
                f.write(frame)
    print(f"{len(seen)} distinct frames written to {out}")


if __name__ == "__main__":
    main()
