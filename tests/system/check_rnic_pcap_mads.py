#!/usr/bin/python3
"""rnic-pcap checks that frames to QP 1 carry a valid MAD.

Takes rxe's rping capture (REQ, REP, RTU, DREQ, DREP to QP 1), appends copies of its frames with
one rule of the GSI, the MAD or the CM broken (the ICRC recomputed by scapy, so only that rule
fails), plus MADs that are valid but not CM messages, and requires rnic-pcap to flag exactly the
broken copies with the error and frame offset expected, to decode the CM messages of the pristine
frames, and to count the valid non-CM MADs.

Usage: check_rnic_pcap_mads.py RNIC_PCAP RXE_RPING_PCAP
Runs under Debian's /usr/bin/python3, where python3-scapy lives.
"""
import json
import logging
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_corruption import read_pcap, write_pcap  # noqa: E402

BTH = 14 + 20 + 8  # IPv4, no VLAN: the rping capture's layout
DETH = BTH + 12
MAD = DETH + 8
DATA = MAD + 24


def reseal(frame):
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
    from scapy.layers.l2 import Ether
    from scapy.contrib.roce import BTH as ScapyBth
    frame[-4:] = Ether(bytes(frame))[ScapyBth].compute_icrc(None)
    return frame


def mutated(frame, edits):
    f = bytearray(frame)
    for offset, data in edits:
        f[offset:offset + len(data)] = data
    return reseal(f)


def main():
    rnic_pcap, rping = sys.argv[1], sys.argv[2]
    header, records = read_pcap(rping)
    req = records[0][1]
    rc = next(frame for _, frame in records if frame[BTH] == 0x04)  # an RC SEND ONLY
    assert req[BTH] == 0x64 and struct.unpack_from("!H", req, MAD + 16)[0] == 0x0010, "frame 1 is not the REQ"

    # (frame bytes, expected error name or None, expected offset, expected MAD histogram key)
    cases = [
        (mutated(req, [(MAD, b"\x02")]), "bad_mad_base_version", MAD, None),
        (mutated(req, [(MAD + 2, b"\x01")]), "bad_class_version", MAD + 2, None),
        (mutated(req, [(MAD + 3, b"\x01")]), "bad_cm_method", MAD + 3, None),
        (mutated(req, [(DETH, struct.pack("!I", 0x80010001))]), "bad_gsi_qkey", DETH, None),
        # A REJ whose 7-bit ARI length (127) runs past its 72-byte field.
        (mutated(req, [(MAD + 16, b"\x00\x12"), (DATA + 9, b"\xfe")]), "bad_cm_length", DATA + 9, None),
        (mutated(rc, [(BTH + 5, b"\x00\x00\x01")]), "not_gsi_send", BTH, None),
        # Valid MADs that are not CM messages: a Get(ClassPortInfo) to the CM, an SA MAD.
        (mutated(req, [(MAD + 3, b"\x01"), (MAD + 16, b"\x00\x01")]), None, None, "CM ClassPortInfo"),
        (mutated(req, [(MAD + 1, b"\x03"), (MAD + 16, b"\x00\x12")]), None, None, "MAD class 0x03 attr 0x0012"),
    ]
    first_added = len(records) + 1
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "mads.pcap")
        extra = []
        endian = "<" if struct.unpack_from("<I", header)[0] in (0xA1B2C3D4, 0xA1B23C4D) else ">"
        for frame, *_ in cases:
            rec_header = bytearray(records[0][0])
            struct.pack_into(endian + "II", rec_header, 8, len(frame), len(frame))
            extra.append([bytes(rec_header), frame])
        write_pcap(out, header, records + extra)
        run = subprocess.run([rnic_pcap, "--json", out], capture_output=True, text=True)
        text = subprocess.run([rnic_pcap, out], capture_output=True, text=True)

    errors = []
    if run.returncode != 1:
        errors.append(f"rnic-pcap exit {run.returncode}, expected 1: {run.stderr.strip()}")
    doc = json.loads(run.stdout)["files"][0]
    failed = {f["frame"]: f for f in doc["failed"]}
    want_failed = {first_added + i: (name, off) for i, (_, name, off, _) in enumerate(cases) if name}
    for frame, (name, off) in want_failed.items():
        got = failed.get(frame)
        if not got or got["error"] != name or got["offset"] != off:
            errors.append(f"frame {frame}: expected {name} at {off}, got {got}")
    for frame in failed:
        if frame not in want_failed:
            errors.append(f"frame {frame} flagged but not broken: {failed[frame]}")

    packets = {p["frame"]: p for p in doc["packets"]}
    attrs = [packets[n]["mad"]["attribute"] for n in sorted(packets) if n < first_added and "mad" in packets[n]]
    if attrs != ["REQ", "REP", "RTU", "DREQ", "DREP"]:
        errors.append(f"pristine CM MADs decoded as {attrs}")
    req_cm = packets[1]["mad"]["cm"]
    if (req_cm.get("port_space"), req_cm.get("port"), req_cm.get("rdma_cm", {}).get("src")) != ("TCP", 7174,
                                                                                           "10.199.0.2"):
        errors.append(f"REQ decoded as {req_cm}")
    for i, (_, name, _, key) in enumerate(cases):
        if key and doc["mads"].get(key) != 1:
            errors.append(f"frame {first_added + i}: MAD histogram {doc['mads']} lacks {key}")
    if "ERROR bad_cm_length" not in text.stdout or "CM REQ tid=0x0000000286e66a32" not in text.stdout:
        errors.append("text output lacks the CM decode or the MAD error")

    for e in errors:
        print(e)
    print(f"{len(cases)} altered frames, {len(want_failed)} expected failures, {len(errors)} problems")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
