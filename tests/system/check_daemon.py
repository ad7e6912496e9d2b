#!/usr/bin/env python3
"""rnicd on the test bed: one daemon in namespace A, namespace B's kernel as its peer.

Checks that ping gets replies and ARP resolves to the daemon's MAC, that RoCEv2 frames from B
reach the daemon (counters) and its capture (rnic-pcap verifies them), that the kernel in A
never answers them (B sees no ICMP unreachable), and that SIGTERM exits 0.
With --idle-cpu, measures instead the idle CPU of rnicd with adaptive polling and with
--busy-poll over 5 s each, prints both, and fails if adaptive polling uses 5% or more.
With --ipv6, the same over IPv6 (B's kernel at fd77::2 in the bed's ULA prefix, IPv6 enabled on
its interface only): ping -6 to the daemon's global and link-local addresses, B's neighbour table
learns the daemon's MAC, the daemon resolves B through neighbour discovery for a QP's path
(B's kernel answers our solicitation), RoCEv2 over IPv6 (ICRC computed here, independently)
reaches the daemon and its capture, and the kernel in A sends no ICMPv6 at all.
Usage: check_daemon.py TESTBED RNICD RNIC_PCAP [--idle-cpu | --ipv6]"""
import errno
import os
import socket
import struct
import subprocess
import sys
import time
import zlib

from systest import Checks, daemon_exit_status, exit_counters, make_run

testbed, rnicd, rnic_pcap = sys.argv[1:4]
idle_mode = "--idle-cpu" in sys.argv[4:]
ipv6_mode = "--ipv6" in sys.argv[4:]
name = f"rnicdt{os.getpid() % 10000}"  # unique per run: parallel ctest runs do not collide
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=f"/tmp/{name}")
state = env["RNIC_TESTBED_DIR"]
checks = Checks()
check, failures = checks.check, checks.failures
run = make_run(env)


def bed_env():
    with open(f"{state}/env") as f:
        return dict(kv.split("=", 1) for line in f for kv in line.split())


def in_b(*args, timeout=30, check=True):
    return run(testbed, "exec", "b", *args, timeout=timeout, check=check)


def icmp_unreachables_in_b():
    lines = [l.split() for l in in_b("cat", "/proc/net/snmp").stdout.splitlines() if l.startswith("Icmp:")]
    return int(dict(zip(lines[0], lines[1]))["InDestUnreachs"])


def snmp6(side):
    out = run(testbed, "exec", side, "cat", "/proc/net/snmp6").stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines() if line.strip())}


def link_local(mac):
    """fe80:: with the modified EUI-64 interface identifier (RFC 4291 appendix A)."""
    b = bytes.fromhex(mac.replace(":", ""))
    return socket.inet_ntop(socket.AF_INET6, b"\xfe\x80" + b"\0" * 6 + bytes([b[0] ^ 2]) + b[1:3] + b"\xff\xfe" + b[3:])


def schedstat(pid):
    """Seconds on a CPU and seconds runnable but waiting for one (/proc/PID/schedstat, in ns:
    clock ticks are too coarse for a 2% budget over 5 s)."""
    on_cpu, waiting, _ = (int(v) for v in open(f"/proc/{pid}/schedstat").read().split())
    return on_cpu / 1e9, waiting / 1e9


def idle_cpu(extra):
    """rnicd's CPU over 5 idle seconds, % of a core, and the share of those seconds it wanted a
    CPU (on one or waiting in a run queue): a spinning loop wants one all the time however
    loaded the machine is, when the CPU it gets depends on what else runs."""
    run(testbed, "up", "--rnicd", rnicd, *extra, timeout=60)
    pid = int(open(f"{state}/rnicd-a.pid").read())
    time.sleep(1)  # past start-up and the spin window
    (c0, w0), t0 = schedstat(pid), time.monotonic()
    time.sleep(5)
    (c1, w1), t1 = schedstat(pid), time.monotonic()
    run(testbed, "down", timeout=60)
    return 100.0 * (c1 - c0) / (t1 - t0), 100.0 * ((c1 - c0) + (w1 - w0)) / (t1 - t0)


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
    rc = daemon_exit_status(state, "a")
    check(rc == "0", f"rnicd exits 0 on SIGTERM (got {rc})")
    counters = exit_counters(state, "a")
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


def roce6_frames(e, count):
    """RC SEND-only frames from B to A over IPv6, ICRC by the GUIDE's recipe (zlib's CRC-32 over
    8 bytes of ones and the frame with its variant fields set to ones, least significant byte
    first): a second implementation beside wire/'s."""
    mac = lambda m: bytes.fromhex(m.replace(":", ""))
    src, dst = socket.inet_pton(socket.AF_INET6, e["ip6_b"]), socket.inet_pton(socket.AF_INET6, e["ip6_a"])
    frames = []
    for i in range(count):
        payload = bytes([i]) * 64
        bth = struct.pack("!BBHII", 4, 0, 0xFFFF, 0x11, 0x80000000 | i)  # SEND only, dqp 0x11, AckReq
        udp = struct.pack("!HHHH", 0xC000 + i, 4791, 8 + len(bth) + len(payload) + 4, 0)
        ip = struct.pack("!IHBB", (6 << 28) | (0x0A << 20) | (0x12345 + i), len(udp) + len(bth) + len(payload) + 4,
                         17, 64) + src + dst
        masked = bytearray(ip + udp + bth)
        masked[0] |= 0x0F
        masked[1:4] = b"\xff" * 3
        masked[7] = 0xFF
        masked[46:48] = b"\xff\xff"
        masked[52] = 0xFF
        icrc = zlib.crc32(b"\xff" * 8 + bytes(masked) + payload).to_bytes(4, "little")
        frames.append(mac(e["mac_a"]) + mac(e["mac_b"]) + b"\x86\xdd" + ip + udp + bth + payload + icrc)
    return frames


def ipv6_functional():
    from raw_host_client import Sess

    run(testbed, "up", "--rnicd", rnicd, "--pcap", timeout=60)
    e = bed_env()
    ll_a = link_local(e["mac_a"])
    a_out0 = snmp6("a").get("Icmp6OutMsgs", 0)
    b_unreach0 = snmp6("b")["Icmp6InDestUnreachs"]

    for target in (e["ip6_a"], f"{ll_a}%{e['if_b']}"):
        r = in_b("ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", target, check=False, timeout=20)
        check(r.returncode == 0 and " 0% packet loss" in r.stdout and "DUP!" not in r.stdout,
              f"ping -6 {target} from B's kernel gets every reply, once")
    neigh = in_b("ip", "-6", "neigh", "show", "dev", e["if_b"]).stdout
    for addr in (e["ip6_a"], ll_a):
        line = next((l for l in neigh.splitlines() if l.split()[0] == addr), "")
        check(e["mac_a"] in line, f"B's kernel learnt {addr} -> the daemon's MAC ({line.strip()})")

    # A QP's path from GID 2 (fd77::1) to B: the daemon solicits, B's kernel answers.
    s = Sess(f"{state}/run-a/rnic0.sock")
    gids = [socket.inet_ntop(socket.AF_INET6, g) for g in s.gids]
    check(gids == [f"::ffff:{e['ip_a']}", ll_a, e["ip6_a"]] and s.gid_types == [2, 2, 2],
          f"Hello lists the IPv4-mapped, link-local and global GIDs, all RoCE v2 ({gids}, {s.gid_types})")
    s.to_init()
    check(s.to_rtr(0x99, socket.inet_pton(socket.AF_INET6, e["ip6_b"]), sgid=0) == errno.EINVAL,
          "a path from the IPv4 GID to an IPv6 address is refused (EINVAL)")
    st = s.to_rtr(0x99, socket.inet_pton(socket.AF_INET6, e["ip6_b"]), sgid=2)
    dgid, sgid, dmac = s.path()
    check(st == 0 and sgid == 2 and dmac.hex(":") == e["mac_b"],
          f"ModifyQp(RTR) to {e['ip6_b']} resolved B's MAC through ND in {s.rtr_ms:.1f} ms ({st}, {dmac.hex(':')})")
    s.s.close()
    # An address of B's that never spoke to the daemon: a fresh solicitation to its
    # solicited-node group, answered by B's kernel with its link-layer address.
    fresh = e["ip6_b"][:-1] + "3"
    in_b("ip", "addr", "add", f"{fresh}/64", "dev", e["if_b"], "nodad")
    s2 = Sess(f"{state}/run-a/rnic0.sock")
    s2.to_init()
    st = s2.to_rtr(0x99, socket.inet_pton(socket.AF_INET6, fresh), sgid=2)
    dmac = s2.path()[2]
    check(st == 0 and dmac.hex(":") == e["mac_b"],
          f"ModifyQp(RTR) to {fresh} waited for a multicast solicitation's answer ({s2.rtr_ms:.1f} ms, {dmac.hex(':')})")
    s2.s.close()

    script = f"""
import socket
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("{e['if_b']}", 0))
for f in {roce6_frames(e, 5)!r}:
    s.send(f)
"""
    in_b("/usr/bin/python3", "-c", script, timeout=30)
    time.sleep(0.5)
    check(snmp6("a").get("Icmp6OutMsgs", 0) == a_out0, "the kernel in A sent no ICMPv6 (no NA, echo reply or error)")
    check(snmp6("b")["Icmp6InDestUnreachs"] == b_unreach0, "B's kernel got no ICMPv6 unreachable")

    run(testbed, "down", timeout=60)
    rc = daemon_exit_status(state, "a")
    check(rc == "0", f"rnicd exits 0 on SIGTERM (got {rc})")
    c = exit_counters(state, "a")
    print("rnicd counters:", " ".join(f"{k}={v}" for k, v in c.items()))
    check(c.get("icmp6_echo_replies", 0) >= 6, "daemon counted its ICMPv6 echo replies")
    check(c.get("nd_unsolicited_sent", 0) == 2, "daemon announced both addresses at start")
    check(c.get("nd_advertisements_sent", 0) >= 1, "daemon answered B's solicitations")
    check(c.get("nd_solicitations_sent", 0) >= 2 and c.get("nd_advertisements_received", 0) >= 2,
          "daemon solicited B and took its advertisement")
    check(c.get("nd_invalid", 0) == 0 and c.get("icmp6_bad_checksum", 0) == 0, "nothing B's kernel sent was invalid")
    # Linux answers a unicast probe without the target address option: that must confirm, not
    # be ignored (else the entry would fail after its probes).
    check(c.get("nd_ignored", 0) == 0 and c.get("nd_resolution_failures", 0) == 0,
          "every advertisement B's kernel sent was taken")
    check(c.get("roce_rx", 0) == 5 and c.get("engine_rx_unknown_qp", 0) == 5,
          "the 5 RoCEv2-over-IPv6 frames reached the engine, ICRC verified (no QP 0x11)")
    check(c.get("captured", 0) == 5, "daemon captured them")
    r = run(rnic_pcap, f"{state}/a.pcap", check=False)
    print(r.stdout.strip())
    check(r.returncode == 0 and "5 RoCEv2" in r.stdout and "ICRC ok 5/5" in r.stdout,
          "rnic-pcap reads the capture and verifies every frame")


try:
    if ipv6_mode:
        ipv6_functional()
    elif idle_mode:
        adaptive, _ = idle_cpu([])
        busy, busy_wanted = idle_cpu(["--busy-poll"])
        print(f"rnicd idle CPU over 5 s: adaptive polling {adaptive:.2f}% of a core, --busy-poll {busy:.1f}% "
              f"(runnable {busy_wanted:.1f}% of the time)")
        check(adaptive < 2.0, "adaptive polling idles under 2% of a core")
        check(busy_wanted > 90.0, "--busy-poll spins: runnable all the time, never asleep")
    else:
        functional()
finally:
    run(testbed, "down", timeout=60, check=False)
    subprocess.run(["rm", "-rf", state])
sys.exit(1 if failures else 0)
