#!/usr/bin/env python3
"""rnic-pcap on golden congestion frames, taken byte for byte from rnicd's capture on the test bed
(check_congestion_bed.py): a CNP rnicd sent (opcode 0x81, BECN, PSN 0, the 16 reserved bytes,
DSCP 48, not ECT) and an ACK with ECT(0). Checked: the CNP decodes with those fields and a valid
ICRC; the ACK marked CE the way the bed's link marks it (ECN bits set, IPv4 header checksum
updated) still has a valid ICRC, since the ICRC masks the traffic class; a CNP with one reserved
byte flipped fails its ICRC, and rnic-pcap exits 1 naming that frame.
Usage: check_rnic_pcap_cnp.py RNIC_PCAP"""
import json
import os
import struct
import subprocess
import sys
import tempfile

rnic_pcap = sys.argv[1]
CNP = bytes.fromhex(
    "c6dbd42c315c42e69cba66bd080045c0003c00004000401125470a5400020a540001c12112b7002800008100ffff40000011"
    "0000000000000000000000000000000000000000bb501dee")
ACK = bytes.fromhex(
    "c6dbd42c315c42e69cba66bd08004502003000004000401126110a5400020a540001c12112b7001c00001100ffff00000011"
    "00a874d71f0000027d0f4cb9")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def ipv4_checksum(header):
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def mark_ce(frame):
    """What a congested switch (and the bed's XDP program) does: ECN := CE, header checksum redone."""
    f = bytearray(frame)
    f[15] |= 3
    f[24:26] = b"\0\0"
    f[24:26] = struct.pack("!H", ipv4_checksum(bytes(f[14:34])))
    return bytes(f)


def write_pcap(path, frames):
    with open(path, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, f in enumerate(frames):
            out.write(struct.pack("<IIII", 1_700_000_000 + i, 0, len(f), len(f)) + f)


def rnic_pcap_json(path):
    r = subprocess.run([rnic_pcap, "--json", path], capture_output=True, text=True, timeout=30)
    return r.returncode, json.loads(r.stdout)["files"][0]


check(ipv4_checksum(CNP[14:34]) == 0 and ipv4_checksum(ACK[14:34]) == 0, "the golden frames' IPv4 checksums hold")
with tempfile.TemporaryDirectory() as tmp:
    good = os.path.join(tmp, "good.pcap")
    write_pcap(good, [CNP, ACK, mark_ce(ACK)])
    rc, f = rnic_pcap_json(good)
    check(rc == 0 and f["icrc_ok"] == 3 and f["rocev2"] == 3, f"rnic-pcap: exit {rc}, ICRC ok {f['icrc_ok']} of 3")
    cnp, ack, ce = f["packets"]
    check(cnp["opcode"] == 0x81 and cnp["opcode_name"] == "CNP" and cnp["transport"] == "CNP",
          f"the CNP decodes as opcode 0x81 {cnp['opcode_name']!r} ({cnp['transport']})")
    check(cnp["becn"] and not cnp["fecn"] and cnp["psn"] == 0 and cnp["dest_qp"] == 0x11 and cnp["pkey"] == 0xFFFF,
          f"BECN set, PSN {cnp['psn']}, to QP {cnp['dest_qp']:#x}, P_Key {cnp['pkey']:#x}")
    check(cnp["dscp"] == 48 and cnp["ecn"] == 0 and cnp["icrc"] == "0xee1d50bb",
          f"DSCP {cnp['dscp']}, ECN {cnp['ecn']} (not ECT), ICRC {cnp['icrc']}")
    check(ack["ecn"] == 2 and ce["ecn"] == 3 and ack["icrc"] == ce["icrc"] and ce["icrc_ok"],
          f"the ACK with ECT(0) and marked CE: ECN {ack['ecn']} -> {ce['ecn']}, the same ICRC {ce['icrc']}, valid")
    text = subprocess.run([rnic_pcap, good], capture_output=True, text=True, timeout=30).stdout
    line = next((ln for ln in text.splitlines() if " CNP " in ln), "")
    check("BECN" in line and "icrc=ok" in line and "qp=0x000011" in line, f"text line: {line.strip()}")

    bad = os.path.join(tmp, "bad.pcap")
    flipped = bytearray(CNP)
    flipped[14 + 20 + 8 + 12 + 5] ^= 0x01  # a reserved byte after the BTH
    write_pcap(bad, [ACK, bytes(flipped)])
    r = subprocess.run([rnic_pcap, "--json", bad], capture_output=True, text=True, timeout=30)
    f = json.loads(r.stdout)["files"][0]
    errors = [p.get("error") for p in f["packets"]]
    check(r.returncode == 1 and f["icrc_ok"] == 1 and f["failed"] and f["failed"][0]["frame"] == 2
          and errors[1] is not None and "icrc" in errors[1].lower(),
          f"a CNP with a reserved byte flipped: exit {r.returncode}, frame 2 fails with {errors[1]}")
print("PASSED" if not failures else "FAILED: " + "; ".join(failures))
sys.exit(1 if failures else 0)
