#!/usr/bin/python3
"""rnic-pcap --plot: the SVG is well-formed XML and holds one marker per event, counted here
independently from tshark's fields.

For each capture: rnic-pcap --plot OUT.svg CAPTURE must exit 0; xml.etree must parse OUT.svg;
its markers (elements whose class holds ev-req, ev-retx, ev-ack, ev-nak-N, ev-rnr, ev-read-resp,
ev-read-retx, ev-cnp) must number what tshark's BTH/AETH fields give with the same definitions:
a flow is (IP source, IP destination, BTH destination QP); a request whose PSN the flow already
sent is a retransmission, likewise a READ response sent again; an AETH syndrome's bits 6-5 say
ACK (0), RNR NAK (1) or NAK (3, code in bits 4-0).

Also checks --plot's usage errors (exit 2) and --plot-interval on the first capture.

Usage: check_psn_plot.py RNIC_PCAP [--lossy|--clean|--rnr|--read] CAPTURE [...]
  --lossy: retransmissions and PSN-sequence NAKs must be present; --clean: no retransmission,
  NAK or RNR NAK; --rnr: RNR NAKs and RNR waits present; --read: READ responses sent again.
"""
import collections
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

REQUESTS = set(range(0x00, 0x0D)) | {0x13, 0x14, 0x16, 0x17, 0x1C, 0x1D} | set(range(0x20, 0x2C)) | {0x64, 0x65}
READ_RESPONSES = set(range(0x0D, 0x11))
ACKS = {0x11, 0x12}
FIELDS = ["frame.number", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "udp.dstport", "infiniband.bth.opcode",
          "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.aeth.syndrome"]

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def expected_counts(path):
    cmd = ["tshark", "-n", "-r", path, "-Y", "udp.dstport == 4791", "-T", "fields", "-E", "separator=\t"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300).stdout
    counts = collections.Counter()
    requests, responses = collections.defaultdict(set), collections.defaultdict(set)
    for line in out.splitlines():
        row = dict(zip(FIELDS, line.split("\t")))
        src = row["ip.src"] or row["ipv6.src"]
        dst = row["ip.dst"] or row["ipv6.dst"]
        op = int(row["infiniband.bth.opcode"], 0)
        flow = (src, dst, int(row["infiniband.bth.destqp"], 0))
        psn = int(row["infiniband.bth.psn"], 0)
        if op in REQUESTS:
            counts["ev-retx" if psn in requests[flow] else "ev-req"] += 1
            requests[flow].add(psn)
        elif op in READ_RESPONSES:
            counts["ev-read-retx" if psn in responses[flow] else "ev-read-resp"] += 1
            responses[flow].add(psn)
        elif op in ACKS:
            syn = int(row["infiniband.aeth.syndrome"], 0)
            kind = (syn >> 5) & 3
            counts["ev-rnr" if kind == 1 else f"ev-nak-{syn & 0x1F}" if kind == 3 else "ev-ack"] += 1
        elif op == 0x81:
            counts["ev-cnp"] += 1
    return counts


def svg_counts(svg_path):
    root = ET.parse(svg_path).getroot()  # raises on malformed XML
    counts = collections.Counter()
    for el in root.iter():
        for cls in el.get("class", "").split():
            if cls.startswith("ev-") and cls != "ev-nak":
                counts[cls] += 1
            elif cls == "rnr-wait":
                counts[cls] += 1
    return root, counts


def check_capture(rnic_pcap, mode, path, tmp):
    name = os.path.basename(path)
    svg = os.path.join(tmp, name + ".svg")
    r = subprocess.run([rnic_pcap, "--quiet", "--plot", svg, path], capture_output=True, text=True, timeout=300)
    if not check(r.returncode == 0, f"{name}: rnic-pcap --plot exit {r.returncode} {r.stderr.strip()}"):
        return
    try:
        root, got = svg_counts(svg)
    except ET.ParseError as e:
        check(False, f"{name}: SVG is not well-formed XML: {e}")
        return
    check(root.tag == "{http://www.w3.org/2000/svg}svg", f"{name}: root element {root.tag}")
    want = expected_counts(path)
    keys = sorted(set(want) | {k for k in got if k != "rnr-wait"})
    for k in keys:
        check(got[k] == want[k], f"{name}: {k}: {got[k]} markers, tshark's fields give {want[k]}")
    naks = sum(v for k, v in want.items() if k.startswith("ev-nak-"))
    if mode == "--lossy":
        check(want["ev-retx"] > 0 and want["ev-nak-0"] > 0,
              f"{name}: lossy: {want['ev-retx']} retransmissions, {want['ev-nak-0']} PSN sequence NAKs")
    elif mode == "--clean":
        check(want["ev-retx"] == 0 and naks == 0 and want["ev-rnr"] == 0 and want["ev-req"] > 0,
              f"{name}: clean: {want['ev-req']} requests, no retransmission/NAK/RNR NAK "
              f"({want['ev-retx']}, {naks}, {want['ev-rnr']})")
    elif mode == "--rnr":
        check(want["ev-rnr"] > 0 and 0 < got["rnr-wait"] <= want["ev-rnr"],
              f"{name}: {want['ev-rnr']} RNR NAKs, {got['rnr-wait']} RNR waits drawn")
    elif mode == "--read":
        check(want["ev-read-retx"] > 0, f"{name}: {want['ev-read-retx']} READ responses sent again")
    text = "".join(root.itertext())
    check("Throughput per direction" in text and "Mbit/s" in text, f"{name}: throughput graph present")


def check_usage(rnic_pcap, sample, tmp):
    """--plot's usage errors exit 2 with a message, as rnic-pcap's others do."""
    svg = os.path.join(tmp, "u.svg")
    for args, what in (([ "--plot"], "--plot without a value"),
                       (["--plot", svg, sample, sample], "--plot with two captures"),
                       (["--plot", svg, "--plot-interval", "zero", sample], "--plot-interval not a number"),
                       (["--plot", svg, "--plot-interval", "0", sample], "--plot-interval 0"),
                       (["--plot-interval", "10", sample], "--plot-interval without --plot"),
                       (["--plot", os.path.join(tmp, "missing", "x.svg"), sample], "--plot into a missing directory")):
        r = subprocess.run([rnic_pcap] + args, capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and "rnic-pcap:" in r.stderr, f"usage: {what}: exit {r.returncode}")
    r = subprocess.run([rnic_pcap, "--quiet", "--plot", svg, "--plot-interval", "250", sample],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "interval 250000 ns" in r.stderr,
          f"--plot-interval 250 (us) is used: {r.stderr.strip()}")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    rnic_pcap = sys.argv[1]
    mode = None
    captures = [a for a in sys.argv[2:] if not a.startswith("--")]
    with tempfile.TemporaryDirectory() as tmp:
        check_usage(rnic_pcap, captures[0], tmp)
        for a in sys.argv[2:]:
            if a.startswith("--"):
                mode = a
            else:
                check_capture(rnic_pcap, mode, a, tmp)
    print(f"{'PASSED' if not failures else 'FAILED'}: {len(failures)} failure(s)")
    for f in failures[:20]:
        print("  " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
