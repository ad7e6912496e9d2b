#!/usr/bin/python3
"""Independent checkers agree with rnic-pcap on every frame of a capture.

  tshark: decodes each frame (UDP 4791 is InfiniBand by default) with the same BTH and
          extension-header values rnic-pcap reports, and marks none malformed, none with an
          expert error or warning.
  scapy:  scapy.contrib.roce recomputes the same ICRC (IPv4 only: scapy 2.5 has no IPv6 ICRC).
  MADs:   for frames to QP 1, tshark's MAD header and InfiniBand CM fields (REQ, REP, RTU, DREQ,
          DREP: communication IDs, service ID, the rdma_cm addresses in REQ private data) equal
          rnic-pcap's; tshark 4.0 does not dissect SIDR_REQ/SIDR_REP, which only get the header.

Usage: check_tshark_decode.py RNIC_PCAP FILE.pcap... [--min-frames N] [--min-cm N]
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
    "infiniband.mad.baseversion", "infiniband.mad.mgmtclass", "infiniband.mad.classversion",
    "infiniband.mad.method", "infiniband.mad.status", "infiniband.mad.transactionid",
    "infiniband.mad.attributeid", "infiniband.mad.attributemodifier",
    "infiniband.cm.req", "infiniband.cm.req.serviceid", "infiniband.cm.req.localqpn",
    "infiniband.cm.req.startpsn", "infiniband.cm.req.ip_cm.ipv", "infiniband.cm.req.ip_cm.sport",
    "infiniband.cm.req.ip_cm.sip4", "infiniband.cm.req.ip_cm.dip4",
    "infiniband.cm.req.ip_cm.sip6", "infiniband.cm.req.ip_cm.dip6",
    "infiniband.cm.rep", "infiniband.cm.rep.remotecommid", "infiniband.cm.rep.localqpn",
    "infiniband.cm.rep.startpsn",
    "infiniband.cm.rtu.localcommid", "infiniband.cm.rtu.remotecommid",
    "infiniband.cm.rej.localcommid", "infiniband.cm.rej.remotecommid", "infiniband.cm.rej.reason",
    "infiniband.cm.dreq.localcommid", "infiniband.cm.dreq.remotecommid", "infiniband.cm.req.remoteqpneecn",
    "infiniband.cm.drsp.localcommid", "infiniband.cm.drsp.remotecommid",
}

# tshark field -> key of rnic-pcap's "cm" object, per CM attribute ID.
CM_FIELDS = {
    0x10: {"infiniband.cm.req": "local_comm_id", "infiniband.cm.req.serviceid": "service_id",
           "infiniband.cm.req.localqpn": "local_qpn", "infiniband.cm.req.startpsn": "starting_psn"},
    0x12: {"infiniband.cm.rej.localcommid": "local_comm_id", "infiniband.cm.rej.remotecommid": "remote_comm_id",
           "infiniband.cm.rej.reason": "reason"},
    0x13: {"infiniband.cm.rep": "local_comm_id", "infiniband.cm.rep.remotecommid": "remote_comm_id",
           "infiniband.cm.rep.localqpn": "local_qpn", "infiniband.cm.rep.startpsn": "starting_psn"},
    0x14: {"infiniband.cm.rtu.localcommid": "local_comm_id", "infiniband.cm.rtu.remotecommid": "remote_comm_id"},
    0x15: {"infiniband.cm.dreq.localcommid": "local_comm_id", "infiniband.cm.dreq.remotecommid": "remote_comm_id",
           "infiniband.cm.req.remoteqpneecn": "remote_qpn"},
    0x16: {"infiniband.cm.drsp.localcommid": "local_comm_id", "infiniband.cm.drsp.remotecommid": "remote_comm_id"},
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
    if ours["dest_qp"] == 1:
        compare_mad(errors, n, ts, ours, field)


def compare_mad(errors, n, ts, ours, field):
    """A frame to QP 1: rnic-pcap must have decoded a MAD, and agree with tshark on it."""
    mad = ours.get("mad")
    if mad is None:
        errors.append(f"frame {n}: rnic-pcap decoded no MAD in a frame to QP 1")
        return
    for tsf, key in (("baseversion", "base_version"), ("mgmtclass", "mgmt_class"),
                     ("classversion", "class_version"), ("method", "method"), ("status", "status"),
                     ("transactionid", "transaction_id"), ("attributeid", "attribute_id"),
                     ("attributemodifier", "attribute_modifier")):
        expect(errors, n, f"mad.{key}", field(f"infiniband.mad.{tsf}"), mad[key])
    if mad["mgmt_class"] != 7:
        return
    if not 0x10 <= mad["attribute_id"] <= 0x18:
        return
    cm = mad.get("cm")
    if cm is None:
        errors.append(f"frame {n}: rnic-pcap did not decode CM {mad.get('attribute')}")
        return
    for tsf, key in CM_FIELDS.get(mad["attribute_id"], {}).items():
        expect(errors, n, f"cm.{key}", field(tsf), cm[key])
    if mad["attribute_id"] == 0x10 and "rdma_cm" in cm:
        ip = cm["rdma_cm"]
        v = ip["ip_version"]
        expect(errors, n, "rdma_cm.ip_version", field("infiniband.cm.req.ip_cm.ipv"), v)
        expect(errors, n, "rdma_cm.src_port", field("infiniband.cm.req.ip_cm.sport"), ip["src_port"])
        for key, tsf in (("src", "sip"), ("dst", "dip")):
            got = ts.get(f"infiniband.cm.req.ip_cm.{tsf}{v}")
            expect(errors, n, f"rdma_cm.{key}", got[0] if got else None, ip[key])


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


def count_cm(ours):
    return sum(1 for p in ours.values() if "cm" in p.get("mad", {}))


def check_file(rnic_pcap, path, min_frames):
    run = subprocess.run([rnic_pcap, "--json", path], capture_output=True, text=True)
    if run.returncode != 0:
        return [f"{path}: rnic-pcap failed ({run.returncode}): {run.stderr.strip()}"], 0
    doc = json.loads(run.stdout)["files"][0]
    ours = {p["frame"]: p for p in doc["packets"]}
    if len(ours) < min_frames:
        return [f"{path}: only {len(ours)} frames, expected at least {min_frames}"], 0
    ts = tshark_frames(path)
    errors = []
    for n, p in sorted(ours.items()):
        if n not in ts:
            errors.append(f"frame {n}: tshark did not decode it")
            continue
        compare(errors, ts[n], p)
    scapy_checked = scapy_icrc(path, ours, errors)
    print(f"{path}: {len(ours)} frames compared with tshark ({count_cm(ours)} CM MADs), "
          f"{scapy_checked} ICRCs recomputed by scapy, {len(errors)} disagreements")
    return [f"{path}: {e}" for e in errors], count_cm(ours)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rnic_pcap")
    ap.add_argument("pcaps", nargs="+")
    ap.add_argument("--min-frames", type=int, default=1)
    ap.add_argument("--min-cm", type=int, default=0, help="CM MADs the files must hold in all")
    args = ap.parse_args()
    errors = []
    cm_total = 0
    for path in args.pcaps:
        file_errors, cm = check_file(args.rnic_pcap, path, args.min_frames)
        errors += file_errors
        cm_total += cm
    if cm_total < args.min_cm:
        errors.append(f"only {cm_total} CM MADs decoded, expected at least {args.min_cm}")
    for e in errors[:50]:
        print(e)
    print(f"{len(args.pcaps)} file(s), {cm_total} CM MADs, {len(errors)} disagreements")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
