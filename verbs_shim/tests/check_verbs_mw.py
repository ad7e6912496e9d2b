#!/usr/bin/env python3
"""Memory windows through the drop-in libibverbs.so.1 between two real rnicd: the test bed starts
one daemon per namespace (--one-run-dir: rnic0 and rnic1 side by side, as one host with two
RNICs), and verbs_mw_test drives both over their control sockets; the frames cross the veth.
Usage: check_verbs_mw.py TESTBED RNICD VERBS_MW_TEST"""
import os
import subprocess
import sys

testbed, rnicd, mw_test = sys.argv[1:4]
name = f"hwmw{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.74.3",
           RNIC_TESTBED_NET6="fd74:3::")
rc = 1
try:
    up = subprocess.run([testbed, "up", "--daemons", "both", "--one-run-dir", "--rnicd", rnicd], env=env,
                        capture_output=True, text=True, timeout=90)
    print((up.stdout + up.stderr).strip(), flush=True)
    if up.returncode != 0:
        sys.exit(1)
    r = subprocess.run([mw_test, "--durations", "yes"], env=dict(env, RNIC_RUN_DIR=f"{state}/run"),
                       capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    print((r.stdout + r.stderr).strip(), flush=True)
    rc = r.returncode
finally:
    subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)
print("memory windows between two rnicd: " + ("passed" if rc == 0 else "FAILED"))
sys.exit(0 if rc == 0 else 1)
