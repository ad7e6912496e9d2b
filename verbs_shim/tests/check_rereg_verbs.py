#!/usr/bin/env python3
"""ibv_rereg_mr through our libibverbs between two real rnicd: the bed runs both daemons with one
socket directory (rnic0 in namespace A, rnic1 in B), so verbs_rereg_test opens both devices and
connects QPs across the veth. Afterwards both daemons must still be running (the refused
requests must not have hurt them) and rnic1's memory counters must show the re-registrations.
Usage: check_rereg_verbs.py TESTBED RNICD VERBS_REREG_TEST RNICCTL [catch2 args]"""
import json
import os
import subprocess
import sys

testbed, rnicd, test, rnicctl = sys.argv[1:5]
name = f"rr{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.81.0",
           RNIC_TESTBED_NET6="fd81::")
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
    args = [test, "--durations", "yes"] + sys.argv[5:]
    print("$ " + " ".join(args), flush=True)
    r = subprocess.run(args, env=dict(env, RNIC_RUN_DIR=f"{state}/run"), capture_output=True, text=True,
                       timeout=240, stdin=subprocess.DEVNULL)
    out = (r.stdout + r.stderr).strip()
    if out:
        print("\n".join(out.splitlines()[-80:]), flush=True)
    if r.returncode != 0:
        failures.append(f"verbs_rereg_test -> {r.returncode}")
    for side in ("a", "b"):
        if not alive(side):
            failures.append(f"rnicd {side} died")
    s = subprocess.run([rnicctl, "--run-dir", f"{state}/run", "--json", "-d", "rnic1", "stat"], env=env,
                       capture_output=True, text=True, timeout=15)
    stat = json.loads(s.stdout) if s.returncode == 0 else {}
    print(f"rnic1 mr_reregistrations={stat.get('mr_reregistrations')}", flush=True)
    if len(sys.argv) == 5 and not stat.get("mr_reregistrations", 0) >= 8:
        failures.append(f"rnic1 counts too few re-registrations: {stat.get('mr_reregistrations')} ({s.stderr.strip()})")
except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
    failures.append(f"bed: {e} {getattr(e, 'stderr', '')}")
finally:
    subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)
    if not failures:  # the daemons' logs stay for a failure
        subprocess.run(["rm", "-rf", state])

print("FAILED: " + "; ".join(failures) if failures else "all ibv_rereg_mr checks passed")
sys.exit(1 if failures else 0)
