#!/usr/bin/env python3
"""Capture rotation in rnicd itself: two daemons on the test bed with --pcap FILE --pcap-max-mb 1,
4 MiB of RDMA WRITEs from A to B through the rings (raw_host_client.py), then SIGTERM. For each
side: FILE, FILE.1, FILE.2, ... with no gap, none over 1 MiB, each a pcap rnic-pcap reads with
every ICRC ok; the frames of all files add up to the daemon's `captured` counter (rnicctl's
before the stop and the exit log's after), the files follow each other in time, and every WRITE
PSN is in exactly one file (no frame lost or written twice at a rotation).
Usage: check_capture_rotation.py TESTBED RNICD RNICCTL RNIC_PCAP"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from raw_host_client import Sess  # noqa: E402
from systest import Checks, daemon_exit_status, exit_counters, make_run  # noqa: E402

testbed, rnicd, rnicctl, rnic_pcap = sys.argv[1:5]
name = f"rnicr{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.94.0")
checks = Checks(verdict_first=True)
check, failures = checks.check, checks.failures
run = make_run(env)

IBV_WR_RDMA_WRITE = 0
WRITES = 1024  # of 4096 bytes: 4 MiB, four files' worth and more on each side
MAX_FILE = 1 << 20


def capture_files(side):
    """FILE, FILE.1, ... in order, and any stray FILE.N past the first gap (there must be none)."""
    base = f"{state}/{side}.pcap"
    files, i = [], 0
    while os.path.exists(base if i == 0 else f"{base}.{i}"):
        files.append(base if i == 0 else f"{base}.{i}")
        i += 1
    strays = sorted(f for f in os.listdir(state) if f.startswith(f"{side}.pcap.")
                    and f"{state}/{f}" not in files)
    return files, strays


def functional():
    run(testbed, "up", "--daemons", "both", "--pcap", "--rnicd", rnicd, "--", "--pcap-max-mb", "1", timeout=60)
    with open(f"{state}/env") as f:
        e = dict(kv.split("=", 1) for line in f for kv in line.split())
    a = Sess(e["sock_a"])
    b = Sess(e["sock_b"])
    a.connect(b.qpn, b.gid)
    b.connect(a.qpn, a.gid)
    a.buf[0:4096] = os.urandom(4096)
    cqes = a.run_sends([(i, IBV_WR_RDMA_WRITE, 0, 4096, b.addr, b.rkey) for i in range(WRITES)], timeout=120)
    check(len(cqes) == WRITES and all(c[1] == 0 for c in cqes), f"{len(cqes)} of {WRITES} WRITEs completed, all successful")
    check(bytes(b.buf[0:4096]) == bytes(a.buf[0:4096]), "the data landed in B")

    before = {}
    for side in "ab":
        r = run(rnicctl, "--run-dir", f"{state}/run-{side}", "--json", "stat", timeout=15)
        before[side] = json.loads(r.stdout)
    a.s.close()
    b.s.close()
    run(testbed, "down", timeout=60)

    for side in "ab":
        rc = daemon_exit_status(state, side)
        check(rc == "0", f"{side}: rnicd exits 0 (got {rc})")
        captured = before[side]["captured"]
        final = exit_counters(state, side)
        check(final.get("captured") == captured, f"{side}: captured {captured} before the stop, {final.get('captured')} at exit")
        files, strays = capture_files(side)
        sizes = [os.path.getsize(f) for f in files]
        print(f"{side}: {len(files)} files, sizes {sizes}")
        check(len(files) >= 4 and not strays, f"{side}: {side}.pcap and {len(files) - 1} rotations, no gap ({strays})")
        check(all(s <= MAX_FILE for s in sizes), f"{side}: no file over 1 MiB")
        log = open(f"{state}/rnicd-{side}.log").read()
        check(f"capture: {captured} frames in {len(files)} file(s)" in log, f"{side}: the exit log names {len(files)} files")

        total, psns, times = 0, [], []
        for path in files:
            r = run(rnic_pcap, "--json", path, check=False, timeout=60)
            doc = json.loads(r.stdout) if r.stdout.startswith("{") else {"files": [{}]}
            f = doc["files"][0]
            frames = f.get("frames", -1)
            ok = (r.returncode == 0 and frames > 0 and f.get("icrc_ok") == frames and f.get("rocev2") == frames
                  and not f.get("failed"))
            check(ok, f"{os.path.basename(path)}: {frames} frames, {f.get('icrc_ok')} ICRC ok, all RoCEv2")
            total += max(frames, 0)
            pkts = f.get("packets", [])
            times.append((pkts[0]["time_ns"], pkts[-1]["time_ns"]) if pkts else (0, 0))
            psns += [p["psn"] for p in pkts if p["opcode_name"] == "RC_RDMA_WRITE_ONLY"]
        check(total == captured, f"{side}: the files hold {total} frames, the daemon captured {captured}")
        check(all(times[i][1] <= times[i + 1][0] for i in range(len(times) - 1)),
              f"{side}: each file starts where the previous one ended")
        resent = before["a"]["retransmitted_packets"]  # A's WRITEs sent again are in both captures again
        check(sorted(set(psns)) == list(range(WRITES)) and len(psns) == WRITES + resent,
              f"{side}: every WRITE PSN once across the files ({len(psns)} WRITE frames, {resent} retransmitted)")


try:
    try:
        functional()
    except Exception as exc:
        import traceback
        traceback.print_exc(file=sys.stdout)
        failures.append(f"{type(exc).__name__}: {exc}")
    finally:
        run(testbed, "down", timeout=60, check=False)
        subprocess.run(["rm", "-rf", state])
finally:
    status = checks.finish()
sys.exit(status)
