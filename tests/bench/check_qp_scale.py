#!/usr/bin/env python3
"""The short run of qp_scale against a real rnicd on the test bed (one daemon, QPs looped back
to the same device): 256 RC QPs created and brought to RTS, RDMA WRITEs through eight of them
(the first and the last created included) land intact; while they are held in RTS, rnicctl lists
all 256 (the QP list comes in pages: one reply holds ~60) and shows the device's counters and
the last QP's; every QP is destroyed again (the daemon's own object count says so), and the
daemon exits 0. Checks correctness, not speed: the rates are printed, not judged.
Usage: check_qp_scale.py TESTBED RNICD QP_SCALE RNICCTL"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "system"))
from systest import Checks, daemon_exit_status, make_run  # noqa: E402

testbed, rnicd, qp_scale, rnicctl = sys.argv[1:5]
name = f"rnicqs{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.83.0")
checks = Checks(verdict_first=True)
check = checks.check
run = make_run(env)
try:
    run(testbed, "up", "--daemons", "a", "--rnicd", rnicd, timeout=60)
    run_dir = f"{state}/run-a"
    bench_run = subprocess.Popen([qp_scale, "--run-dir", run_dir, "--check", "8", "--hold", "3", "256"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    out = []
    deadline = time.monotonic() + 60
    for line in bench_run.stdout:  # until the QPs are held in RTS
        out.append(line)
        if "holding" in line or time.monotonic() > deadline:
            break
    q = run(rnicctl, "--run-dir", run_dir, "qp", check=False)
    listed = [l for l in q.stdout.splitlines() if l.startswith("link ")]
    check(q.returncode == 0 and len(listed) == 256 and all(" state RTS " in l for l in listed),
          f"rnicctl qp lists the 256 QPs in RTS (exit {q.returncode}, {len(listed)} lines; {q.stderr.strip()})")
    st = run(rnicctl, "--run-dir", run_dir, "stat", check=False)
    check(st.returncode == 0 and "host_control_messages" in st.stdout, f"rnicctl stat answers ({st.stderr.strip()})")
    last = listed[-1].split()[3] if listed else "0"
    one = run(rnicctl, "--run-dir", run_dir, "stat", "qp", last, check=False)
    check(one.returncode == 0 and f"lqpn {last}" in one.stdout and "tx_packets" in one.stdout,
          f"rnicctl stat qp {last} shows the last QP's counters ({one.stderr.strip()})")
    try:
        rest, _ = bench_run.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        bench_run.kill()
        rest, _ = bench_run.communicate()
    out.append(rest)
    text = "".join(out)
    print(text, end="")
    bench = dict(re.findall(r"(\w+)=(\S+)", next((l for l in text.splitlines() if l.startswith("BENCH")), "")))
    check(bench_run.returncode == 0, f"qp_scale 256 exits 0 (got {bench_run.returncode})")
    check(bench.get("n") == "256", "it reports the run of 256 QPs")
    check(bench.get("writes_ok") == "8/8", f"8 WRITEs through 8 of the QPs landed intact ({bench.get('writes_ok')})")
    s = run(rnicctl, "--run-dir", run_dir, "--json", "session", check=False)
    objects = json.loads(s.stdout).get("objects", {}) if s.returncode == 0 else {}
    check(objects.get("qps") == 0, f"the daemon holds no QP afterwards ({objects})")
finally:
    run(testbed, "down", timeout=30, check=False)
rc = daemon_exit_status(state, "a")
check(rc == "0", f"rnicd exits 0 (got {rc})")
sys.exit(checks.finish())
