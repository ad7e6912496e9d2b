#!/usr/bin/env python3
"""The drop-in librdmacm.so.1 at the API level, against one real rnicd on the test bed:
 1. rdmacm_api_test "[api]" (Catch2 over rdma-core's rdma_cma.h and rdma_verbs.h, linked to our
    libraries; both ends of each connection in the one process, on the one device): the channel
    descriptor, RC and UD connections with private data, rejects, synchronous ids, SRQs,
    addresses, options, multicast.
 2. rdmacm_api_test "[death]": SIGKILLs the daemon the bed started; every id on it gets
    DEVICE_REMOVAL.
Usage: check_rdmacm_api.py TESTBED RNICD RDMACM_API_TEST"""
import os
import subprocess
import sys

testbed, rnicd, api_test = sys.argv[1:4]
name = f"rnicca{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.87.0",
           RNIC_TESTBED_NET6="fd87::")
failures = []


def run(args, extra_env, timeout=120):
    print("$ " + " ".join(args), flush=True)
    r = subprocess.run(args, env=dict(env, **extra_env), capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    out = (r.stdout + r.stderr).strip()
    if out:
        print("\n".join(out.splitlines()[-80:]), flush=True)
    if r.returncode != 0:
        failures.append(f"{' '.join(args)} -> {r.returncode}")


try:
    subprocess.run([testbed, "up", "--daemons", "a", "--rnicd", rnicd], env=env, check=True, capture_output=True,
                   timeout=60)
    with open(f"{state}/env") as f:
        bed = dict(kv.split("=", 1) for kv in f.read().split())
    test_env = {"RNIC_RUN_DIR": f"{state}/run-a", "RNIC_TEST_IP": bed["ip_a"], "RNIC_TEST_IP6": bed["ip6_a"]}
    run([api_test, "[api]", "--durations", "yes"], test_env)
    run([api_test, "[death]", "--durations", "yes"], dict(test_env, RNIC_TEST_DAEMON_PIDFILE=f"{state}/rnicd-a.pid"),
        timeout=60)
except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
    failures.append(f"bed: {e}")
finally:
    subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)

print("FAILED: " + "; ".join(failures) if failures else "all rdmacm API checks passed")
sys.exit(1 if failures else 0)
