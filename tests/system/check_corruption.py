#!/usr/bin/python3
"""rnic-pcap accepts every frame of each pristine capture, then flags exactly the frames of a
copy in which one bit was flipped, by frame number.

Only bits the receiver can check are flipped: anything from the IP header to the ICRC except
the fields RoCEv2 defines as variant and no checksum covers (BTH byte 4 with FECN/BECN, IPv6
traffic class/flow label/hop limit) and the fields that decide whether a frame is RoCEv2 at all
(UDP destination port, IPv6 next header): a frame moved off port 4791 is no longer RoCEv2.

Usage: check_corruption.py RNIC_PCAP FILE.pcap...  [--every N] [--seed S]
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile


def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data)[0]
    endian = {0xA1B2C3D4: "<", 0xA1B23C4D: "<", 0xD4C3B2A1: ">", 0x4D3CB2A1: ">"}[magic]
    records, off = [], 24
    while off + 16 <= len(data):
        caplen = struct.unpack_from(endian + "IIII", data, off)[2]
        records.append([data[off:off + 16], bytearray(data[off + 16:off + 16 + caplen])])
        off += 16 + caplen
    return data[:24], records


def write_pcap(path, header, records):
    with open(path, "wb") as f:
        f.write(header)
        for rec_header, frame in records:
            f.write(rec_header)
            f.write(frame)


def checkable_bytes(frame):
    """Offsets whose corruption a receiver must detect."""
    l3 = 14
    ethertype = struct.unpack_from("!H", frame, 12)[0]
    if ethertype == 0x8100:
        l3 = 18
        ethertype = struct.unpack_from("!H", frame, 16)[0]
    if ethertype == 0x0800:
        ihl = (frame[l3] & 0x0F) * 4
        ip_end = l3 + struct.unpack_from("!H", frame, l3 + 2)[0]
        l4 = l3 + ihl
        excluded = set()
    else:
        ip_end = l3 + 40 + struct.unpack_from("!H", frame, l3 + 4)[0]
        l4 = l3 + 40
        excluded = {l3, l3 + 1, l3 + 2, l3 + 3, l3 + 6, l3 + 7}
    excluded |= {l4 + 2, l4 + 3, l4 + 8 + 4}  # UDP destination port, BTH byte 4
    return [o for o in range(l3, ip_end) if o not in excluded]


def rnic_pcap(tool, path):
    run = subprocess.run([tool, "--json", path], capture_output=True, text=True)
    return run.returncode, json.loads(run.stdout)["files"][0] if run.stdout else None, run.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rnic_pcap")
    ap.add_argument("pcaps", nargs="+")
    ap.add_argument("--every", type=int, default=7, help="corrupt about one frame in N")
    ap.add_argument("--seed", type=int, default=4791)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    problems, total_frames, total_corrupted = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.pcaps:
            rc, doc, err = rnic_pcap(args.rnic_pcap, path)
            if rc != 0 or doc["rocev2"] != doc["frames"] or doc["icrc_ok"] != doc["frames"]:
                problems.append(f"{path}: pristine capture not fully accepted (exit {rc}): {err.strip()}")
                continue
            header, records = read_pcap(path)
            corrupted = set()
            for index, rec in enumerate(records, start=1):
                if rng.randrange(args.every) != 0:
                    continue
                offset = rng.choice(checkable_bytes(rec[1]))
                rec[1][offset] ^= 1 << rng.randrange(8)
                corrupted.add(index)
            if not corrupted:  # every file gets at least one
                offset = rng.choice(checkable_bytes(records[0][1]))
                records[0][1][offset] ^= 0x01
                corrupted.add(1)
            copy = os.path.join(tmp, os.path.basename(path))
            write_pcap(copy, header, records)
            rc, doc, err = rnic_pcap(args.rnic_pcap, copy)
            flagged = {f["frame"] for f in doc["failed"]}
            if rc != 1:
                problems.append(f"{path}: exit status {rc} on the corrupted copy, expected 1")
            if flagged != corrupted:
                problems.append(f"{path}: flagged {sorted(flagged)} but corrupted {sorted(corrupted)}")
            named = err.split("failed:", 1)[1] if "failed:" in err else ""
            for n in corrupted:
                if f"{n} (" not in named:
                    problems.append(f"{path}: stderr does not name frame {n}: {err.strip()}")
            total_frames += len(records)
            total_corrupted += len(corrupted)
    for p in problems:
        print(p)
    print(f"{len(args.pcaps)} files, {total_frames} frames, {total_corrupted} corrupted, "
          f"{len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
