#!/usr/bin/env python3
"""The drop-in libibverbs.so.1 at the verbs level, against one real rnicd on the test bed:
 1. verbs_strings_probe (built against the system libibverbs) prints every string and rate
    conversion; run once with rdma-core's library and once with ours, the outputs must match.
 2. verbs_api_test "[api]" (Catch2 over rdma-core's verbs.h, linked to our library): devices,
    attributes, errno values, both post APIs, events, UD/GRH, SRQ.
 3. verbs_api_test "[death]": SIGKILLs the daemon the bed started and checks error completions,
    IBV_EVENT_DEVICE_FATAL and EIO.
 4. verbs_fidelity_test "[fidelity]" (before the daemon dies): rxe's behaviour (posting per QP
    state, query attributes, cq_ex accessors, the ibv_wr_* API; docs/fidelity.md).
 5. `ibv_devinfo -v` (Debian's, over our library) against Linux rxe's, captured in the interop VM
    (tests/interop/data/rxe-devinfo-v-6.1.txt), field by field: every difference must be one
    tests/interop/devinfo_fidelity.py allows, with its reason (docs/fidelity.md).
Usage: check_verbs_api.py TESTBED RNICD VERBS_API_TEST STRINGS_PROBE LIB_DIR FIDELITY_TEST"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "interop"))
import devinfo_fidelity  # noqa: E402

testbed, rnicd, api_test, probe, lib_dir, fidelity_test = sys.argv[1:7]
name = f"rnicva{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.83.0")
failures = []


def run(args, extra_env=None, timeout=120, check=True):
    print("$ " + " ".join(args), flush=True)
    r = subprocess.run(args, env=dict(env, **(extra_env or {})), capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    out = (r.stdout + r.stderr).strip()
    if out:
        print("\n".join(out.splitlines()[-60:]), flush=True)
    if check and r.returncode != 0:
        failures.append(f"{' '.join(args)} -> {r.returncode}")
    return r


theirs = subprocess.run([probe], capture_output=True, text=True, timeout=30, env=dict(os.environ, LD_LIBRARY_PATH=""))
ours = subprocess.run([probe], capture_output=True, text=True, timeout=30,
                      env=dict(os.environ, LD_LIBRARY_PATH=lib_dir))
if theirs.returncode != 0 or ours.returncode != 0 or theirs.stdout != ours.stdout:
    diff = [f"rdma-core: {a!r} ours: {b!r}" for a, b in zip(theirs.stdout.splitlines(), ours.stdout.splitlines())
            if a != b]
    failures.append(f"strings differ from rdma-core's ({len(diff)} lines): {diff[:5]}")
else:
    print(f"strings and rate tables: {len(ours.stdout.splitlines())} lines identical to rdma-core's", flush=True)

try:
    run([testbed, "up", "--daemons", "a", "--rnicd", rnicd], timeout=60)
    with open(f"{state}/env") as f:
        bed = dict(kv.split("=", 1) for kv in f.read().split())
    test_env = {"RNIC_RUN_DIR": f"{state}/run-a", "RNIC_TEST_IP": bed["ip_a"]}
    run([api_test, "[api]", "--durations", "yes"], test_env)
    run([fidelity_test, "[fidelity]", "--durations", "yes"], test_env)
    r = run(["ibv_devinfo", "-v", "-d", "rnic0"], dict(test_env, LD_LIBRARY_PATH=lib_dir))
    with open(os.path.join(HERE, "..", "..", "tests", "interop", "data", "rxe-devinfo-v-6.1.txt")) as f:
        problems, allowed, _ = devinfo_fidelity.compare(f.read(), r.stdout)
    print(f"ibv_devinfo -v against rxe's: {allowed} documented differences, {len(problems)} unexplained", flush=True)
    if r.returncode != 0 or problems:
        failures.append(f"ibv_devinfo -v differs from rxe's: {problems}")
    run([api_test, "[death]", "--durations", "yes"],
        dict(test_env, RNIC_TEST_DAEMON_PIDFILE=f"{state}/rnicd-a.pid"), timeout=60)
finally:
    subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)

print("FAILED: " + "; ".join(failures) if failures else "all verbs API checks passed")
sys.exit(1 if failures else 0)
