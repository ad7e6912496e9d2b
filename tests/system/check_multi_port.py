#!/usr/bin/env python3
"""One rnicd owning two ports: the two ends of a veth pair in one namespace, a device each (rnic0,
rnic1), one poll loop serving both.

Checks that both devices come up with their own control socket, addresses and GIDs (rnicctl dev,
rnicctl gid), that Debian's unmodified ibv_rc_pingpong (-c: buffers validated) and ib_write_bw /
ib_read_bw run between rnic0 and rnic1 through our libibverbs.so.1 (every frame crossing the veth,
never looped back inside the daemon), that each device's capture passes rnic-pcap and holds the
traffic of both directions, that the per-device counters agree with the captures, and that
SIGTERM stops both devices with exit status 0.
Usage: check_multi_port.py RNICD RNIC_RUN RNICCTL RNIC_PCAP"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from systest import Checks, run_pair

rnicd, rnic_run, rnicctl, rnic_pcap = sys.argv[1:5]
tag = f"rnicmp{os.getpid() % 100000}"  # unique per run: parallel runs do not collide
ns = tag
if0, if1 = f"{tag[:11]}p0", f"{tag[:11]}p1"
state = f"/tmp/{tag}"
run_dir = f"{state}/run"
checks = Checks(verdict_first=True)
check, failures = checks.check, checks.failures
daemon = None


def sh(*args, timeout=30, check_rc=True):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check_rc and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def in_ns(*args, timeout=30, check_rc=True):
    return sh("ip", "netns", "exec", ns, *args, timeout=timeout, check_rc=check_rc)


def set_up():
    sh("ip", "netns", "add", ns)
    sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh("ip", "-n", ns, "link", "add", if0, "type", "veth", "peer", "name", if1)
    for i in (if0, if1):
        sh("ip", "-n", ns, "link", "set", i, "mtu", "9000", "up")
        # The kernel stays silent on both ends (docs/daemon.md, "Keeping the kernel quiet").
        in_ns("sysctl", "-qw", f"net.ipv6.conf.{i}.disable_ipv6=1")
    rules = "table netdev rnic {\n" + "".join(
        f'  chain in{k} {{ type filter hook ingress device "{i}" priority -500; udp dport 4791 drop; }}\n'
        for k, i in enumerate((if0, if1))) + "}\n"
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True, check=True, timeout=30)
    os.makedirs(run_dir, exist_ok=True)


def tear_down():
    if daemon and daemon.poll() is None:
        daemon.kill()
        daemon.wait(timeout=10)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
    shutil.rmtree(state, ignore_errors=True)


def perftest_pair(prog, *args, timeout=60):
    """Server on rnic0, client on rnic1, TCP set-up over the namespace's loopback."""
    port = str(20000 + os.getpid() % 12000)
    return run_pair(rnic_run, run_dir, ns, [prog, "-x", "0", "-F", "-p", port, *args], port, timeout)


def pingpong(*args, timeout=60):
    common = [rnic_run, "--run-dir", run_dir, "ibv_rc_pingpong", "-g", "0", *args]
    server = subprocess.Popen(["ip", "netns", "exec", ns, "timeout", str(timeout), *common, "-d", "rnic0"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    for _ in range(100):
        if ":18515 " in in_ns("ss", "-Hltn").stdout:
            break
        time.sleep(0.1)
    client = in_ns("timeout", str(timeout), *common, "-d", "rnic1", "127.0.0.1", timeout=timeout + 10, check_rc=False)
    out, _ = server.communicate(timeout=timeout + 10)
    return server.returncode, client.returncode, out + client.stdout + client.stderr


def pcap_summary(path):
    r = sh(rnic_pcap, "--quiet", path, check_rc=False)
    m = re.search(r"(\d+) RoCEv2 frames?.*?ICRC ok (\d+)/(\d+)", r.stdout, re.S)
    return r.returncode, r.stdout, m


try:
    set_up()
    log = open(f"{state}/rnicd.log", "w")
    daemon = subprocess.Popen(
        ["ip", "netns", "exec", ns, rnicd, "--run-dir", run_dir,
         "--iface", if0, "--ip", "10.95.0.1/24", "--pcap", f"{state}/p0.pcap",
         "--iface", if1, "--ip", "10.95.0.2/24", "--ip6", "fd95::2/64", "--pcap", f"{state}/p1.pcap"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    up = False
    for _ in range(100):
        text = open(f"{state}/rnicd.log").read()
        if "poll loop: 2 device(s)" in text:
            up = True
            break
        if daemon.poll() is not None:
            break
        time.sleep(0.1)
    check(up, "one rnicd brings up two devices")
    if not up:
        raise RuntimeError(open(f"{state}/rnicd.log").read())

    devs = sh(rnicctl, "--run-dir", run_dir, "dev").stdout
    print(devs, end="")
    check("rnic0" in devs and "rnic1" in devs, "rnicctl dev lists rnic0 and rnic1")
    check("10.95.0.1" in devs and "10.95.0.2" in devs, "each device has its own IPv4 address")
    gid1 = sh(rnicctl, "--run-dir", run_dir, "-d", "rnic1", "gid").stdout
    gid0 = sh(rnicctl, "--run-dir", run_dir, "-d", "rnic0", "gid").stdout
    check("::ffff:10.95.0.2" in gid1 and "fd95::2" in gid1, "rnic1's GID table: its IPv4 and --ip6 GIDs")
    check("::ffff:10.95.0.1" in gid0 and "fd95::2" not in gid0, "rnic0's GID table is its own")
    listed = in_ns(rnic_run, "--run-dir", run_dir, "ibv_devices").stdout
    check("rnic0" in listed and "rnic1" in listed, "ibv_devices through the shim lists both devices")

    for mtu, size in (("1024", "1"), ("1024", "65536"), ("4096", "4097"), ("4096", "65536")):
        srv, cli, out = pingpong("-m", mtu, "-s", size, "-n", "50", "-c")
        ok = srv == 0 and cli == 0 and "invalid data" not in out and out.count("iters in") == 2
        check(ok, f"ibv_rc_pingpong -m {mtu} -s {size} -c between rnic0 and rnic1")
        if not ok:
            print(out)
    srv, cli, out_s, out_c = perftest_pair("ib_write_bw", "-s", "65536", "-n", "2000", "--report_gbits")
    line = [l for l in out_c.splitlines() if re.match(r"^\s*65536\s+2000\s", l)]
    check(srv == 0 and cli == 0 and bool(line), "ib_write_bw -s 65536 between rnic0 and rnic1")
    if line:
        print("  ib_write_bw:", line[-1].strip())
    else:
        print(out_s, out_c)
    srv, cli, out_s, out_c = perftest_pair("ib_read_bw", "-s", "65536", "-n", "500", "--report_gbits")
    check(srv == 0 and cli == 0 and re.search(r"^\s*65536\s+500\s", out_c, re.M) is not None,
          "ib_read_bw -s 65536 between rnic0 and rnic1")

    stats = {}
    for dev in ("rnic0", "rnic1"):
        text = sh(rnicctl, "--run-dir", run_dir, "-d", dev, "stat").stdout
        stats[dev] = {k: int(v) for k, v in re.findall(r"^\s*(\w+)\s+(\d+)\s*$", text, re.M)}
    for dev in ("rnic0", "rnic1"):
        c = stats[dev]
        check(c.get("roce_tx", 0) > 1000 and c.get("roce_rx", 0) > 1000, f"{dev} sent and received RoCEv2 frames")
        check(c.get("loopback_frames", -1) == 0, f"{dev}: every frame crossed the veth (none looped back)")
        check(c.get("rx_icrc_errors", 0) == 0 and c.get("port_rx_malformed", 0) == 0, f"{dev}: no bad frames")
    check(stats["rnic0"].get("roce_tx") == stats["rnic1"].get("roce_rx") and
          stats["rnic1"].get("roce_tx") == stats["rnic0"].get("roce_rx"),
          "what one device sent, the other received (no frame lost on the veth)")

    daemon.send_signal(signal.SIGTERM)
    rc = daemon.wait(timeout=20)
    check(rc == 0, f"SIGTERM stops both devices, exit status 0 (got {rc})")
    check(not os.path.exists(f"{run_dir}/rnic0.sock") and not os.path.exists(f"{run_dir}/rnic1.sock"),
          "both control sockets removed")
    for dev, path in (("rnic0", f"{state}/p0.pcap"), ("rnic1", f"{state}/p1.pcap")):
        rc, out, m = pcap_summary(path)
        print(out.strip().splitlines()[-1] if out.strip() else "(no rnic-pcap output)")
        frames = stats[dev].get("roce_tx", 0) + stats[dev].get("roce_rx", 0)
        check(rc == 0, f"{dev}'s capture passes rnic-pcap (every ICRC verified)")
        full = sh(rnic_pcap, path, check_rc=False).stdout
        out_1 = len(re.findall(r"10\.95\.0\.1:\d+ -> 10\.95\.0\.2 ", full))
        out_2 = len(re.findall(r"10\.95\.0\.2:\d+ -> 10\.95\.0\.1 ", full))
        check(out_1 > 0 and out_2 > 0 and out_1 + out_2 >= frames,
              f"{dev}'s capture holds both directions ({out_1} + {out_2} frames; counters said {frames})")
except Exception as e:  # a set-up failure is a failure of the test, reported, then cleaned up
    print(f"FAIL {e}")
    failures.append(str(e))
finally:
    tear_down()
    status = checks.finish()
sys.exit(status)
