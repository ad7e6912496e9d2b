#!/usr/bin/env python3
"""PAUSE and PFC received by a real rnicd (docs/congestion.md, "PFC and PAUSE"): two rnicd on the
test bed with --port-rate 50 (a pause quantum is 512 bit times = 10.24 us at 50 Mb/s), Debian's
ib_write_bw through rnic-run streaming WRITEs from rnic1 (namespace B) to rnic0 (A), and MAC
control frames written with an AF_PACKET socket onto A's end of the veth, so they arrive on B's
interface as a switch's would. A capture of B's transmissions (dumpcap on A's end) must show:
  PAUSE        802.3x, quanta 48828 (500.0 ms): a gap in B's RoCE frames of 500 ms;
  PFC prio 0   the stream's priority (DSCP 0 -> 0): a gap of 500 ms;
  PFC prio 3   another priority only: no gap;
  resume       PAUSE of 500 ms, then quanta 0 after ~100 ms: a gap of ~100 ms, not 500;
  malformed    a truncated PFC frame and an unknown opcode: counted, dropped, no gap;
and `rnicctl stat` agrees: rx_pause_ctrl_phy, rx_global_pause, rx_prio0_pause/rx_prio3_pause, the
durations (mlx5's microseconds), rx_mac_control_malformed, rx_unsupported_op_phy.

Tolerance of a gap: at least the pause time minus 2 ms (frames the daemon handed to the kernel
before the pause took effect still leave, which can only shorten the gap from the start; 2 ms is
far above a veth's drain time) and at most the pause time plus 60 ms: the pause starts only when B's
poll loop has read the frame and ends when it next polls after the deadline, and on a loaded
2-core machine a process may wait tens of milliseconds for a CPU. The gap looked for is the longest
one starting within 60 ms of the frame's injection. The stream itself stalls now and then on a
loaded machine (a receive-ring overrun costs an ACK timeout: up to ~300 ms seen at a load of 16),
hence pauses of 500 ms, and where nothing paused B no gap may reach 400 ms.
Usage: check_pause.py TESTBED RNICD RNIC_RUN RNICCTL"""
import json
import os
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from systest import Checks, make_run  # noqa: E402

testbed, rnicd, rnic_run, rnicctl = sys.argv[1:5]
name = os.environ.get("RNIC_TESTBED", "pf")
state = os.environ.get("RNIC_TESTBED_DIR", f"/tmp/{name}")
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state,
           RNIC_TESTBED_NET=os.environ.get("RNIC_TESTBED_NET", "10.82.0"))
checks = Checks(verdict_first=True)
check = checks.check
run = make_run(env)

RATE_MBPS = 50
QUANTUM_NS = 512 * 1000 // RATE_MBPS  # 10240 ns
PAUSE_QUANTA = 48828                  # 500.0 ms at 50 Mb/s
PAUSE_S = PAUSE_QUANTA * QUANTUM_NS / 1e9
RESUME_AFTER_S = 0.1
EARLY_S, LATE_S = 0.002, 0.060
# The stream on a veth between two polling daemons on a shared 2-core machine stalls on its own
# now and then (a receive ring overrun costs an ACK timeout): up to ~300 ms was seen under a load
# of 16. No gap this long may appear where nothing paused the sender.
QUIET_MAX_S = 0.4
DEST = bytes.fromhex("0180c2000001")


def bed_env():
    with open(f"{state}/env") as f:
        return dict(kv.split("=", 1) for line in f for kv in line.split())


def ctl_counters(dev):
    r = run(rnicctl, "--run-dir", f"{state}/run", "-d", dev, "--json", "stat", timeout=15)
    return json.loads(r.stdout)


# The injector runs inside namespace A (its interface is A's end of the veth): one frame per line
# of hex on stdin, sent at once; "sleep S" waits. Run as a child so the frames leave from A.
INJECTOR = """
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
for line in sys.stdin:
    line = line.strip()
    if line.startswith("sleep "):
        time.sleep(float(line.split()[1]))
    elif line:
        s.send(bytes.fromhex(line))
        print("sent", time.time(), flush=True)
"""


def mac_control(src, opcode, payload):
    frame = DEST + src + struct.pack("!HH", 0x8808, opcode) + payload
    return frame + bytes(max(0, 60 - len(frame)))


def pause(src, quanta):
    return mac_control(src, 0x0001, struct.pack("!H", quanta))


def pfc(src, enable, quanta):
    return mac_control(src, 0x0101, struct.pack("!H", enable) + b"".join(struct.pack("!H", q) for q in quanta))


def inject(ifname, lines):
    p = subprocess.run(["ip", "netns", "exec", f"{name}-a", sys.executable, "-c", INJECTOR, ifname],
                       input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=30, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"injector: {p.stderr}")
    return [float(l.split()[1]) for l in p.stdout.splitlines() if l.startswith("sent")]


def capture_times(path, mac_b, mac_a):
    """Times of the frames from `mac_b` in a classic pcap file (dumpcap -P), and of the MAC
    control frames the injector wrote from `mac_a`: the capture's clock says when each pause frame
    left, where the injector's own clock, read after its send, may be late by a wait for a CPU."""
    src = bytes.fromhex(mac_b.replace(":", ""))
    injected_src = bytes.fromhex(mac_a.replace(":", ""))
    data = open(path, "rb").read()
    magic = struct.unpack_from("<I", data)[0]
    scale = 1e-9 if magic == 0xa1b23c4d else 1e-6
    off, times, control = 24, [], []
    while off + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack_from("<IIII", data, off)
        frame = data[off + 16:off + 16 + incl]
        if frame[6:12] == src:
            times.append(sec + frac * scale)
        elif frame[6:12] == injected_src and frame[12:14] == b"\x88\x08":
            control.append(sec + frac * scale)
        off += 16 + incl
    return times, control


def gap_after(times, t0, window=0.06):
    """The gap B's transmissions show when a pause frame left at t0 (the capture's time of it): the
    longest gap between consecutive frames that starts in [t0 - 0.03, t0 + window] (the daemon reads
    the frame within its next poll turns)."""
    seg = [t for t in times if t0 - 1.0 <= t <= t0 + 2.0]
    gaps = [b - a for a, b in zip(seg, seg[1:]) if t0 - 0.03 <= a <= t0 + window]
    return max(gaps) if gaps else None


def main():
    run(testbed, "up", "--daemons", "both", "--one-run-dir", "--rnicd", rnicd, "--", "--port-rate",
        str(RATE_MBPS), timeout=60)
    e = bed_env()
    src = bytes.fromhex(e["mac_a"].replace(":", ""))
    pcap = f"{state}/b-tx.pcap"
    # B's frames as they arrive on A's end of the veth: rnicd's af_packet port bypasses the
    # qdisc, so a capture on B's own interface never sees what B sends.
    dump = subprocess.Popen(["ip", "netns", "exec", e["ns_a"], "dumpcap", "-q", "-P", "-i", e["if_a"], "-s", "96",
                             "-B", "64", "-f", "udp port 4791 or ether proto 0x8808", "-w", pcap],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    time.sleep(1.5)  # dumpcap listening
    port = str(20000 + os.getpid() % 12000)
    common = [rnic_run, "--run-dir", e["run_dir"], "ib_write_bw", "-x", "0", "-F", "-p", port, "-s", "65536",
              "-D", "9", "-t", "16", "--report_gbits"]
    server = subprocess.Popen(["ip", "netns", "exec", e["ns_a"], "timeout", "40", *common, "-d", "rnic0"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              stdin=subprocess.DEVNULL, env=env)
    for _ in range(100):
        if f":{port} " in run("ip", "netns", "exec", e["ns_a"], "ss", "-Hltn").stdout:
            break
        time.sleep(0.1)
    client = subprocess.Popen(["ip", "netns", "exec", e["ns_a"], "timeout", "40", *common, "-d", "rnic1",
                               "127.0.0.1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              stdin=subprocess.DEVNULL, env=env)
    time.sleep(2.0)  # the stream is running
    before = ctl_counters("rnic1")
    zeros = [0] * 8
    prio0 = list(zeros)
    prio0[0] = PAUSE_QUANTA
    prio3 = list(zeros)
    prio3[3] = PAUSE_QUANTA
    # The first second lets the injector's own start-up (a Python process on the two cores
    # perftest needs) pass before the first frame: it idled B's stream for ~30 ms right before it.
    frames = ["sleep 1.0", pause(src, PAUSE_QUANTA).hex(), "sleep 1.0",
              pfc(src, 0x01, prio0).hex(), "sleep 1.0",
              pfc(src, 0x08, prio3).hex(), "sleep 1.0",
              pause(src, PAUSE_QUANTA).hex(), f"sleep {RESUME_AFTER_S}", pause(src, 0).hex(), "sleep 1.0",
              pfc(src, 0x01, prio0)[:14 + 4 + 8].hex(),              # truncated: 4 of 8 times
              mac_control(src, 0x0002, bytes(40)).hex()]             # EPON GATE: not ours
    sent = inject(e["if_a"], frames)
    time.sleep(0.5)
    after = ctl_counters("rnic1")
    other = ctl_counters("rnic0")
    out_c, _ = client.communicate(timeout=60)
    out_s, _ = server.communicate(timeout=60)
    time.sleep(0.5)
    dump.terminate()
    dump.wait(timeout=10)
    check(client.returncode == 0 and server.returncode == 0,
          f"ib_write_bw rnic1 -> rnic0 completed through the pauses ({client.returncode}/{server.returncode}: "
          f"{out_c.strip().splitlines()[-1:] if out_c else ''})")
    check(len(sent) == 7, f"7 MAC control frames written on A's interface ({len(sent)})")
    times, control = capture_times(pcap, e["mac_b"], e["mac_a"])
    check(len(times) > 1000, f"B's RoCE transmissions captured ({len(times)} frames)")
    check(len(control) == 7, f"the 7 MAC control frames in the capture ({len(control)})")
    if len(sent) != 7 or len(times) < 2:
        return
    if len(control) == 7:
        sent = control
    t_pause, t_pfc0, t_pfc3, t_long, t_resume, t_trunc, t_gate = sent

    def gap_check(t0, want, what):
        g = gap_after(times, t0)
        ok = g is not None and want - EARLY_S <= g <= want + LATE_S
        check(ok, f"{what}: a gap of {g * 1000 if g else float('nan'):.1f} ms in B's transmissions "
                  f"(want {want * 1000:.1f} ms, -{EARLY_S * 1000:.0f}/+{LATE_S * 1000:.0f})")

    for t0 in sent:
        seg = [t for t in times if t0 - 0.05 <= t <= t0 + 1.0]
        gaps = sorted(((b - a, a - t0) for a, b in zip(seg, seg[1:])), reverse=True)[:3]
        print("  gaps after", f"{t0:.3f}:", ", ".join(f"{g * 1000:.1f} ms at {s * 1000:+.1f}" for g, s in gaps))
    gap_check(t_pause, PAUSE_S, f"PAUSE quanta {PAUSE_QUANTA} at {RATE_MBPS} Mb/s")
    gap_check(t_pfc0, PAUSE_S, "PFC priority 0 (the stream's)")
    g = gap_after(times, t_pfc3)
    check(g is not None and g < QUIET_MAX_S, f"PFC priority 3 only: no pause-long gap ({g * 1000 if g else float('nan'):.1f} ms)")
    gap_check(t_long, t_resume - t_long, "PAUSE then quanta 0")
    g = gap_after(times, t_trunc)
    check(g is not None and g < QUIET_MAX_S, f"a truncated PFC and an unknown opcode: no pause-long gap ({g * 1000 if g else float('nan'):.1f} ms)")
    # Outside the pauses the stream flows: the gaps above are the pauses'.
    seg = [t for t in times if sent[0] - 1.0 <= t <= sent[-1] + 1.0]
    quiet = [b - a for a, b in zip(seg, seg[1:])
             if all(not (s - 0.03 <= a <= s + 0.06) for s in (t_pause, t_pfc0, t_long))]
    worst = max(quiet, default=0)
    check(worst < QUIET_MAX_S, f"no gap of {QUIET_MAX_S * 1000:.0f} ms where nothing paused B (longest "
                               f"{worst * 1000:.1f} ms)")

    d = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    check(d.get("rx_mac_control_phy") == 7 and d.get("rx_pause_ctrl_phy") == 5,
          f"rx_mac_control_phy +7, rx_pause_ctrl_phy +5 ({d.get('rx_mac_control_phy')}, {d.get('rx_pause_ctrl_phy')})")
    check(d.get("rx_global_pause") == 3 and d.get("rx_prio0_pause") == 1 and d.get("rx_prio3_pause") == 1
          and d.get("rx_prio1_pause") == 0,
          f"rx_global_pause +3, rx_prio0_pause +1, rx_prio3_pause +1, rx_prio1_pause 0 "
          f"({d.get('rx_global_pause')}, {d.get('rx_prio0_pause')}, {d.get('rx_prio3_pause')})")
    check(d.get("rx_mac_control_malformed") == 1 and d.get("rx_unsupported_op_phy") == 1,
          f"the truncated PFC counted malformed, the GATE unsupported ({d.get('rx_mac_control_malformed')}, "
          f"{d.get('rx_unsupported_op_phy')})")
    want_us = (PAUSE_S + (t_resume - t_long)) * 1e6
    got_us = d.get("rx_global_pause_duration", 0)
    # The daemon times the resume on its own clock: the injector's sleep, give or take scheduling.
    check(abs(got_us - want_us) <= 20_000,
          f"rx_global_pause_duration +{got_us} us (~{want_us:.0f}: a whole pause and the resumed one)")
    check(abs(d.get("rx_prio0_pause_duration", 0) - PAUSE_S * 1e6) <= 1000 and
          abs(d.get("rx_prio3_pause_duration", 0) - PAUSE_S * 1e6) <= 1000,
          f"rx_prio0/3_pause_duration +{PAUSE_S * 1e6:.0f} us each ({d.get('rx_prio0_pause_duration')}, "
          f"{d.get('rx_prio3_pause_duration')})")
    check(d.get("rx_global_pause_transition") == 2, f"two XOFF->XON transitions of the global pause "
          f"({d.get('rx_global_pause_transition')})")
    check(d.get("tx_pause_holds", 0) >= 3, f"the engine held QPs for the pauses (tx_pause_holds +{d.get('tx_pause_holds')})")
    # A's end wrote the frames: its own daemon must not take them as received.
    # A's own daemon sees the frames leave its interface (af_packet shows other programs' frames):
    # from its own MAC, they are not a peer's and pause nothing.
    check(other.get("rx_mac_control_own") == 7 and other.get("rx_pause_ctrl_phy") == 0
          and other.get("tx_pause_holds") == 0,
          f"rnic0 (the injecting side) ignored the frames from its own MAC ({other.get('rx_mac_control_own')}, "
          f"{other.get('rx_pause_ctrl_phy')}, {other.get('tx_pause_holds')})")


try:
    main()
except Exception as ex:  # noqa: BLE001: a broken step is a failure with its reason
    check(False, f"step failed: {ex}")
finally:
    subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)
sys.exit(checks.finish())
