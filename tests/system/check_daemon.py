#!/usr/bin/env python3
"""rnicd on the test bed: one daemon in namespace A, namespace B's kernel as its peer.

Checks that ping gets replies and ARP resolves to the daemon's MAC, that RoCEv2 frames from B
reach the daemon (counters) and its capture (rnic-pcap verifies them), that the kernel in A
never answers them (B sees no ICMP unreachable), and that SIGTERM exits 0.
With --idle-cpu, measures instead the idle CPU of rnicd with adaptive polling and with
--busy-poll over 5 s each, prints both, and fails if adaptive polling uses 5% or more.
Usage: check_daemon.py TESTBED RNICD RNIC_PCAP [--idle-cpu]"""
import os
import re
import subprocess
import sys
import time

testbed, rnicd, rnic_pcap = sys.argv[1:4]
idle_mode = "--idle-cpu" in sys.argv[4:]
name = f"rnicdt{os.getpid() % 10000}"  # unique per run: parallel ctest runs do not collide
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=f"/tmp/{name}")
state = env["RNIC_TESTBED_DIR"]
failures = []


def run(*args, timeout=30, check=True):
    r = subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def bed_env():
    with open(f"{state}/env") as f:
        return dict(kv.split("=", 1) for line in f for kv in line.split())


def in_b(*args, timeout=30, check=True):
    return run(testbed, "exec", "b", *args, timeout=timeout, check=check)


def icmp_unreachables_in_b():
    lines = [l.split() for l in in_b("cat", "/proc/net/snmp").stdout.splitlines() if l.startswith("Icmp:")]
    return int(dict(zip(lines[0], lines[1]))["InDestUnreachs"])


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(extra):
    run(testbed, "up", "--rnicd", rnicd, *extra, timeout=60)
    pid = int(open(f"{state}/rnicd-a.pid").read())
    time.sleep(1)  # past start-up and the spin window
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(5)
    c1, t1 = cpu_seconds(pid), time.monotonic()
    run(testbed, "down", timeout=60)
    return 100.0 * (c1 - c0) / (t1 - t0)


def functional():
    run(testbed, "up", "--rnicd", rnicd, "--pcap", timeout=60)
    e = bed_env()
    unreach0 = icmp_unreachables_in_b()

    r = in_b("ping", "-c", "3", "-i", "0.2", "-W", "2", e["ip_a"], check=False, timeout=20)
    check(r.returncode == 0 and " 0% packet loss" in r.stdout, "ping from B's kernel gets every reply")
    neigh = in_b("ip", "neigh", "show", e["ip_a"]).stdout
    check(e["mac_a"] in neigh, f"B's kernel resolved {e['ip_a']} to the daemon's MAC ({neigh.strip()})")

    # RoCEv2 frames with a correct ICRC, built by scapy in B and sent raw.
    script = f"""
from scapy.all import Ether, IP, UDP, Raw, sendp, conf
from scapy.contrib.roce import BTH
conf.verb = 0
sendp([Ether(src="{e['mac_b']}", dst="{e['mac_a']}") / IP(src="{e['ip_b']}", dst="{e['ip_a']}", flags="DF", id=i)
       / UDP(sport=0xC000 + i, dport=4791, chksum=0) / BTH(opcode=4, dqpn=0x11, psn=i, ackreq=1) / Raw(b"x" * 64)
       for i in range(5)], iface="{e['if_b']}")
"""
    in_b("/usr/bin/python3", "-c", script, timeout=60)
    time.sleep(0.5)
    check(icmp_unreachables_in_b() == unreach0, "A's kernel did not answer RoCEv2 with ICMP unreachable")

    run(testbed, "down", timeout=60)
    rc = open(f"{state}/rnicd-a.rc").read().strip()
    check(rc == "0", f"rnicd exits 0 on SIGTERM (got {rc})")
    log = open(f"{state}/rnicd-a.log").read()
    counters = dict(re.findall(r"(\w+)=(\d+)", log.strip().splitlines()[-2]))
    print("rnicd counters:", " ".join(f"{k}={v}" for k, v in counters.items()))
    check(int(counters.get("icmp_echo_replies", 0)) >= 3, "daemon counted its echo replies")
    check(int(counters.get("arp_replies_sent", 0)) >= 1, "daemon answered ARP")
    check(int(counters.get("arp_gratuitous_sent", 0)) == 1, "daemon announced itself at start")
    check(int(counters.get("roce_rx", 0)) == 5, "daemon received the 5 RoCEv2 frames")
    check(int(counters.get("engine_rx_unknown_qp", 0)) == 5, "the engine saw them (no QP 0x11 yet)")
    check(int(counters.get("captured", 0)) == 5, "daemon captured them")
    r = run(rnic_pcap, f"{state}/a.pcap", check=False)
    print(r.stdout.strip())
    check(r.returncode == 0 and "5 RoCEv2" in r.stdout and "ICRC ok 5/5" in r.stdout,
          "rnic-pcap reads the capture and verifies every frame")


try:
    if idle_mode:
        adaptive = idle_cpu([])
        busy = idle_cpu(["--busy-poll"])
        print(f"rnicd idle CPU over 5 s: adaptive polling {adaptive:.2f}% of a core, --busy-poll {busy:.1f}%")
        check(adaptive < 5.0, "adaptive polling idles under 5% of a core (target 2%)")
        check(busy > 50.0, "--busy-poll spins")
    else:
        functional()
finally:
    run(testbed, "down", timeout=60, check=False)
    subprocess.run(["rm", "-rf", state])
sys.exit(1 if failures else 0)
