#!/usr/bin/env python3
"""Debian's unmodified rdma-core and perftest binaries between two rnicd, through our
libibverbs.so.1 (rnic-run). Two beds, one after the other:
  jumbo: veth MTU 9000 (active MTU 4096): ibv_devices, ibv_devinfo -v, the four pingpongs at
         path MTU 1024 and 4096, 1 B to 64 KiB, buffers validated (-c), events (-e); every
         perftest benchmark (-a once, -e once, UD once); RoCEv2 over IPv6 through GIDs 1
         (link-local) and 2 (fd77::) with pingpongs and perftest; both daemons capturing.
  plain: veth MTU 1500 (active MTU 1024): the pingpongs and UD at the port's own MTU 1024.
Both applications of a run live in the bed's namespace A, exchanging their connection data over
its loopback; the RDMA traffic crosses the veth between the daemons (rnic0 in A, rnic1 in B).
After each bed, both captures must pass rnic-pcap (ICRC verified on every frame).
Usage: check_debian_binaries.py TESTBED RNICD RNIC_RUN RNIC_PCAP [--quick]"""
import os
import re
import subprocess
import sys
import time

testbed, rnicd, rnic_run, rnic_pcap = sys.argv[1:5]
quick = "--quick" in sys.argv[5:]
name = f"rnicdb{os.getpid() % 10000}"
state = f"/tmp/{name}"
base_env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.84.0")
failures = []
passed = 0
port = 20000 + os.getpid() % 20000


def bed(*args, mtu="9000", timeout=60):
    env = dict(base_env, RNIC_TESTBED_MTU=mtu)
    r = subprocess.run([testbed, *args], env=env, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError(f"testbed {' '.join(args)}: {r.stdout}{r.stderr}")
    return r.stdout


def in_ns(args):
    return ["ip", "netns", "exec", f"{name}-a", rnic_run, "--run-dir", f"{state}/run", *args]


def tool(label, args, expect):
    """A single-process program (ibv_devices, ibv_devinfo): exit 0 and every regex in `expect`."""
    global passed
    r = subprocess.run(in_ns(args), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    missing = [e for e in expect if not re.search(e, r.stdout, re.M)]
    if r.returncode != 0 or missing:
        failures.append(f"{label}: exit {r.returncode}, missing {missing}")
        print(f"FAIL {label}\n{r.stdout[-2000:]}{r.stderr[-2000:]}", flush=True)
    else:
        passed += 1
        print(f"ok   {label}", flush=True)


def refuses(label, args, expect):
    """A path we do not offer yet (rdma_cm): a clean error exit, never a crash or a hang."""
    global passed
    r = subprocess.run(in_ns(args), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    out = r.stdout + r.stderr
    if r.returncode <= 0 or not re.search(expect, out):
        failures.append(f"{label}: exit {r.returncode} (wanted a clean error), output {out[-500:]!r}")
        print(f"FAIL {label}\n{out[-2000:]}", flush=True)
    else:
        passed += 1
        print(f"ok   {label}: exit {r.returncode}, {re.search(expect, out).group(0)!r}", flush=True)


def pair(label, program, args, success, timeout=180):
    """Server on rnic0 and client on rnic1; both must exit 0 and print `success`."""
    global passed, port
    port += 1
    common = [program, *args, "-p", str(port)]
    server_args = common + ["-d", "rnic0"]
    client_args = common + ["-d", "rnic1", "127.0.0.1"]
    started = time.monotonic()
    server = subprocess.Popen(in_ns(server_args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              stdin=subprocess.DEVNULL)
    time.sleep(0.5)  # the server is listening on its TCP port before the client dials
    try:
        client = subprocess.run(in_ns(client_args), capture_output=True, text=True, timeout=timeout,
                                stdin=subprocess.DEVNULL)
        server_out, _ = server.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        server.kill()
        server.communicate()
        failures.append(f"{label}: timed out after {timeout} s")
        print(f"FAIL {label}: timed out", flush=True)
        return ""
    out = client.stdout + client.stderr
    bad = [w for w in ("Failed", "failed", "Couldn't", "error", "Unable") if w in out + server_out]
    ok = client.returncode == 0 and server.returncode == 0 and re.search(success, out, re.M) and not bad
    if not ok:
        failures.append(f"{label}: client {client.returncode} server {server.returncode} {bad}")
        print(f"FAIL {label}\n--- client\n{out[-3000:]}\n--- server\n{server_out[-3000:]}", flush=True)
        return out
    passed += 1
    summary = [line for line in out.splitlines() if re.search(success, line, re.M)]
    print(f"ok   {label} ({time.monotonic() - started:.1f} s) {summary[-1].strip() if summary else ''}", flush=True)
    return out


def check_captures(tag):
    global passed
    for side in "ab":
        pcap = f"{state}/{side}.pcap"
        r = subprocess.run([rnic_pcap, "--quiet", pcap], capture_output=True, text=True, timeout=300)
        text = (r.stdout + r.stderr).strip()
        icrc = [line for line in text.splitlines() if "ICRC" in line]
        print(f"rnic-pcap {tag} {side}: {icrc[-1].strip() if icrc else text[-300:]}", flush=True)
        if r.returncode != 0 or "RoCEv2" not in text:
            failures.append(f"rnic-pcap {pcap} ({tag}): exit {r.returncode}")
        else:
            passed += 1


PINGPONG_OK = r"\d+ iters in [0-9.]+ seconds"
PERFTEST_BW_OK = r"^\s*\d+\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+"
PERFTEST_LAT_OK = r"^\s*\d+\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+"

try:
    # ---- jumbo bed: active MTU 4096 ----
    bed("up", "--daemons", "both", "--pcap", "--one-run-dir", "--rnicd", rnicd)
    with open(f"{state}/env") as f:
        env_words = dict(kv.split("=", 1) for kv in f.read().split())
    ip_a = env_words["ip_a"]
    tool("ibv_devices lists both daemons", ["ibv_devices"], [r"^\s+rnic0\s+[0-9a-f]{16}$", r"^\s+rnic1\s+[0-9a-f]{16}$"])
    tool("ibv_devinfo -v", ["ibv_devinfo", "-v", "-d", "rnic0"],
         [r"hca_id:\s+rnic0", r"transport:\s+InfiniBand \(0\)", r"link_layer:\s+Ethernet", r"state:\s+PORT_ACTIVE",
          r"active_mtu:\s+4096 \(5\)", rf"GID\[\s*0\]:\s+::ffff:{re.escape(ip_a)}, RoCE v2",
          r"GID\[\s*1\]:\s+fe80::[0-9a-f:]+, RoCE v2", rf"GID\[\s*2\]:\s+{re.escape(env_words['ip6_a'])}, RoCE v2"])

    iters = ["-n", "10"] if quick else ["-n", "20"]
    sizes = [1, 65536] if quick else [1, 4096, 65536]
    for program in ("ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_srq_pingpong"):
        for mtu in (1024, 4096):
            for size in sizes:
                extra = ["-q", "4"] if program == "ibv_srq_pingpong" else []
                pair(f"{program} -m {mtu} -s {size} -c", program,
                     ["-g", "0", "-m", str(mtu), "-s", str(size), "-c", *iters, *extra], PINGPONG_OK)
    pair("ibv_rc_pingpong -e (events) -s 65536 -c", "ibv_rc_pingpong",
         ["-g", "0", "-e", "-s", "65536", "-c", *iters], PINGPONG_OK)
    # -t: completion timestamps; the program prints receive-completion intervals in device clock
    # cycles (ns here), which must be real intervals, not zero.
    pair("ibv_rc_pingpong -t (completion timestamps)", "ibv_rc_pingpong", ["-g", "0", "-t", "-c", *iters],
         r"Average receive completion clock cycles = [1-9]")
    pair("ibv_srq_pingpong -e (events) -c", "ibv_srq_pingpong", ["-g", "0", "-e", "-c", "-q", "4", *iters], PINGPONG_OK)
    for size in (1, 1024, 4096):
        pair(f"ibv_ud_pingpong -s {size} -c", "ibv_ud_pingpong", ["-g", "0", "-s", str(size), "-c", *iters],
             PINGPONG_OK)

    n = ["-n", "100"] if quick else ["-n", "500"]
    common = ["-x", "0", "-F"]  # -F: no CPU-frequency warning (a VM has no governor)
    pair("ib_write_bw 64 KiB", "ib_write_bw", [*common, "-s", "65536", *n], PERFTEST_BW_OK)
    pair("ib_write_bw -a (2 B .. 8 MiB)", "ib_write_bw", [*common, "-a", "-n", "20"], r"^\s*8388608\s+20\s+", 600)
    pair("ib_send_bw 64 KiB", "ib_send_bw", [*common, "-s", "65536", *n], PERFTEST_BW_OK)
    pair("ib_send_bw -e (events)", "ib_send_bw", [*common, "-e", "-s", "4096", *n], PERFTEST_BW_OK)
    pair("ib_send_bw -m 1024 --use_old_post_send", "ib_send_bw",
         [*common, "-m", "1024", "--use_old_post_send", "-s", "10000", *n], PERFTEST_BW_OK)
    pair("ib_send_bw -c UD", "ib_send_bw", [*common, "-c", "UD", *n], PERFTEST_BW_OK)
    pair("ib_read_bw 64 KiB", "ib_read_bw", [*common, "-s", "65536", *n], PERFTEST_BW_OK)
    pair("ib_atomic_bw -A FETCH_AND_ADD", "ib_atomic_bw", [*common, "-A", "FETCH_AND_ADD", *n], PERFTEST_BW_OK)
    pair("ib_atomic_bw -A CMP_AND_SWAP", "ib_atomic_bw", [*common, "-A", "CMP_AND_SWAP", *n], PERFTEST_BW_OK)
    lat_n = ["-n", "100"]
    pair("ib_send_lat 2 B", "ib_send_lat", [*common, "-s", "2", *lat_n], PERFTEST_LAT_OK)
    pair("ib_write_lat 2 B", "ib_write_lat", [*common, "-s", "2", *lat_n], PERFTEST_LAT_OK)
    pair("ib_read_lat 2 B", "ib_read_lat", [*common, "-s", "2", *lat_n], PERFTEST_LAT_OK)
    pair("ib_atomic_lat", "ib_atomic_lat", [*common, *lat_n], PERFTEST_LAT_OK)
    pair("ib_write_lat -m 1024 -s 8192", "ib_write_lat", [*common, "-m", "1024", "-s", "8192", *lat_n],
         PERFTEST_LAT_OK)
    # RoCEv2 over IPv6: the same programs through the link-local (1) and fd77:: (2) GIDs; the
    # daemons find each other's MAC through neighbour discovery.
    pair("ibv_rc_pingpong -g 2 (IPv6) -s 65536 -c", "ibv_rc_pingpong", ["-g", "2", "-s", "65536", "-c", *iters],
         PINGPONG_OK)
    pair("ibv_ud_pingpong -g 1 (IPv6 link-local) -s 1024 -c", "ibv_ud_pingpong",
         ["-g", "1", "-s", "1024", "-c", *iters], PINGPONG_OK)
    pair("ib_write_bw -x 2 (IPv6) 64 KiB", "ib_write_bw", ["-x", "2", "-F", "-s", "65536", *n], PERFTEST_BW_OK)
    pair("ib_send_lat -x 1 (IPv6 link-local) 2 B", "ib_send_lat", ["-x", "1", "-F", "-s", "2", *lat_n],
         PERFTEST_LAT_OK)
    refuses("ib_write_bw -R (rdma_cm) fails cleanly", ["ib_write_bw", "-d", "rnic0", "-x", "0", "-R"],
            r"rdma_create_event_channel failed|Unable to perform rdma_client function|rdma_cm")
    bed("down")
    check_captures("jumbo")

    # ---- plain bed: the port's own MTU is 1024 ----
    bed("up", "--daemons", "both", "--pcap", "--one-run-dir", "--rnicd", rnicd, mtu="1500")
    tool("ibv_devinfo active_mtu 1024", ["ibv_devinfo", "-d", "rnic1"], [r"active_mtu:\s+1024 \(3\)"])
    pair("ibv_ud_pingpong at the port MTU (1024)", "ibv_ud_pingpong", ["-g", "0", "-s", "1024", "-c", *iters],
         PINGPONG_OK)
    pair("ibv_rc_pingpong -s 65536 at the port MTU", "ibv_rc_pingpong", ["-g", "0", "-s", "65536", "-c", *iters],
         PINGPONG_OK)
    pair("ib_send_bw -c UD at the port MTU", "ib_send_bw", [*common, "-c", "UD", *n], PERFTEST_BW_OK)
    pair("ib_write_bw 64 KiB at MTU 1024", "ib_write_bw", [*common, "-s", "65536", *n], PERFTEST_BW_OK)
    bed("down", mtu="1500")
    check_captures("plain")
except Exception as e:  # a bed that does not come up is a failure, with its reason
    failures.append(str(e))
finally:
    subprocess.run([testbed, "down"], env=base_env, capture_output=True, timeout=60)

print(f"{passed} checks passed")
print("FAILED: " + "; ".join(failures) if failures else "all Debian binaries ran on rnicd")
sys.exit(1 if failures else 0)
