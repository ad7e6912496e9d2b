#!/usr/bin/env python3
"""Debian's libfabric 1.17 verbs provider (libfabric-bin) between two rnicd, through rnic-run:
 1. fi_info -p verbs lists the domains rnic0 (FI_EP_MSG over rdma_cm) and rnic0-dgram (FI_EP_DGRAM).
 2. fi_pingpong -p verbs -e msg, server in namespace B, client in A to B's rnicd address: every
    size from 64 B to 1 MiB completes on both sides, and rnicd A's RoCE frame counters account for
    the transfers.
The verbs provider keeps only devices whose rdma_cm address is also a kernel interface address
(getifaddrs), and fi_pingpong's TCP control channel goes to the peer's RDMA address: the bed runs
with --oob --oob-rnic-ips, which puts the rnicd addresses on the side-channel link's kernel
interfaces (rnicd's own link stays the kernel's no-address, RoCE-dropping link); docs/verbs_shim.md
explains the choice.
Usage: check_libfabric.py TESTBED RNICD RNIC_RUN RNICCTL
Exit 0 pass, 1 failure, 77 skip (libfabric-bin not installed)."""
import os
import re
import shutil
import subprocess
import sys
import time

testbed, rnicd, rnic_run, rnicctl = sys.argv[1:5]
name = f"hsf{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.71.6",
           RNIC_TESTBED_NET6="fd71:6::", RNIC_TESTBED_OOB_NET="10.72.6")
env.pop("LD_PRELOAD", None)
for k in list(env):
    if k.startswith("FI_"):
        del env[k]
failures = []
PORT = 47592  # fi_pingpong's control port
SIZES = ["64", "256", "1k", "4k", "64k", "1m"]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def ns(side, args, run_dir):
    return [testbed, "exec", side, rnic_run, "--run-dir", run_dir] + args


def roce_frames(run_dir):
    r = subprocess.run([rnicctl, "--run-dir", run_dir, "stat"], capture_output=True, text=True, timeout=30)
    counts = dict(re.findall(r"^\s+(roce_tx|roce_rx) (\d+)$", r.stdout, re.M))
    return int(counts.get("roce_tx", 0)), int(counts.get("roce_rx", 0))


def wait_listening(port, deadline_s=15):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        r = subprocess.run([testbed, "exec", "b", "ss", "-ltnH"], env=env, capture_output=True, text=True, timeout=10)
        if re.search(rf":{port}\b", r.stdout):
            return True
        time.sleep(0.2)
    return False


def rows(text):
    """fi_pingpong's table: {size: (MB/s, usec/xfer)}"""
    out = {}
    for m in re.finditer(r"^(\d+[km]?)\s+(\d+)\s+=(\d+)\s+\S+\s+\S+s\s+([\d.]+)\s+([\d.]+)", text, re.M):
        if m.group(2) == m.group(3):
            out[m.group(1)] = (float(m.group(4)), float(m.group(5)))
    return out


def main():
    if shutil.which("fi_info") is None or shutil.which("fi_pingpong") is None:
        print("SKIP: libfabric-bin is not installed (tools/setup.sh installs it)")
        return 77
    try:
        up = subprocess.run([testbed, "up", "--daemons", "both", "--oob", "--oob-rnic-ips", "--rnicd", rnicd],
                            env=env, capture_output=True, text=True, timeout=60)
        if not check(up.returncode == 0, "testbed up --daemons both --oob --oob-rnic-ips"):
            print(up.stdout + up.stderr)
            return 1
        with open(f"{state}/env") as fh:
            bed = dict(kv.split("=", 1) for kv in fh.read().split())
        run_a, run_b = f"{state}/run-a", f"{state}/run-b"

        r = subprocess.run(ns("a", ["fi_info", "-p", "verbs"], run_a), env=env, capture_output=True, text=True,
                           timeout=60)
        print(r.stdout[:1500], r.stderr[-500:], flush=True)
        check(r.returncode == 0 and re.search(r"domain: rnic0\n\s+version: [\d.]+\n\s+type: FI_EP_MSG", r.stdout)
              is not None, "fi_info -p verbs: domain rnic0, FI_EP_MSG")
        check(re.search(r"domain: rnic0-dgram\n\s+version: [\d.]+\n\s+type: FI_EP_DGRAM", r.stdout) is not None,
              "fi_info -p verbs: domain rnic0-dgram, FI_EP_DGRAM")

        args = ["fi_pingpong", "-p", "verbs", "-e", "msg", "-I", "100"]
        server = subprocess.Popen(ns("b", args, run_b), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, stdin=subprocess.DEVNULL)
        try:
            check(wait_listening(PORT), "fi_pingpong server listening in B")
            before = roce_frames(run_a)
            client = subprocess.run(ns("a", args + [bed["ip_b"]], run_a), env=env, capture_output=True, text=True,
                                    timeout=240, stdin=subprocess.DEVNULL)
            after = roce_frames(run_a)
            try:
                server_out, _ = server.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server_out, _ = server.communicate()
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        print(client.stdout + client.stderr[-1500:], flush=True)
        got_c, got_s = rows(client.stdout), rows(server_out)
        check(client.returncode == 0 and sorted(got_c) == sorted(SIZES),
              f"fi_pingpong client: every size {SIZES} completed (rc {client.returncode}, got {sorted(got_c)})")
        check(server.returncode == 0 and sorted(got_s) == sorted(SIZES),
              f"fi_pingpong server: every size completed (rc {server.returncode}, got {sorted(got_s)})")
        if server.returncode != 0:
            print(server_out[-1500:])
        tx, rx = after[0] - before[0], after[1] - before[1]
        # 100 exchanges of each size, 1 MiB ones in 4096-byte frames: thousands of frames each way.
        check(tx >= 100 * 256 and rx >= 100 * 256, f"rnicd A carried the transfers: {tx} frames sent, {rx} received")
        print("\nlibfabric 1.17 fi_pingpong -p verbs -e msg between two rnicd (client A, server B)")
        print(f"{'size':>6} {'MB/s':>9} {'usec/xfer':>10}")
        for size in SIZES:
            if size in got_c:
                print(f"{size:>6} {got_c[size][0]:>9.2f} {got_c[size][1]:>10.2f}")
    finally:
        subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)
    return 1 if failures else 0


if __name__ == "__main__":
    rc = main()
    if rc != 77:
        print("FAILED: " + "; ".join(failures) if failures else "all libfabric checks passed")
    sys.exit(rc)
