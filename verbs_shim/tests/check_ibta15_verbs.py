#!/usr/bin/env python3
"""IBTA 1.5 verbs (ATOMIC_WRITE, FLUSH) through our libibverbs between two real rnicd: the bed
runs both daemons with one socket directory (rnic0 in namespace A, rnic1 in B), so
ibta15_verbs_test opens both devices and connects QPs across the veth. Afterwards both daemons
must still be running (the error cases must not have hurt them). Both daemons capture; after
the bed is down, rnic-pcap reads both captures: every frame's ICRC sound, and RC_ATOMIC_WRITE,
RC_FLUSH and their empty RC_RDMA_READ_RESPONSE_ONLY answers present.
Usage: check_ibta15_verbs.py TESTBED RNICD IBTA15_VERBS_TEST RNIC_PCAP"""
import json
import subprocess
import sys

from two_rnicd_bed import TwoRnicdBed

testbed, rnicd, test, rnic_pcap = sys.argv[1:5]
bed = TwoRnicdBed(testbed, rnicd, "ha15v", "10.75.15", "fd75:15::", pcap=True)
state = bed.state
failures = []

try:
    bed.up()
    rc = bed.run_catch2(test, sys.argv[5:])
    if rc != 0:
        failures.append(f"ibta15_verbs_test -> {rc}")
    failures += bed.dead_daemons()
except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
    failures.append(f"bed: {e} {getattr(e, 'stderr', '')}")
finally:
    bed.down()

expected = {"RC_ATOMIC_WRITE", "RC_FLUSH", "RC_RDMA_READ_RESPONSE_ONLY"}
for side in "ab":
    pcap = f"{state}/{side}.pcap"
    r = subprocess.run([rnic_pcap, "--quiet", "--json", pcap], capture_output=True, text=True, timeout=120)
    try:
        f = json.loads(r.stdout)["files"][0]
    except (ValueError, KeyError, IndexError):
        failures.append(f"rnic-pcap {pcap}: exit {r.returncode}, unreadable output {r.stderr[-300:]!r}")
        continue
    missing = sorted(expected - set(f["histogram"]))
    print(f"rnic-pcap {side}: {f['frames']} frames, {f['rocev2']} RoCEv2, ICRC ok {f['icrc_ok']}, "
          f"{len(f['failed'])} failed; " + ", ".join(f"{k} {f['histogram'][k]}" for k in sorted(expected & set(f["histogram"]))),
          flush=True)
    if r.returncode != 0 or f["failed"] or f["rocev2"] == 0 or f["icrc_ok"] != f["rocev2"] or missing:
        failures.append(f"rnic-pcap {pcap}: exit {r.returncode}, {f['rocev2']} RoCEv2 frames, failed "
                        f"{f['failed'][:10]}, opcodes missing {missing}")

print("FAILED: " + "; ".join(failures) if failures else "all IBTA 1.5 verbs checks passed")
sys.exit(1 if failures else 0)
