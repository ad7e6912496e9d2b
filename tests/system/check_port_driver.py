#!/usr/bin/env python3
"""Two rnicd on a port other than DPDK's af_packet PMD (tools/testbed.sh up --pmd PMD).

af_xdp: DPDK's af_xdp PMD takes every frame of the interface away from the kernel, ARP included,
and its UMEM is the mbuf pool with one page per frame: the port must come up with the smaller
frame it can carry (RoCE MTU 2048 on the 3500-byte veth native XDP allows) rather than fail, wake
its loop on the XSK socket and answer ARP itself.
ring: rnicd's own TPACKET_V2 ring port (--ring-port) on the 9000-byte veth: RoCE MTU 4096, its
ring socket as the wake-up, and a frame longer than a ring frame (injected from the peer's side)
counted and dropped without harm.
Either must carry Debian's ibv_rc_pingpong (-c: buffers validated) and perftest between the two
daemons, lose no frame, and write captures whose every ICRC is right.
Usage: check_port_driver.py af_xdp|ring TESTBED_SH RNICD RNIC_RUN RNICCTL RNIC_PCAP"""
import os
import re
import subprocess
import sys
import time

from systest import Checks, run_pair

pmd, testbed, rnicd, rnic_run, rnicctl, rnic_pcap = sys.argv[1:7]
# What each driver must show: its name and wake-up in the start-up line, the veth MTU testbed.sh
# gives it, the active MTU that leaves.
expect = {
    "af_xdp": {"driver": "driver=net_af_xdp", "wakeup": "rx-wakeup=xsk-fd", "mtu": "mtu=3500", "active": 2048},
    "ring": {"driver": "driver=packet-ring", "wakeup": "rx-wakeup=ring-fd", "mtu": "mtu=9000", "active": 4096},
}[pmd]
env = dict(os.environ)
env.setdefault("RNIC_TESTBED", "pdrv")
env.setdefault("RNIC_TESTBED_DIR", "/tmp/pdrv")
env.setdefault("RNIC_TESTBED_NET", "10.96.0")
env.pop("RNIC_TESTBED_MTU", None)  # the test is about the default --pmd picks
state = env["RNIC_TESTBED_DIR"]
net = env["RNIC_TESTBED_NET"]
run_dir = f"{state}/run"
checks = Checks(verdict_first=True)
check, failures = checks.check, checks.failures


def sh(*args, timeout=30, check_rc=True):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env)
    if check_rc and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def bed_env():
    values = {}
    for line in open(f"{state}/env"):
        for word in line.split():
            k, _, v = word.partition("=")
            values[k] = v
    return values


def in_ns(ns, *args, timeout=30, check_rc=True):
    return sh("ip", "netns", "exec", ns, *args, timeout=timeout, check_rc=check_rc)


def pair(ns, prog, args, port, timeout=60):
    """Server on rnic0, client on rnic1, both in namespace A, the TCP set-up over its loopback."""
    server_rc, client_rc, server_out, client_out = run_pair(rnic_run, run_dir, ns, [prog, *args], port, timeout)
    return server_rc, client_rc, server_out + client_out


def counters(dev):
    text = sh(rnicctl, "--run-dir", run_dir, "-d", dev, "stat").stdout
    return {k: int(v) for k, v in re.findall(r"^\s*(\w+)\s+(\d+)\s*$", text, re.M)}


# An 8000-byte UDP datagram to port 4791 written on an interface with AF_PACKET (argv: interface,
# destination MAC, destination and source address).
OVERSIZE = r"""
import socket, struct, sys
ifname, dmac, dst, src = sys.argv[1:5]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((ifname, 0))
payload = bytes(8000)
udp = struct.pack("!HHHH", 49152, 4791, 8 + len(payload), 0)
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp) + len(payload), 0, 0x4000, 64, 17, 0,
                 socket.inet_aton(src), socket.inet_aton(dst))
eth = bytes.fromhex(dmac.replace(":", "")) + s.getsockname()[4] + b"\x08\x00"
s.send(eth + ip + udp + payload)
"""

try:
    sh(testbed, "up", "--daemons", "both", "--one-run-dir", "--pmd", pmd, "--pcap", "--rnicd", rnicd,
       timeout=60)
    e = bed_env()
    ns_a = e["ns_a"]
    for side in ("a", "b"):
        log = open(f"{state}/rnicd-{side}.log").read()
        up = re.search(r"rnicd up: .*", log)
        print(up.group(0) if up else log)
        check(up is not None and expect["driver"] in up.group(0), f"rnicd {side} runs on {expect['driver']}")
        check(up is not None and expect["mtu"] in up.group(0) and expect["wakeup"] in up.group(0),
              f"rnicd {side}: {expect['mtu']}, woken by {expect['wakeup']}")
    devs = sh(rnicctl, "--run-dir", run_dir, "dev").stdout
    print(devs, end="")
    check(devs.count(f"active_mtu {expect['active']}") == 2, f"the active MTU is {expect['active']}")

    srv, cli, out = pair(ns_a, "ibv_rc_pingpong", ["-g", "0", "-s", "100000", "-n", "100", "-c"], 18515)
    ok = srv == 0 and cli == 0 and "invalid data" not in out and out.count("iters in") == 2
    check(ok, f"ibv_rc_pingpong -s 100000 -n 100 -c (multi-packet messages, data checked) over {pmd}")
    if not ok:
        print(out)
    srv, cli, out = pair(ns_a, "ib_write_bw", ["-x", "0", "-F", "-p", "18600", "-s", "65536", "-n", "2000",
                                               "--report_gbits"], 18600)
    line = re.search(r"^\s*65536\s+2000\s.*$", out, re.M)
    check(srv == 0 and cli == 0 and line is not None, f"ib_write_bw -s 65536 -n 2000 over {pmd}")
    print("  ib_write_bw:", line.group(0).strip() if line else out)
    srv, cli, out = pair(ns_a, "ib_read_bw", ["-x", "0", "-F", "-p", "18601", "-s", "65536", "-n", "500",
                                              "--report_gbits"], 18601)
    check(srv == 0 and cli == 0 and re.search(r"^\s*65536\s+500\s", out, re.M) is not None,
          f"ib_read_bw -s 65536 -n 500 over {pmd}")

    if pmd == "ring":
        # A RoCEv2 frame longer than a ring frame (the 9000-byte veth carries it), sent at rnic0
        # from B's side: counted as missed, never handed to the engine cut short.
        before = counters("rnic0")
        in_ns(e["ns_b"], sys.executable, "-c", OVERSIZE, e["if_b"], e["mac_a"], e["ip_a"], e["ip_b"])
        time.sleep(0.5)
        after = counters("rnic0")
        check(after.get("port_rx_missed", 0) - before.get("port_rx_missed", 0) == 1,
              "a frame longer than a ring frame is counted in port_rx_missed")
        srv, cli, out = pair(ns_a, "ibv_rc_pingpong", ["-g", "0", "-s", "4096", "-n", "50", "-c"], 18516)
        check(srv == 0 and cli == 0 and out.count("iters in") == 2, "and the port carries on (ibv_rc_pingpong)")

    stats = {dev: counters(dev) for dev in ("rnic0", "rnic1")}
    for dev, c in stats.items():
        check(c.get("port_rx_arp", 0) > 0, f"{dev} answered ARP itself")
        check(c.get("rx_icrc_errors", 0) == 0 and c.get("port_rx_malformed", 0) == 0, f"{dev}: no bad frames")
        check(c.get("retransmitted_packets", 0) == 0, f"{dev}: nothing retransmitted on a lossless link")
    check(stats["rnic0"].get("roce_tx") == stats["rnic1"].get("roce_rx") and
          stats["rnic1"].get("roce_tx") == stats["rnic0"].get("roce_rx"),
          "what one daemon sent, the other received (no frame lost on the veth)")
    sh(testbed, "down", timeout=60)
    for side in ("a", "b"):
        rc = open(f"{state}/rnicd-{side}.rc").read().strip() if os.path.exists(f"{state}/rnicd-{side}.rc") else "?"
        check(rc == "0", f"rnicd {side} exits 0 on SIGTERM (got {rc})")
        r = sh(rnic_pcap, "--quiet", f"{state}/{side}.pcap", check_rc=False)
        print(r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "(no rnic-pcap output)")
        check(r.returncode == 0 and "RoCEv2" in r.stdout, f"rnicd {side}'s capture passes rnic-pcap (every ICRC)")
except Exception as e:  # a set-up failure is a failure of the test, reported, then cleaned up
    print(f"FAIL {e}")
    failures.append(str(e))
finally:
    subprocess.run([testbed, "down"], capture_output=True, timeout=60, env=env)
    status = checks.finish()
sys.exit(status)
