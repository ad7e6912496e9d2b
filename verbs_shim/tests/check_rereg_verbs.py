#!/usr/bin/env python3
"""ibv_rereg_mr through our libibverbs between two real rnicd: the bed runs both daemons with one
socket directory (rnic0 in namespace A, rnic1 in B), so verbs_rereg_test opens both devices and
connects QPs across the veth. Afterwards both daemons must still be running (the refused
requests must not have hurt them) and rnic1's memory counters must show the re-registrations.
Usage: check_rereg_verbs.py TESTBED RNICD VERBS_REREG_TEST RNICCTL [catch2 args]"""
import json
import subprocess
import sys

from two_rnicd_bed import TwoRnicdBed

testbed, rnicd, test, rnicctl = sys.argv[1:5]
bed = TwoRnicdBed(testbed, rnicd, "rr", "10.81.0", "fd81::")
state = bed.state
failures = []

try:
    bed.up()
    rc = bed.run_catch2(test, sys.argv[5:])
    if rc != 0:
        failures.append(f"verbs_rereg_test -> {rc}")
    failures += bed.dead_daemons()
    s = subprocess.run([rnicctl, "--run-dir", f"{state}/run", "--json", "-d", "rnic1", "stat"], env=bed.env,
                       capture_output=True, text=True, timeout=15)
    stat = json.loads(s.stdout) if s.returncode == 0 else {}
    print(f"rnic1 mr_reregistrations={stat.get('mr_reregistrations')}", flush=True)
    if len(sys.argv) == 5 and not stat.get("mr_reregistrations", 0) >= 8:
        failures.append(f"rnic1 counts too few re-registrations: {stat.get('mr_reregistrations')} ({s.stderr.strip()})")
except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
    failures.append(f"bed: {e} {getattr(e, 'stderr', '')}")
finally:
    bed.down()
    if not failures:  # the daemons' logs stay for a failure
        subprocess.run(["rm", "-rf", state])

print("FAILED: " + "; ".join(failures) if failures else "all ibv_rereg_mr checks passed")
sys.exit(1 if failures else 0)
