#!/usr/bin/env python3
"""IBTA 1.5 verbs (ATOMIC_WRITE, FLUSH) through our libibverbs between two real rnicd: the bed
runs both daemons with one socket directory (rnic0 in namespace A, rnic1 in B), so
ibta15_verbs_test opens both devices and connects QPs across the veth. Afterwards both daemons
must still be running (the error cases must not have hurt them).
Usage: check_ibta15_verbs.py TESTBED RNICD IBTA15_VERBS_TEST"""
import os
import subprocess
import sys

testbed, rnicd, test = sys.argv[1:4]
name = f"ha15v{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.75.15",
           RNIC_TESTBED_NET6="fd75:15::")
failures = []


def alive(side):
    try:
        with open(f"{state}/rnicd-{side}.pid") as f:
            os.kill(int(f.read().strip()), 0)
        return True
    except (OSError, ValueError):
        return False


try:
    subprocess.run([testbed, "up", "--daemons", "both", "--one-run-dir", "--rnicd", rnicd], env=env, check=True,
                   capture_output=True, timeout=60)
    args = [test, "--durations", "yes"] + sys.argv[4:]
    print("$ " + " ".join(args), flush=True)
    r = subprocess.run(args, env=dict(env, RNIC_RUN_DIR=f"{state}/run"), capture_output=True, text=True,
                       timeout=240, stdin=subprocess.DEVNULL)
    out = (r.stdout + r.stderr).strip()
    if out:
        print("\n".join(out.splitlines()[-80:]), flush=True)
    if r.returncode != 0:
        failures.append(f"ibta15_verbs_test -> {r.returncode}")
    for side in ("a", "b"):
        if not alive(side):
            failures.append(f"rnicd {side} died")
except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
    failures.append(f"bed: {e} {getattr(e, 'stderr', '')}")
finally:
    subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)

print("FAILED: " + "; ".join(failures) if failures else "all IBTA 1.5 verbs checks passed")
sys.exit(1 if failures else 0)
