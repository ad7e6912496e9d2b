#!/usr/bin/env python3
"""The benchmark scripts in their short form (BENCH_SHORT=1), as CI runs them: every figure line
is printed and parses; no figure is judged (a shared CI machine's timings say nothing). Each mode
runs on a test bed of its own name and subnet and leaves no namespace behind.

  check_bench_scripts.py port-rate|host|scale TOOLS_DIR BUILD_DIR

port-rate: tools/port-rate.sh for 1 s (port_rate tx in namespace A, rx in B, af_packet): both
sides' lines and the summary parse, frames arrived, no more than were sent; the same over af_xdp,
which refuses a 4 KiB payload with a clear message; port_rate refuses bad usage. host: tools/bench-host.sh (raw path, two rnicd, message rate, ping-pong, traced round, summary).
scale: tools/bench-scale.sh (qp_scale control path, perftest -q 1 and 16 with and without the
cache model, summary)."""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "system"))
from systest import Checks  # noqa: E402

mode, tools, build = sys.argv[1:4]
NUM = r"([0-9]+(?:\.[0-9]+)?)"
name, net, script, limit = {
    "port-rate": (f"prt{os.getpid() % 10000}", "10.65.0", "port-rate.sh", 60),
    "host": (f"bhst{os.getpid() % 10000}", "10.63.0", "bench-host.sh", 150),
    "scale": (f"bscl{os.getpid() % 10000}", "10.64.0", "bench-scale.sh", 150),
}[mode]
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET=net, BENCH_SHORT="1")
checks = Checks(verdict_first=True)
check = checks.check


def run_script(args):
    """The script in a process group of its own: on a timeout the whole group gets SIGTERM (the
    script's trap takes its test bed down), then SIGKILL."""
    t0 = time.monotonic()
    p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            out, _ = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
        out += f"\n(killed after {limit} s)\n"
    print(out, end="")
    print(f"({args[0]} took {time.monotonic() - t0:.1f} s, exit {p.returncode})")
    return p.returncode, out


def line_matching(out, pattern, what):
    m = re.search(pattern, out, re.M)
    check(m is not None, f"{what} is printed and parses")
    return m


try:
    if mode == "port-rate":
        port_rate = os.path.join(build, "tools", "port_rate")
        for bad in (["tx"], ["rx", "--iface", "x", "--size", "5000"], ["both", "--iface", "x"],
                    ["tx", "--iface", "x", "--pmd", "tap"]):
            r = subprocess.run([port_rate, *bad], capture_output=True, text=True, timeout=10)
            check(r.returncode == 2 and "usage:" in r.stderr, f"port_rate {' '.join(bad)}: exit 2 and the usage")
        rc, out = run_script([os.path.join(tools, script), "--seconds", "1", build])
        check(rc == 0, f"port-rate.sh exits 0 (got {rc})")
        line_matching(out, rf"^port_rate tx: pmd=af_packet iface=\S+ payload=64 frame={NUM} burst=32 seconds={NUM} "
                           rf"frames={NUM} pps={NUM} gbps={NUM} dropped={NUM}$", "the sender's line")
        line_matching(out, rf"^port_rate rx: pmd=af_packet iface=\S+ frame={NUM} burst=32 seconds={NUM} "
                           rf"frames={NUM} pps={NUM} gbps={NUM} other={NUM} bad=0 missed={NUM}$", "the receiver's line")
        m = line_matching(out, rf"^port-rate: pmd=af_packet payload=64 tx_pps={NUM} rx_pps={NUM} rx_gbps={NUM} "
                               rf"sent={NUM} received={NUM} lost=(-?[0-9]+) load={NUM}$", "the summary")
        if m:
            sent, received, lost = int(m[4]), int(m[5]), int(m[6])
            check(received > 0, f"frames arrived ({received})")
            check(0 <= lost <= sent and lost == sent - received, f"no more arrived than were sent ({received} of {sent})")
        # af_xdp on the veth rnicd gets with it (3,500 bytes): frames arrive; a 4 KiB payload does
        # not fit its page-sized mbufs and the sender says so.
        rc, out = run_script([os.path.join(tools, script), "--seconds", "1", "--pmd", "af_xdp", build])
        m = line_matching(out, rf"^port-rate: pmd=af_xdp payload=64 tx_pps={NUM} rx_pps={NUM} rx_gbps={NUM} "
                               rf"sent={NUM} received={NUM} lost=(-?[0-9]+) load={NUM}$", "the af_xdp summary")
        check(rc == 0 and m is not None and int(m[5]) > 0, f"af_xdp: frames arrived (exit {rc})")
        rc, out = run_script([os.path.join(tools, script), "--seconds", "1", "--pmd", "af_xdp", "--size", "4096", build])
        check(rc == 1 and "this port carries at most 3500 B" in out, f"af_xdp refuses a 4 KiB payload clearly (exit {rc})")
    elif mode == "host":
        rc, out = run_script([os.path.join(tools, script), build])
        check(rc == 0, f"bench-host.sh exits 0 (got {rc})")
        line_matching(out, rf"^round 1 raw path: +kernel UDP goodput {NUM} Gb/s .*one-way {NUM} us median .*load {NUM}$",
                      "round 1's raw path (kernel UDP goodput, sockperf)")
        line_matching(out, rf"^round 1 rnic path: +ib_write_bw 64 KiB {NUM} Gb/s, ib_send_bw 64 KiB {NUM} Gb/s, "
                           rf"ib_write_lat 2 B one-way {NUM} us median \(p99 {NUM}\); client library: WRITE 64 KiB {NUM} "
                           rf"Gb/s, 2 B one-way {NUM} us; idle CPU of the two daemons {NUM}% and {NUM}%; load {NUM}$",
                      "round 1's rnic path (perftest, client library, idle CPU)")
        line_matching(out, rf"^round 1 message rate: port_rate 64 B raw {NUM} pps received \({NUM} pps sent, (-?[0-9]+) "
                           rf"lost\); ib_write_bw 64 B 1 QP {NUM} M msg/s \({NUM}x raw\), 16 QPs {NUM} M msg/s "
                           rf"\({NUM}x raw\); load {NUM}$", "round 1's message rate (port_rate, ib_write_bw 1 and 16 QPs)")
        line_matching(out, rf"^round 1 ping-pong: sockperf one-way {NUM} us median with a busy-polling client "
                           rf"\(--nonblocked\); TCP 4 KiB round trip {NUM} us \(sockperf --tcp -m 4096\); "
                           rf"ibv_rc_pingpong 4 KiB {NUM} us per iteration \({NUM}x TCP\); load {NUM}$",
                      "round 1's ping-pong (busy-polling sockperf, TCP 4 KiB, ibv_rc_pingpong 4 KiB)")
        line_matching(out, rf"^traced round: ib_write_lat 2 B one-way {NUM} us median \(p99 {NUM}\), load {NUM}$",
                      "the traced round")
        hops = re.findall(rf"^ +doorbell_to_seen +{NUM} ", out, re.M)
        check(len(hops) == 2, f"both daemons' per-hop tables ({len(hops)})")
        for label in ("kernel UDP goodput \\(Gb/s\\)", "sockperf one-way \\(us\\)", "ib_write_bw \\(Gb/s\\)",
                      "ib_send_bw \\(Gb/s\\)", "ib_write_lat one-way \\(us\\)",
                      "port_rate 64 B raw received \\(M pps\\)", "ib_write_bw 64 B 1 QP \\(M msg/s\\)",
                      "ib_write_bw 64 B 16 QPs \\(M msg/s\\)", "sockperf one-way, busy-polling client \\(us\\)",
                      "TCP 4 KiB round trip \\(us\\)", "ibv_rc_pingpong 4 KiB per iteration \\(us\\)"):
            line_matching(out, rf"^median {label}: {NUM} over 1 rounds$", f"the median of {label}")
        for label in ("ib_write_bw / kernel UDP goodput", "ib_write_lat / sockperf one-way",
                      "ib_write_bw 64 B 1 QP / port_rate raw", "ib_write_bw 64 B 16 QPs / port_rate raw",
                      "ibv_rc_pingpong 4 KiB / TCP 4 KiB round trip"):
            line_matching(out, rf"^  {label}: {NUM}x; median {NUM}x$", f"the ratio {label}")
    else:
        rc, out = run_script([os.path.join(tools, script), build])
        check(rc == 0, f"bench-scale.sh exits 0 (got {rc})")
        line_matching(out, rf"^round 1 control path: n=16 create_s={NUM} create_per_s={NUM} rts_s={NUM} "
                           rf"rts_per_s={NUM} .*destroy_per_s={NUM} writes_ok=4/4 idle_cpu_pct={NUM}/{NUM}$",
                      "round 1's control path (qp_scale 16, idle CPU)")
        for cache in ("off", "miss"):
            line_matching(out, rf"^round 1 perftest cache {cache}, tx depth 128: q=1 {NUM} Mpps \(connect {NUM} s .*\); "
                               rf"q=16 {NUM} Mpps \(connect {NUM} s .*\); load {NUM}$",
                          f"round 1's perftest with the cache model {cache}")
        line_matching(out, rf"^  16 +{NUM} +{NUM} +", "the control path's medians")
        rates = re.findall(rf"^    q=(1|16) +{NUM} Mpps +{NUM}x  connect {NUM} s", out, re.M)
        check(len(rates) == 4, f"the data path's medians, q=1 and 16 in both cache modes ({len(rates)} lines)")
finally:
    subprocess.run([os.path.join(tools, "testbed.sh"), "down"], env=env, capture_output=True, timeout=60)
left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
check(f"{name}-a" not in left and f"{name}-b" not in left, f"no namespace {name}-* left behind")
sys.exit(checks.finish())
