#!/usr/bin/python3
"""Independent checkers agree with rnic-pcap on every frame of a capture.

  tshark: decodes each frame (UDP 4791 is InfiniBand by default) with the same BTH and
          extension-header values rnic-pcap reports, and marks none malformed, none with an
          expert error or warning.
  scapy:  scapy.contrib.roce recomputes the same ICRC (IPv4 only: scapy 2.5 has no IPv6 ICRC).

Usage: check_tshark_decode.py RNIC_PCAP FILE.pcap... [--min-frames N]
Runs under Debian's /usr/bin/python3, where python3-scapy lives.
"""
import argparse
import json
import logging
import subprocess
import sys

# One expert mark is accepted, on IPv6 only: RoCEv2 senders (Linux rxe included, see
# shared/pcaps-rxe/rxe_ipv6_*.pcap) leave the UDP checksum 0 and rely on the ICRC, which
# Wireshark flags as "Illegal checksum value (0)" for UDP over IPv6.
ACCEPTED_IPV6_EXPERT = "Illegal checksum value (0)"
SEVERITY_WARNING = 0x600000

FIELDS = {
    "frame.number", "ip.dsfield.ecn", "ipv6.tclass", "udp.srcport", "udp.dstport",
    "infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.padcnt", "infiniband.bth.tver",
    "infiniband.bth.p_key", "infiniband.bth.destqp", "infiniband.bth.a", "infiniband.bth.psn",
    "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome", "infiniband.aeth.msn",
    "infiniband.deth.q_key", "infiniband.deth.srcqp",
    "infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
    "infiniband.atomicacketh.origremdt", "infiniband.immdt", "infiniband.ieth",
    "infiniband.invariant.crc", "_ws.malformed", "_ws.expert.message", "_ws.expert.severity",
}


def num(v):
    if v in ("True", "true"):
        return 1
    if v in ("False", "false"):
        return 0
    return int(v, 0)


def tshark_frames(path):
    cmd = ["tshark", "-r", path, "-T", "json"]
    for f in sorted(FIELDS):
        cmd += ["-e", f]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    frames = {}
    for pkt in json.loads(out):
        layers = pkt["_source"]["layers"]
        frames[int(layers["frame.number"][0])] = layers
    return frames


def expect(errors, frame, name, got, want):
    if got != want:
        errors.append(f"frame {frame}: {name}: tshark {got!r}, rnic-pcap {want!r}")


def compare(errors, ts, ours):
    n = ours["frame"]

    def field(name, occurrence=0):
        vals = ts.get(name)
        return num(vals[occurrence]) if vals and len(vals) > occurrence else None

    def raw(name):  # byte-string fields, printed as bare hex
        vals = ts.get(name)
        return int(vals[0].replace(":", ""), 16) if vals else None

    if ts.get("_ws.malformed"):
        errors.append(f"frame {n}: tshark marks it malformed: {ts.get('_ws.malformed')}")
    messages = ts.get("_ws.expert.message", [])
    severities = [num(s) for s in ts.get("_ws.expert.severity", [])]
    for msg, sev in zip(messages, severities):
        if sev >= SEVERITY_WARNING and not (ours["ip_version"] == 6 and msg == ACCEPTED_IPV6_EXPERT):
            errors.append(f"frame {n}: tshark expert severity {sev:#x}: {msg}")

    expect(errors, n, "udp.dstport", field("udp.dstport"), 4791)
    expect(errors, n, "udp.srcport", field("udp.srcport"), ours["sport"])
    if ours["ip_version"] == 4:
        expect(errors, n, "ecn", field("ip.dsfield.ecn"), ours["ecn"])
    else:
        expect(errors, n, "ipv6.tclass", field("ipv6.tclass"), ours["dscp"] << 2 | ours["ecn"])
    expect(errors, n, "bth.opcode", field("infiniband.bth.opcode"), ours["opcode"])
    expect(errors, n, "bth.psn", field("infiniband.bth.psn"), ours["psn"])
    expect(errors, n, "bth.destqp", field("infiniband.bth.destqp"), ours["dest_qp"])
    expect(errors, n, "bth.padcnt", field("infiniband.bth.padcnt"), ours["pad"])
    expect(errors, n, "bth.tver", field("infiniband.bth.tver"), 0)
    expect(errors, n, "bth.p_key", field("infiniband.bth.p_key"), ours["pkey"])
    expect(errors, n, "bth.a", field("infiniband.bth.a"), int(ours["ack_req"]))
    expect(errors, n, "bth.se", field("infiniband.bth.se"), int(ours["solicited"]))
    if ours["opcode_name"] == "CNP":
        return  # Wireshark 4.0 names opcode 0x81 "Unknown OpCode" and stops after the BTH
    # tshark reads the ICRC field as a big-endian number; it is sent least-significant byte first.
    wire_icrc = int.from_bytes(int(ours["icrc"], 16).to_bytes(4, "little"), "big")
    expect(errors, n, "icrc", field("infiniband.invariant.crc"), wire_icrc)
    if "reth" in ours:
        r = ours["reth"]
        expect(errors, n, "reth.va", field("infiniband.reth.va"), r["va"])
        expect(errors, n, "reth.r_key", field("infiniband.reth.r_key"), r["rkey"])
        expect(errors, n, "reth.dmalen", field("infiniband.reth.dmalen"), r["dma_length"])
    if "atomic_eth" in ours:
        a = ours["atomic_eth"]
        # Wireshark shows the AtomicETH VA and R_Key under the RETH field names.
        expect(errors, n, "atomiceth.va", field("infiniband.reth.va"), a["va"])
        expect(errors, n, "atomiceth.r_key", field("infiniband.reth.r_key"), a["rkey"])
        expect(errors, n, "atomiceth.swapdt", field("infiniband.atomiceth.swapdt"), a["swap_add"])
        expect(errors, n, "atomiceth.cmpdt", field("infiniband.atomiceth.cmpdt"), a["compare"])
    if "aeth" in ours:
        expect(errors, n, "aeth.syndrome", field("infiniband.aeth.syndrome"), ours["aeth"]["syndrome"])
        expect(errors, n, "aeth.msn", field("infiniband.aeth.msn"), ours["aeth"]["msn"])
    if "atomic_ack_eth" in ours:
        expect(errors, n, "atomicacketh", field("infiniband.atomicacketh.origremdt"), ours["atomic_ack_eth"]["original"])
    if "deth" in ours:
        expect(errors, n, "deth.q_key", field("infiniband.deth.q_key"), ours["deth"]["qkey"])
        expect(errors, n, "deth.srcqp", field("infiniband.deth.srcqp"), ours["deth"]["src_qp"])
    if "immdt" in ours:
        expect(errors, n, "immdt", raw("infiniband.immdt"), ours["immdt"])
    if "ieth" in ours:
        expect(errors, n, "ieth", raw("infiniband.ieth"), ours["ieth"]["rkey"])


def scapy_icrc(path, ours_by_frame, errors):
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
    from scapy.utils import rdpcap
    from scapy.layers.l2 import Ether
    from scapy.contrib.roce import BTH
    checked = 0
    for i, pkt in enumerate(rdpcap(path), start=1):
        ours = ours_by_frame.get(i)
        if ours is None or ours["ip_version"] != 4:
            continue
        p = Ether(bytes(pkt))
        if BTH not in p:
            errors.append(f"frame {i}: scapy sees no BTH")
            continue
        want = int(ours["icrc"], 16).to_bytes(4, "little")
        got = p[BTH].compute_icrc(None)
        if got != want:
            errors.append(f"frame {i}: scapy ICRC {got.hex()} != ours {want.hex()}")
        checked += 1
    return checked


def check_file(rnic_pcap, path, min_frames):
    run = subprocess.run([rnic_pcap, "--json", path], capture_output=True, text=True)
    if run.returncode != 0:
        return [f"{path}: rnic-pcap failed ({run.returncode}): {run.stderr.strip()}"]
    doc = json.loads(run.stdout)["files"][0]
    ours = {p["frame"]: p for p in doc["packets"]}
    if len(ours) < min_frames:
        return [f"{path}: only {len(ours)} frames, expected at least {min_frames}"]
    ts = tshark_frames(path)
    errors = []
    for n, p in sorted(ours.items()):
        if n not in ts:
            errors.append(f"frame {n}: tshark did not decode it")
            continue
        compare(errors, ts[n], p)
    scapy_checked = scapy_icrc(path, ours, errors)
    print(f"{path}: {len(ours)} frames compared with tshark, {scapy_checked} ICRCs recomputed by scapy, "
          f"{len(errors)} disagreements")
    return [f"{path}: {e}" for e in errors]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rnic_pcap")
    ap.add_argument("pcaps", nargs="+")
    ap.add_argument("--min-frames", type=int, default=1)
    args = ap.parse_args()
    errors = []
    for path in args.pcaps:
        errors += check_file(args.rnic_pcap, path, args.min_frames)
    for e in errors[:50]:
        print(e)
    print(f"{len(args.pcaps)} file(s), {len(errors)} disagreements")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
