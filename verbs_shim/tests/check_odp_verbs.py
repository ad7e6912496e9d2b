#!/usr/bin/env python3
"""On-demand paging (explicit and implicit ODP regions, ibv_advise_mr) through our libibverbs
between two real rnicd: the bed
runs both daemons with one socket directory (rnic0 in namespace A, rnic1 in B), so
odp_verbs_test opens both devices and connects QPs across the veth. Afterwards both daemons
must still be running (the error cases must not have hurt them), and rnic1's counters must
show the accesses served through the test's address space and the ones that hit unmapped pages.
Then Debian's unmodified ibv_rc_pingpong through rnic-run with -o (an ODP buffer), -o -P
(prefetched with ibv_advise_mr) and -O (implicit ODP), server on rnic0 and client on rnic1.
Usage: check_odp_verbs.py TESTBED RNICD ODP_VERBS_TEST RNICCTL RNIC_RUN"""
import json
import subprocess
import sys
import time

from two_rnicd_bed import TwoRnicdBed

testbed, rnicd, test, rnicctl, rnic_run = sys.argv[1:6]
bed = TwoRnicdBed(testbed, rnicd, "haodp", "10.75.16", "fd75:16::")
state, env = bed.state, bed.env
failures = []

try:
    bed.up()
    rc = bed.run_catch2(test, sys.argv[6:])
    if rc != 0:
        failures.append(f"odp_verbs_test -> {rc}")
    run_env = bed.run_env
    for flags in (["-o"], ["-o", "-P"], ["-O"]):
        common = ["-g", "0", *flags, "-n", "20", "-s", "8192"]
        server = subprocess.Popen([testbed, "exec", "a", rnic_run, "ibv_rc_pingpong", "-d", "rnic0", *common],
                                  env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(0.5)
        c = subprocess.run([testbed, "exec", "a", rnic_run, "ibv_rc_pingpong", "-d", "rnic1", *common, "127.0.0.1"],
                           env=run_env, capture_output=True, text=True, timeout=60)
        try:
            s_out, _ = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            s_out, _ = server.communicate()
        ok = c.returncode == 0 and server.returncode == 0 and "20 iters in" in c.stdout and "20 iters in" in s_out
        print(f"ibv_rc_pingpong {' '.join(flags)}: {'ok' if ok else 'FAILED'} {c.stdout.strip().splitlines()[-1:]}",
              flush=True)
        if not ok:
            failures.append(f"ibv_rc_pingpong {' '.join(flags)}: client {c.returncode} {(c.stdout + c.stderr)[-300:]!r}"
                            f" server {server.returncode} {s_out[-300:]!r}")
    failures += bed.dead_daemons()
    s = subprocess.run([rnicctl, "--run-dir", f"{state}/run", "--json", "-d", "rnic1", "stat"], env=env,
                       capture_output=True, text=True, timeout=15)
    stat = json.loads(s.stdout) if s.returncode == 0 else {}
    odp = {k: v for k, v in stat.items() if k.startswith("odp_")}
    print(f"rnic1 {odp}", flush=True)
    # The target side: 40,000 + 5,000 bytes on the explicit region, 8,192 + 100 + 64 on the
    # implicit one; the WRITE and the READ to the unmapped page failed.
    if not (odp.get("odp_bytes", 0) >= 40000 + 5000 + 8192 + 100 + 64 and odp.get("odp_faults", 0) >= 2):
        failures.append(f"rnic1's ODP counters do not show the test's accesses: {odp} ({s.stderr.strip()})")
except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
    failures.append(f"bed: {e} {getattr(e, 'stderr', '')}")
finally:
    bed.down()

print("FAILED: " + "; ".join(failures) if failures else "all ODP verbs checks passed")
sys.exit(1 if failures else 0)
