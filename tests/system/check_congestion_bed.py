#!/usr/bin/env python3
"""DCQCN on the real test bed: two rnicd (rnic0 in namespace A, rnic1 in B, both capturing), a
steady RC WRITE stream from rnic0 to rnic1 (Debian's ib_write_bw through rnic-run, 64 KiB
messages, paced by perftest's software limiter at 400 Mb/s so the captures stay small), and
the link marking CE on half of the ECT frames A sends (tools/testbed.sh mark, XDP on B's veth)
for a few seconds in the middle of the stream; then 300 WRITEs over IPv6 (GID 2, fd77::) with 30 %
marked, for the program's traffic-class path. Checked:
  wire      every frame of both captures passes rnic-pcap (ICRC included, CNPs too); every
            WRITE rnic0 sends is ECT(0); none is CE in rnic0's capture (it is marked after it
            left), about half are CE in rnic1's while marking is on, none outside;
  CNPs      rnic1 answers with CNPs (opcode 0x81, BECN, PSN 0, DSCP 48, not ECT) to rnic0's
            QP, only while marking is on;
  counters  rnic1's np_ecn_marked_roce_packets = the CE frames in its capture, its np_cnp_sent
            = the CNPs it sent there; rnic0's rp_cnp_handled = the CNPs in its capture, IPv4 and
            IPv6 together (the
            captures hold the daemons' whole lives, so the counts are exact); per QP,
            cnps_sent (rnic1) = cnps_received (rnic0) = np_cnp_sent;
  rate      rnicctl qp shows rnic0's QP rate-limited (rate-mbps below the port rate, alpha)
            while marking is on and no longer limited after; the WRITE throughput in rnic0's
            capture falls to at most 60 % of the rate before marking and comes back to at
            least 80 % of it after.
DCQCN knobs: --port-rate 1000 (the bed's share) and rp_dce_tcp_rtt=500: a CE-marked frame
earns at most one CNP per frame here (about one per 250 us), and with NVIDIA's alpha period of
1 us alpha forgets every CNP before the next one, so no cut would be visible
(docs/congestion.md, "On the real bed and against rxe").
Usage: check_congestion_bed.py TESTBED RNICD RNIC_RUN RNICCTL RNIC_PCAP"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from systest import Checks, daemon_exit_status, exit_counters, make_run  # noqa: E402

testbed, rnicd, rnic_run, rnicctl, rnic_pcap = sys.argv[1:6]
name, state = "ce", "/tmp/ce"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.84.0")
checks = Checks(verdict_first=True)
check = checks.check
run = make_run(env)

FRACTION = 0.5
FRACTION6 = 0.3
BEFORE_S, MARK_S, AFTER_S = 2.0, 3.0, 3.0
PORT_RATE = 1000
RNICD_ARGS = ["--port-rate", str(PORT_RATE), "--cc", "rp_dce_tcp_rtt=500"]
# The stream outlasts the phases by a few seconds: on a loaded machine each rnicctl call and the
# marking switch take longer, and the QP must still exist when its counters are read.
PERFTEST = ["ib_write_bw", "-x", "0", "-F", "-s", "65536", "-D", str(int(BEFORE_S + MARK_S + AFTER_S + 5))]
TCP_PORT = 20000 + os.getpid() % 12000


def ctl_json(dev, *args):
    r = run(rnicctl, "--run-dir", f"{state}/run", "-d", dev, "--json", *args, timeout=10)
    return json.loads(r.stdout)


def app(dev, *extra, perftest=PERFTEST, port=TCP_PORT):
    return subprocess.Popen(["ip", "netns", "exec", f"{name}-a", rnic_run, "--run-dir", f"{state}/run",
                             *perftest, "-d", dev, "-p", str(port), *extra],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def listening(pid, port):
    try:
        with open(f"/proc/{pid}/net/tcp") as f:
            return any(line.split()[3] == "0A" and int(line.split()[1].split(":")[1], 16) == port
                       for line in f.readlines()[1:])
    except OSError:
        return False


def the_qp(dev):
    """The device's one RC QP (ib_write_bw's), as rnicctl --json qp shows it."""
    qps = [q for q in ctl_json(dev, "qp") if q.get("type") == "RC"]
    return qps[0] if qps else None


def packets(path):
    r = subprocess.run([rnic_pcap, "--json", path], capture_output=True, text=True, timeout=300)
    doc = json.loads(r.stdout) if r.stdout.startswith("{") else {}
    f = doc.get("files", [{}])[0]
    check(r.returncode == 0 and f.get("icrc_ok") == f.get("rocev2", -1) and f.get("rocev2", 0) > 0,
          f"rnic-pcap {os.path.basename(path)}: exit {r.returncode}, {f.get('rocev2')} RoCEv2 frames, "
          f"ICRC ok {f.get('icrc_ok')}")
    return f.get("packets", [])


def throughput_mbps(writes, start_ns, end_ns):
    """Mb/s of WRITE payload rnic0 put on the wire in [start, end)."""
    sent = sum(p["payload_length"] for p in writes if start_ns <= p["time_ns"] < end_ns)
    return sent * 8 / max(end_ns - start_ns, 1) * 1000


def main():
    run(testbed, "up", "--daemons", "both", "--one-run-dir", "--pcap", "--rnicd", rnicd, "--", *RNICD_ARGS, timeout=60)
    bed = {}
    with open(f"{state}/env") as f:
        for line in f:
            bed.update(kv.split("=", 1) for kv in line.split())
    server = app("rnic1")
    for _ in range(200):
        if listening(server.pid, TCP_PORT) or server.poll() is not None:
            break
        time.sleep(0.05)
    client = app("rnic0", "--rate_limit=0.4", "--rate_limit_type=SW", "127.0.0.1")
    # The phases count from the first WRITEs, not from the client's start: perftest's set-up
    # takes from a fraction of a second to seconds on a loaded machine.
    first_psn, end = None, time.monotonic() + 20
    while time.monotonic() < end and client.poll() is None:
        q = the_qp("rnic0")
        if q and q.get("state") == "RTS":
            if first_psn is None:
                first_psn = q.get("sq_psn")
            elif q.get("sq_psn") != first_psn:
                break
        time.sleep(0.05)
    time.sleep(BEFORE_S)
    qp_a, qp_b = the_qp("rnic0"), the_qp("rnic1")
    check(qp_a is not None and qp_b is not None, "ib_write_bw's RC QPs exist on both devices")
    if qp_a is None or qp_b is None:
        raise RuntimeError(f"no RC QP: {client.poll()} {server.poll()}")
    check(not qp_a.get("cc", {}).get("limited", False), f"before marking, rnic0's QP {qp_a['qpn']} is not rate-limited")

    run(testbed, "mark", str(FRACTION), "a")
    marked_at = time.monotonic()
    samples, taken = [], 0  # (rate_mbps, alpha) of rnic0's QP while marking is on, and how many looks
    while time.monotonic() - marked_at < MARK_S:
        time.sleep(0.25)
        q = the_qp("rnic0") or {}
        taken += 1
        cc = q.get("cc", {})
        if cc.get("limited"):
            samples.append((cc.get("rate_mbps"), cc.get("alpha")))
    run(testbed, "mark", "off", "a")
    rates = [r for r, _ in samples]
    check(taken >= 2 and len(samples) >= taken / 2 and rates and max(rates) < PORT_RATE and min(r for r, _ in samples) > 0
          and any(a > 0 for _, a in samples),
          f"while marking, rnicctl qp shows rnic0's QP limited in {len(samples)} of {taken} samples, "
          f"rate-mbps {min(rates, default=0)}..{max(rates, default=0)} < {PORT_RATE}, "
          f"alpha {sorted({a for _, a in samples})[:3]}..")

    time.sleep(1.5)
    after_a, after_b = the_qp("rnic0") or {}, the_qp("rnic1") or {}
    check(not after_a.get("cc", {}).get("limited", True),
          "1.5 s after marking stopped, rnic0's QP is no longer rate-limited (back at the port rate)")
    per_qp_b = ctl_json("rnic1", "stat", "qp", str(qp_b["qpn"]))
    per_qp_a = ctl_json("rnic0", "stat", "qp", str(qp_a["qpn"]))

    client_out, _ = client.communicate(timeout=AFTER_S + 30)
    server_out, _ = server.communicate(timeout=30)
    check(client.returncode == 0 and server.returncode == 0 and "65536" in client_out,
          f"ib_write_bw exits 0 on both sides: {client_out.strip().splitlines()[-2:] if client_out else ''}")

    # IPv6 (GID 2, fd77::): the XDP program marks the traffic class; 300 WRITEs with 30 % marked.
    run(testbed, "mark", str(FRACTION6), "a")
    v6 = ["ib_write_bw", "-x", "2", "-F", "-s", "65536", "-n", "300"]
    server6 = app("rnic1", perftest=v6, port=TCP_PORT + 1)
    for _ in range(200):
        if listening(server6.pid, TCP_PORT + 1) or server6.poll() is not None:
            break
        time.sleep(0.05)
    client6 = app("rnic0", "127.0.0.1", perftest=v6, port=TCP_PORT + 1)
    out6, _ = client6.communicate(timeout=60)
    server6.communicate(timeout=30)
    run(testbed, "mark", "off", "a")
    check(client6.returncode == 0 and server6.returncode == 0, f"ib_write_bw over IPv6 exits 0 on both sides "
          f"({out6.strip().splitlines()[-2:] if out6 else ''})")
    run(testbed, "down", timeout=60)
    check(daemon_exit_status(state, "a") == "0" and daemon_exit_status(state, "b") == "0", "both rnicd exit 0")
    ca, cb = exit_counters(state, "a"), exit_counters(state, "b")

    ip_a, ip_b = bed["ip_a"], bed["ip_b"]
    pa, pb = packets(f"{state}/a.pcap"), packets(f"{state}/b.pcap")
    writes_a = [p for p in pa if p["src"].endswith(ip_a) and "WRITE" in p["opcode_name"]]
    writes_b = [p for p in pb if p["src"].endswith(ip_a) and "WRITE" in p["opcode_name"]]
    check(writes_a and all(p["ecn"] == 2 for p in writes_a) and not any(p["ecn"] == 3 for p in writes_a),
          f"rnic0 sent {len(writes_a)} WRITE frames, every one ECT(0), none CE in its own capture")
    ce_b = [p for p in pb if p["dst"].endswith(ip_b) and p["ecn"] == 3]
    check(ce_b and all("WRITE" in p["opcode_name"] for p in ce_b), f"{len(ce_b)} CE-marked frames reached rnic1, "
          "every one a WRITE (ACKs go the other way, CNPs are not ECT)")
    if not ce_b:
        return
    first_ce, last_ce = ce_b[0]["time_ns"], ce_b[-1]["time_ns"]
    window = [p for p in writes_b if first_ce <= p["time_ns"] <= last_ce]
    share = len(ce_b) / max(len(window), 1)
    check(abs(share - FRACTION) < 0.1, f"while marking, {len(ce_b)} of {len(window)} WRITEs arrived CE "
          f"({share:.2f}, the link marks {FRACTION})")
    check(len(writes_b) == len(writes_a), f"rnic1 received every WRITE rnic0 sent ({len(writes_b)} of {len(writes_a)})")

    def cnp_ok(p):
        return (p["opcode_name"] == "CNP" and p["opcode"] == 0x81 and p["becn"] and p["psn"] == 0
                and p["dscp"] == 48 and p["ecn"] == 0 and p["dest_qp"] == qp_a["qpn"] and p["icrc_ok"])
    cnps_b = [p for p in pb if p["opcode_name"] == "CNP" and p["src"].endswith(ip_b)]
    cnps_a = [p for p in pa if p["opcode_name"] == "CNP" and p["dst"].endswith(ip_a)]
    check(cnps_b and all(cnp_ok(p) for p in cnps_b + cnps_a),
          f"rnic1 sent {len(cnps_b)} CNPs: opcode 0x81, BECN, PSN 0, DSCP 48, not ECT, ICRC ok, to QP {qp_a['qpn']}")
    check(all(first_ce <= p["time_ns"] <= last_ce + 10_000_000 for p in cnps_b),
          "every CNP left while CE frames were arriving (within 10 ms of the last)")

    # The IPv6 run: every WRITE it sent arrived while marking was on.
    ip6_a, ip6_b = bed["ip6_a"], bed["ip6_b"]
    writes_b6 = [p for p in pb if p["src"] == ip6_a and "WRITE" in p["opcode_name"]]
    ce_b6 = [p for p in pb if p["dst"] == ip6_b and p["ecn"] == 3]
    cnps_b6 = [p for p in pb if p["opcode_name"] == "CNP" and p["src"] == ip6_b]
    cnps_a6 = [p for p in pa if p["opcode_name"] == "CNP" and p["dst"] == ip6_a]
    share6 = len(ce_b6) / max(len(writes_b6), 1)
    check(writes_b6 and all(p["ip_version"] == 6 for p in writes_b6 + ce_b6) and abs(share6 - FRACTION6) < 0.1
          and all("WRITE" in p["opcode_name"] for p in ce_b6),
          f"IPv6: {len(ce_b6)} of {len(writes_b6)} WRITEs arrived CE ({share6:.2f}, the link marks {FRACTION6})")
    check(cnps_b6 and all(p["ip_version"] == 6 and p["opcode"] == 0x81 and p["becn"] and p["dscp"] == 48
                          and p["ecn"] == 0 and p["icrc_ok"] for p in cnps_b6 + cnps_a6),
          f"IPv6: rnic1 sent {len(cnps_b6)} CNPs (traffic class DSCP 48, not ECT, ICRC ok), rnic0 got {len(cnps_a6)}")

    ce_all, sent_all, got_all = len(ce_b) + len(ce_b6), len(cnps_b) + len(cnps_b6), len(cnps_a) + len(cnps_a6)
    check(cb.get("engine_np_ecn_marked_roce_packets") == ce_all,
          f"rnic1's np_ecn_marked_roce_packets {cb.get('engine_np_ecn_marked_roce_packets')} = "
          f"{ce_all} CE frames in its capture ({len(ce_b)} IPv4, {len(ce_b6)} IPv6)")
    check(cb.get("engine_np_cnp_sent") == sent_all,
          f"rnic1's np_cnp_sent {cb.get('engine_np_cnp_sent')} = {sent_all} CNPs in its capture")
    check(ca.get("engine_rp_cnp_handled") == got_all and ca.get("engine_rp_cnp_ignored", 0) == 0,
          f"rnic0's rp_cnp_handled {ca.get('engine_rp_cnp_handled')} = {got_all} CNPs in its capture, "
          f"rp_cnp_ignored {ca.get('engine_rp_cnp_ignored', 0)}")
    check(got_all == sent_all, f"every CNP rnic1 sent reached rnic0 ({got_all} of {sent_all})")
    check(per_qp_b.get("cnps_sent") == len(cnps_b) and per_qp_a.get("cnps_received") == len(cnps_a),  # IPv4 QP
          f"per QP: rnic1's cnps_sent {per_qp_b.get('cnps_sent')}, rnic0's cnps_received "
          f"{per_qp_a.get('cnps_received')}")
    check(ca.get("engine_np_cnp_sent", 0) == 0 and cb.get("engine_rp_cnp_handled", 0) == 0,
          "no CNP the other way (rnic1's ACKs were never marked)")

    # Throughput from rnic0's own capture, edges trimmed (the limiter's start, the first cut).
    trim = 300_000_000
    t0, t_end = writes_a[0]["time_ns"], writes_a[-1]["time_ns"]
    before = throughput_mbps(writes_a, t0 + trim, first_ce)
    during = throughput_mbps(writes_a, first_ce + trim, last_ce)
    after = throughput_mbps(writes_a, last_ce + trim, t_end)
    print(f"WRITE throughput from rnic0's capture: before {before:.0f} Mb/s, marking {during:.0f} Mb/s, "
          f"after {after:.0f} Mb/s; CE {len(ce_b)}, CNPs {len(cnps_b)}; rnicctl rate-mbps "
          f"{min(rates, default=0)}..{max(rates, default=0)}", flush=True)
    check(before > 100 and during <= 0.6 * before, f"the rate falls while marking is on: {during:.0f} Mb/s "
          f"<= 60 % of {before:.0f} Mb/s before")
    check(after >= 0.8 * before, f"and recovers after: {after:.0f} Mb/s >= 80 % of {before:.0f} Mb/s")


try:
    main()
except Exception as e:  # a broken step names itself
    check(False, f"{type(e).__name__}: {e}")
finally:
    subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)
    if not checks.failures:  # a few hundred MB each; kept when something failed
        for side in ("a", "b"):
            if os.path.exists(f"{state}/{side}.pcap"):
                os.remove(f"{state}/{side}.pcap")
sys.exit(checks.finish())
