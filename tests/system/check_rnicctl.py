#!/usr/bin/env python3
"""rnicctl against two real rnicd on the test bed (rnic0 in A, rnic1 in B, one run directory,
both capturing), with traffic moved between them by a raw client (raw_host_client.py):
  dev, gid         state, MTU, MAC, IPv4, PID and the GID table, from the bed's own values;
  qp               RTS, RC, and PSNs that moved by exactly the packets each side sent;
  stat, stat qp    RoCE counters non-zero, the text and --json forms agree, per-QP TX = peer RX;
  cache, session   the three caches' counters; the device's object counts, and a SIGKILLed
                   client's objects all reclaimed;
  cc, cc set       DCQCN's knobs; set at run time (three at once), bad names, values and
                   combinations refused whole (exit 2), nobody refused (EPERM), restored;
  log-level        set to debug and read back, the daemon's log then holds debug lines;
  errors           an unknown device (exit 1, the socket named), a bad level (exit 2, the levels
                   listed), a QP that does not exist (exit 1).
Then SIGINT to rnic0 while a client holds a QP with receives posted: DEVICE_FATAL first in its
async ring, a flush completion per receive, the connection closed, exit 0, the socket removed,
and the capture flushed (rnic-pcap reads it, every ICRC ok, as many frames as `captured`).
Usage: check_rnicctl.py TESTBED RNICD RNICCTL RNIC_PCAP"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from raw_host_client import Sess  # noqa: E402
from systest import Checks, daemon_exit_status, exit_counters, make_run  # noqa: E402

testbed, rnicd, rnicctl, rnic_pcap = sys.argv[1:5]
name = f"rnicc{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.93.0")
checks = Checks(verdict_first=True)
check, failures = checks.check, checks.failures
run = make_run(env)

IBV_WR_RDMA_WRITE, IBV_WR_SEND = 0, 2
IBV_WC_WR_FLUSH_ERR = 5
IBV_EVENT_DEVICE_FATAL = 8


def ctl(*args, check_rc=True):
    r = run(rnicctl, "--run-dir", f"{state}/run", *args, timeout=15, check=False)
    if check_rc and r.returncode != 0:
        raise RuntimeError(f"rnicctl {' '.join(args)} -> {r.returncode}: {r.stderr}")
    return r


def ctl_json(*args):
    return json.loads(ctl("--json", *args).stdout)


def bed_env():
    with open(f"{state}/env") as f:
        return dict(kv.split("=", 1) for line in f for kv in line.split())


def link_local(mac):
    b = bytes.fromhex(mac.replace(":", ""))
    return socket.inet_ntop(socket.AF_INET6, b"\xfe\x80" + b"\0" * 6 + bytes([b[0] ^ 2]) + b[1:3] + b"\xff\xfe" + b[3:])


def qp_line(out, qpn):
    return next((l for l in out.splitlines() if f" lqpn {qpn} " in l), "")


# A client that only holds objects, to be SIGKILLed: what it owned must all go.
HOLDER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from raw_host_client import Sess
s = Sess(sys.argv[2])
s.to_init()
print("ready", s.qpn, flush=True)
time.sleep(60)
"""


def functional():
    run(testbed, "up", "--daemons", "both", "--one-run-dir", "--pcap", "--rnicd", rnicd, timeout=60)
    e = bed_env()
    pid = {side: int(open(f"{state}/rnicd-{side}.pid").read()) for side in "ab"}

    # ---- dev, gid ----
    out = ctl("dev").stdout
    for dev, side, ip, mac in (("rnic0", "a", e["ip_a"], e["mac_a"]), ("rnic1", "b", e["ip_b"], e["mac_b"])):
        want = (f"{dev}: port 1 state ACTIVE active_mtu 4096 max_mtu 4096 mac {mac} ipv4 {ip}/24 "
                f"pid {pid[side]}")
        check(want in out.splitlines(), f"dev: {want}")
    devs = ctl_json("dev")
    check([d["name"] for d in devs] == ["rnic0", "rnic1"] and devs[0]["ethernet_mtu"] == 9000
          and devs[0]["socket"] == e["sock_a"], "dev --json: both devices, the veth's MTU, rnic0's socket")
    ll_a = link_local(e["mac_a"])
    want = [f"link rnic0/1 gid 0 ::ffff:{e['ip_a']} RoCE v2", f"link rnic0/1 gid 1 {ll_a} RoCE v2",
            f"link rnic0/1 gid 2 {e['ip6_a']} RoCE v2"]
    out = ctl("-d", "rnic0", "gid").stdout
    check(out.splitlines() == want, f"gid: IPv4-mapped, link-local, fd77:: ({out.strip()!r})")

    # ---- a QP in each daemon, PSNs A 0x100 -> B, B 0x200 -> A ----
    a = Sess(e["sock_a"])
    b = Sess(e["sock_b"])
    a.connect(b.qpn, b.gid, sq_psn=0x100, rq_psn=0x200)
    b.connect(a.qpn, a.gid, sq_psn=0x200, rq_psn=0x100)
    me = os.getpid()
    out = ctl("-d", "rnic0", "qp").stdout
    want = f"link rnic0/1 lqpn {a.qpn} type RC state RTS sq-psn 256 sq-una-psn 256 rq-psn 512 rqpn {b.qpn} path-mtu 4096 pid {me}"
    check(qp_line(out, a.qpn) == want, f"qp before traffic: {want} ({qp_line(out, a.qpn)!r})")

    # ---- traffic: A: one SEND and 8 one-packet WRITEs; B: one SEND back ----
    b.post_recv(0xB1, 4096, 4096)
    a.buf[0:3000] = os.urandom(3000)
    writes = 8
    wqes = [(0xA0, IBV_WR_SEND, 0, 3000)] + [(0xA1 + i, IBV_WR_RDMA_WRITE, 0, 4096, b.addr, b.rkey)
                                            for i in range(writes)]
    got_a = a.run_sends(wqes)
    check(sorted(c[0] for c in got_a) == [w[0] for w in wqes] and all(c[1] == 0 for c in got_a),
          f"A: {len(wqes)} successful send completions ({len(got_a)})")
    got_b = b.wait_cqes(1)
    check(len(got_b) == 1 and got_b[0][1] == 0 and got_b[0][4] == 3000, f"B received A's SEND ({got_b})")
    a.post_recv(0xA9, 4096, 4096)
    b.buf[0:100] = b"x" * 100
    b.post_send(0xB2, IBV_WR_SEND, 0, 100)
    got_b = b.wait_cqes(1)
    got_a = a.wait_cqes(1)
    check(got_a and got_a[0][0] == 0xA9 and got_b and got_b[0][0] == 0xB2, "A received B's SEND")
    time.sleep(0.1)  # the last ACK lands

    a_sq, a_rq = 0x100 + 1 + writes, 0x201
    out = ctl("-d", "rnic0", "qp").stdout
    want = f"link rnic0/1 lqpn {a.qpn} type RC state RTS sq-psn {a_sq} sq-una-psn {a_sq} rq-psn {a_rq} rqpn {b.qpn} path-mtu 4096 pid {me}"
    check(qp_line(out, a.qpn) == want, f"qp after traffic, A moved by its {1 + writes} packets: {qp_line(out, a.qpn)!r}")
    qb = next((q for q in ctl_json("-d", "rnic1", "qp") if q["qpn"] == b.qpn), {})
    check(qb.get("sq_psn") == a_rq and qb.get("rq_psn") == a_sq and qb.get("state") == "RTS" and qb.get("type") == "RC",
          f"qp --json on rnic1: B's sq_psn {a_rq}, rq_psn {a_sq} ({qb})")

    # ---- stat, text and JSON ----
    def stat_text():
        lines = ctl("-d", "rnic0", "stat").stdout.splitlines()
        check(lines[0] == "link rnic0/1", f"stat's first line names the link ({lines[0]!r})")
        return {k: int(v) for k, v in (l.split() for l in lines[1:])}

    # Some counters move by themselves (loop turns, rnicctl's own sessions): the JSON, read
    # between two texts, must lie between them; with no traffic, the RoCE ones must not move.
    text1 = stat_text()
    stat = ctl_json("-d", "rnic0", "stat")
    text2 = stat_text()
    check(set(text1) == set(stat) == set(text2), f"stat and stat --json list the same counters ({len(text1)}, {len(stat)})")
    diff = {k: (text1[k], stat[k], text2[k]) for k in stat if k in text1 and k in text2
            and not min(text1[k], text2[k]) <= stat[k] <= max(text1[k], text2[k])}
    check(not diff, f"stat --json agrees with the text around it ({diff})")
    still = {k: (text1[k], stat[k], text2[k]) for k in ("roce_tx", "roce_rx", "captured", "tx_packets", "rx_packets")
             if not text1.get(k) == stat.get(k) == text2.get(k)}
    check(not still, f"the RoCE counters read the same in text and JSON ({still})")
    # A sent its 9 requests and the ACK of B's SEND; it received B's SEND and B's (coalesced) ACKs.
    check(stat["roce_tx"] == 1 + writes + 1 + stat["retransmitted_packets"] and 2 <= stat["roce_rx"] <= 1 + writes + 1,
          f"roce_tx {stat['roce_tx']} (requests and an ACK), roce_rx {stat['roce_rx']} (a SEND and ACKs)")
    check(stat["captured"] == stat["roce_tx"] + stat["roce_rx"],
          f"every RoCEv2 frame captured ({stat['captured']} = {stat['roce_tx']} + {stat['roce_rx']})")

    out = ctl("-d", "rnic0", "stat", "qp", str(a.qpn)).stdout.splitlines()
    qa = {k: int(v) for k, v in (l.split() for l in out[1:])}
    qb = ctl_json("-d", "rnic1", "stat", "qp", hex(b.qpn))
    check(out[0] == f"link rnic0/1 lqpn {a.qpn}" and qa.get("tx_packets", 0) >= 1 + writes,
          f"stat qp {a.qpn}: {qa.get('tx_packets')} packets sent")
    # tx_packets counts requests and responses, rx_packets requests only, ACKs apart.
    sent_ab = (qa.get("tx_packets"), qb.get("rx_packets", 0) + qb.get("acks_received", 0))
    sent_ba = (qb.get("tx_packets"), qa.get("rx_packets", 0) + qa.get("acks_received", 0))
    check(sent_ab[0] == sent_ab[1] and sent_ba[0] == sent_ba[1] and qa.get("tx_packets") == stat["roce_tx"],
          f"what one QP sent the other received, both ways ({sent_ab}, {sent_ba})")

    # ---- cache ----
    # rnicd models the RNIC's QPC, MPT and MTT caches by default (counted, not charged): the QP's
    # context was looked up for every packet, its first lookup missed, the keys and pages of the
    # WRITEs went through the MPT and MTT caches.
    for dev in ("rnic0", "rnic1"):
        out = ctl("-d", dev, "cache").stdout
        caches = {k: int(v) for k, v in (l.split() for l in out.splitlines())}
        names = {f"{c}_cache_{w}" for c in ("qpc", "mpt", "mtt") for w in ("hits", "misses", "evictions")}
        check(set(caches) == names and caches == ctl_json("-d", dev, "cache"),
              f"{dev} cache: hits, misses and evictions of the QPC, MPT and MTT caches, as in --json ({caches})")
        check(caches.get("qpc_cache_hits", 0) > 0 and caches.get("qpc_cache_misses", 0) >= 1,
              f"{dev} cache: QPC lookups counted (hits {caches.get('qpc_cache_hits')}, "
              f"misses {caches.get('qpc_cache_misses')})")
        check(caches.get("mpt_cache_hits", 0) + caches.get("mpt_cache_misses", 0) > 0 and
              caches.get("mtt_cache_hits", 0) + caches.get("mtt_cache_misses", 0) > 0,
              f"{dev} cache: key and page translations counted")

    # ---- cc: DCQCN's knobs by their mlx5 names, NVIDIA's defaults; its counters in stat ----
    cc = ctl_json("-d", "rnic0", "cc")
    check(cc.get("rp_ai_rate") == 5 and cc.get("rp_time_reset") == 300 and cc.get("np_min_time_between_cnps") == 4
          and cc.get("ecn_ect") == 2 and cc.get("port_rate_mbps") == 10000,
          f"rnicctl cc: the DCQCN defaults ({cc})")
    text = dict(l.split() for l in ctl("-d", "rnic0", "cc").stdout.splitlines()[1:])
    check({k: int(v) for k, v in text.items()} == cc, "rnicctl cc: text and --json agree")
    counters = ctl_json("-d", "rnic0", "stat")
    check(all(k in counters for k in ("np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled",
                                      "rp_cnp_ignored")) and counters["np_cnp_sent"] == 0,
          "rnicctl stat: the congestion counters, no CNP without marking")
    check(all(k in counters for k in ("rx_pause_ctrl_phy", "rx_mac_control_phy", "rx_prio0_pause",
                                      "rx_prio7_pause_duration", "rx_global_pause")) and counters["rx_pause_ctrl_phy"] == 0,
          "rnicctl stat: the PAUSE/PFC counters by mlx5's names, none received")

    # ---- cc set: knobs at run time, all or nothing; only the daemon's owner or root ----
    r = ctl("-d", "rnic0", "cc", "set", "rp_ai_rate=40", "rp_enable/3=0", "rp_min_rate=20", check_rc=False)
    cc = ctl_json("-d", "rnic0", "cc")
    check(r.returncode == 0 and cc.get("rp_ai_rate") == 40 and cc.get("rp_enable_prio_mask") == 0xf7
          and cc.get("rp_min_rate") == 20, f"cc set: three knobs changed and shown by cc ({r.stderr.strip()})")
    for bad, word in ((["rp_bogus=1"], "rp_bogus"), (["rp_ai_rate=7", "rp_gd=3"], "rp_gd"),
                      (["rp_max_rate=10"], "rp_min_rate"), (["rp_ai_rate"], "NAME=VALUE"),
                      (["np_enable/8=0"], "np_enable/8")):
        r = ctl("-d", "rnic0", "cc", "set", *bad, check_rc=False)
        check(r.returncode == 2 and word in r.stderr and ctl_json("-d", "rnic0", "cc") == cc,
              f"cc set {' '.join(bad)}: exit 2, the error names {word}, nothing changed ({r.stderr.strip()!r})")
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    r = run(*nobody, rnicctl, "--run-dir", f"{state}/run", "-d", "rnic0", "cc", "set", "rp_ai_rate=9",
            timeout=15, check=False)
    check(r.returncode == 1 and "owner or root" in r.stderr and ctl_json("-d", "rnic0", "cc") == cc,
          f"cc set as nobody: refused (EPERM), nothing changed ({r.returncode}, {r.stderr.strip()!r})")
    r = ctl("-d", "rnic0", "cc", "set", "rp_ai_rate=5", "rp_enable/3=1", "rp_min_rate=1", check_rc=False)
    check(r.returncode == 0 and ctl_json("-d", "rnic0", "cc") == ctl_json("-d", "rnic1", "cc"),
          "cc set: back to the defaults, as the other daemon's")

    # ---- latency: the per-hop histograms, off unless rnicd --latency-trace ----
    lat = ctl_json("-d", "rnic0", "latency")
    hops = set(lat.get("hops", {}))
    check(lat.get("trace") is False and {"doorbell_to_seen", "seen_to_wire", "rx_wake", "rx_to_completion",
                                         "kick_wake_same_cpu", "kick_wake_other_cpu", "nap_overshoot",
                                         "busy_turn"} <= hops,
          f"rnicctl latency --json: tracing off by default, every hop named ({sorted(hops)})")
    out = ctl("-d", "rnic0", "latency").stdout.splitlines()
    check(out[0].startswith("trace off") and out[1].split()[:2] == ["hop", "count"] and len(out) == 2,
          f"rnicctl latency: no samples while off ({out})")

    # ---- session, and a killed client's objects reclaimed ----
    out = ctl("-d", "rnic0", "session").stdout.splitlines()
    # rnicctl's own session is one of the two.
    check(out[0] == "dev rnic0 sessions 2 pds 1 mrs 1 cqs 1 qps 1 srqs 0 ahs 0 channels 0 segments 1",
          f"session: the device's counts first ({out[0]!r})")
    mine = next((l for l in out[1:] if f" pid {me} " in l), "")
    check(mine.endswith(" pds 1 mrs 1 cqs 1 qps 1 srqs 0 ahs 0 channels 0 segments 1"), f"session: ours ({mine!r})")
    base = ctl_json("-d", "rnic0", "session")["objects"]
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, os.path.dirname(os.path.abspath(__file__)), e["sock_a"]],
                              stdout=subprocess.PIPE, text=True)
    try:
        ready = holder.stdout.readline()
        held = ctl_json("-d", "rnic0", "session")
        theirs = next((s for s in held["sessions"] if s["pid"] == holder.pid), {})
        check(ready.startswith("ready") and theirs.get("qps") == 1 and held["objects"]["qps"] == base["qps"] + 1
              and held["objects"]["segments"] == base["segments"] + 1,
              f"a second client's objects show ({held['objects']})")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    after = {}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        after = ctl_json("-d", "rnic0", "session")["objects"]
        if after == base:
            break
        time.sleep(0.05)
    check(after == base, f"everything the SIGKILLed client owned is gone ({after} vs {base})")

    # ---- log level ----
    check(ctl("-d", "rnic0", "log-level").stdout.strip() == "info", "log-level reads info")
    log_before = len(open(f"{state}/rnicd-a.log").read().splitlines())
    ctl("-d", "rnic0", "log-level", "debug")
    out = ctl("-d", "rnic0", "log-level").stdout.strip()
    check(out == "debug", f"log-level debug, then log-level reads it back ({out!r})")
    check(ctl_json("-d", "rnic0", "log-level") == {"log_level": "debug"}, "log-level --json")
    new_lines = open(f"{state}/rnicd-a.log").read().splitlines()[log_before:]
    check(any(" debug " in l for l in new_lines), f"the daemon logs debug lines now ({len(new_lines)} new lines)")
    ctl("-d", "rnic0", "log-level", "info")

    # ---- errors ----
    r = ctl("-d", "nosuch", "dev", check_rc=False)
    check(r.returncode == 1 and "cannot reach rnicd for nosuch" in r.stderr and f"{state}/run/nosuch.sock" in r.stderr,
          f"unknown device: exit 1 naming its socket ({r.returncode}, {r.stderr.strip()!r})")
    r = ctl("-d", "rnic0", "log-level", "loud", check_rc=False)
    check(r.returncode == 2 and "unknown level 'loud'" in r.stderr and "debug" in r.stderr,
          f"bad log level: exit 2 listing the levels ({r.returncode}, {r.stderr.strip()!r})")
    check(ctl("-d", "rnic0", "log-level").stdout.strip() == "info", "the bad level changed nothing")
    r = ctl("-d", "rnic0", "stat", "qp", "999999", check_rc=False)
    check(r.returncode == 1 and "no QP 999999" in r.stderr, f"stat qp of no QP: exit 1 ({r.stderr.strip()!r})")

    # ---- SIGINT with A's client holding a QP and two receives ----
    a.post_recv(0xF1, 0, 4096)
    a.post_recv(0xF2, 4096, 4096)
    time.sleep(0.1)
    captured = ctl_json("-d", "rnic0", "stat")["captured"]
    os.kill(pid["a"], signal.SIGINT)
    closed = False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not closed:
        try:
            closed = a.s.recv(100) == b""
        except socket.timeout:
            break
    check(closed, "SIGINT: rnic0 closed the session")
    prod = int.from_bytes(a.async_ring[0:4], "little")
    first = (int.from_bytes(a.async_ring[192:196], "little"), int.from_bytes(a.async_ring[196:200], "little"))
    check(prod >= 1 and first == (IBV_EVENT_DEVICE_FATAL, 1), f"DEVICE_FATAL first in the async ring ({prod}, {first})")
    flushed = a.poll()
    check(sorted((c[0], c[1]) for c in flushed) == [(0xF1, IBV_WC_WR_FLUSH_ERR), (0xF2, IBV_WC_WR_FLUSH_ERR)],
          f"one flush completion per posted receive ({flushed})")
    rc = daemon_exit_status(state, "a")
    check(rc == "0", f"rnicd A exits 0 on SIGINT (got {rc})")
    check(not os.path.exists(e["sock_a"]), "rnic0 removed its socket file")
    final = exit_counters(state, "a")
    log = open(f"{state}/rnicd-a.log").read()
    check(final.get("captured") == captured and f"capture: {captured} frames in 1 file(s)" in log,
          f"the exit log counts the capture ({final.get('captured')}, {captured})")
    r = run(rnic_pcap, "--quiet", "--json", f"{state}/a.pcap", check=False)
    files = json.loads(r.stdout)["files"] if r.stdout.startswith("{") else []
    f = files[0] if files else {}
    check(r.returncode == 0 and f.get("frames") == captured and f.get("icrc_ok") == captured and not f.get("failed"),
          f"rnic-pcap reads A's flushed capture: {f.get('frames')} frames, {f.get('icrc_ok')} ICRC ok, of {captured}")
    b.s.close()


try:
    try:
        functional()
    except Exception as exc:  # a broken step is a failure with its reason, not a bare traceback
        import traceback
        traceback.print_exc(file=sys.stdout)
        failures.append(f"{type(exc).__name__}: {exc}")
    finally:
        run(testbed, "down", timeout=60, check=False)
        subprocess.run(["rm", "-rf", state])
finally:
    status = checks.finish()
sys.exit(status)
