#!/usr/bin/env python3
"""A hostile ODP client must stall only itself (docs/host_interface.md, "On-demand regions"):
odp_hostile_test (as root) registers ODP regions over userfaultfd pages it never serves, has a
WRITE land there (rnic1's worker blocks) and a SEND gather from there (rnic0's worker blocks).
Meanwhile Debian's ibv_rc_pingpong through rnic-run runs between the same two daemons and must
complete, and rnicctl must answer each daemon within 1 s throughout. The hostile QPs must end in
error within the daemons' time bound (odp_hostile_test checks the statuses), the daemons must
count it (odp_timeouts) and log it, and once the hostile process exits its stuck workers must be
gone (host_odp_workers back to 0) with both daemons alive.
Usage: check_odp_hostile.py TESTBED RNICD ODP_HOSTILE_TEST RNICCTL RNIC_RUN"""
import json
import os
import subprocess
import sys
import threading
import time

from two_rnicd_bed import TwoRnicdBed

testbed, rnicd, test, rnicctl, rnic_run = sys.argv[1:6]
if os.geteuid() != 0:
    print("SKIP: needs root (a userfaultfd that catches the daemon's accesses)")
    sys.exit(0)
bed = TwoRnicdBed(testbed, rnicd, "odph", "10.61.0", "fd61:0::")
state, env = bed.state, bed.env
failures = []


def stat(dev, timeout=5):
    t0 = time.monotonic()
    r = subprocess.run([rnicctl, "--run-dir", f"{state}/run", "--json", "-d", dev, "stat"], env=env,
                       capture_output=True, text=True, timeout=timeout)
    took = time.monotonic() - t0
    return (json.loads(r.stdout) if r.returncode == 0 else None), took


class Prober(threading.Thread):
    """rnicctl against both daemons every 100 ms; the slowest answer."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop, self.slowest, self.failed, self.count = False, 0.0, [], 0

    def run(self):
        while not self.stop:
            for dev in ("rnic0", "rnic1"):
                try:
                    s, took = stat(dev, timeout=5)
                    self.count += 1
                    self.slowest = max(self.slowest, took)
                    if s is None:
                        self.failed.append(f"{dev}: rnicctl failed")
                except subprocess.TimeoutExpired:
                    self.failed.append(f"{dev}: rnicctl took more than 5 s")
            time.sleep(0.1)


def pingpong(n):
    common = ["-g", "0", "-n", str(n), "-s", "4096"]
    server = subprocess.Popen([testbed, "exec", "a", rnic_run, "ibv_rc_pingpong", "-d", "rnic0", *common],
                              env=bed.run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.5)
    c = subprocess.run([testbed, "exec", "a", rnic_run, "ibv_rc_pingpong", "-d", "rnic1", *common, "127.0.0.1"],
                       env=bed.run_env, capture_output=True, text=True, timeout=60)
    try:
        s_out, _ = server.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        s_out, _ = server.communicate()
    ok = c.returncode == 0 and server.returncode == 0 and f"{n} iters in" in c.stdout and f"{n} iters in" in s_out
    print(f"ibv_rc_pingpong -n {n}: {'ok' if ok else 'FAILED'} {c.stdout.strip().splitlines()[-1:]}", flush=True)
    return None if ok else f"ibv_rc_pingpong: client {c.returncode} {(c.stdout + c.stderr)[-300:]!r} " \
                           f"server {server.returncode} {s_out[-300:]!r}"


hostile = None
prober = Prober()
hold = f"/tmp/odph-hold-{os.getpid()}"
try:
    bed.up()
    open(hold, "w").close()
    prober.start()
    hostile = subprocess.Popen([test], env=dict(bed.run_env, ODP_HOSTILE_HOLD=hold), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    lines = []

    def read_until(word, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            line = hostile.stdout.readline()
            if not line:
                return False
            lines.append(line.rstrip())
            print("hostile: " + line.rstrip(), flush=True)
            if line.startswith(word):
                return True
        return False

    if not read_until("STALLED", 30):
        if any(l.startswith("NO-UFFD") for l in lines):
            print("SKIP: " + next(l for l in lines if l.startswith("NO-UFFD")), flush=True)
            hostile.communicate(timeout=30)
            bed.down()
            sys.exit(0)
        failures.append("the hostile client did not get to post its accesses")
    # While both workers are stuck in the never-served faults (and then the QPs in error).
    err = pingpong(200)
    if err:
        failures.append(err)
    if not read_until("HOLDING", 30):
        failures.append("the hostile client's QPs did not end in error in time: " + " | ".join(lines[-5:]))
    for dev in ("rnic0", "rnic1"):
        s, _ = stat(dev)
        c = s or {}
        print(f"{dev} while the hostile client holds: " + ", ".join(
            f"{k}={c.get(k)}" for k in ("odp_waits", "odp_pending", "odp_rnr_naks", "odp_timeouts", "host_odp_workers",
                                        "host_odp_wait_timeouts", "host_odp_busy_pending")), flush=True)
        if not c.get("odp_timeouts"):
            failures.append(f"{dev}: no odp_timeouts counted")
        if c.get("host_odp_workers") != 1:
            failures.append(f"{dev}: host_odp_workers {c.get('host_odp_workers')} while the hostile client lives, not 1")
    err = pingpong(100)  # the daemons still serve, the stuck workers still there
    if err:
        failures.append(err)
    os.unlink(hold)
    try:
        out, _ = hostile.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        hostile.kill()
        out, _ = hostile.communicate()
        failures.append("the hostile client did not exit")
    print("\n".join("hostile: " + l for l in out.strip().splitlines()[-20:]), flush=True)
    if hostile.returncode != 0:
        failures.append(f"odp_hostile_test -> {hostile.returncode}")
    # Its workers are released by its exit (its userfaultfd goes away).
    for dev in ("rnic0", "rnic1"):
        workers = None
        for _ in range(50):
            s, _ = stat(dev)
            workers = (s or {}).get("host_odp_workers"), (s or {}).get("host_odp_workers_stuck")
            if workers == (0, 0):
                break
            time.sleep(0.1)
        print(f"{dev} after the hostile client's exit: host_odp_workers, _stuck = {workers}", flush=True)
        if workers != (0, 0):
            failures.append(f"{dev}: workers left after the hostile client exited: {workers}")
    prober.stop = True
    prober.join(timeout=10)
    print(f"rnicctl: {prober.count} answers, slowest {prober.slowest:.3f} s", flush=True)
    if prober.slowest > 1.0 or prober.failed:
        failures.append(f"rnicctl slow or failing: slowest {prober.slowest:.3f} s {prober.failed[:3]}")
    for side in ("a", "b"):
        try:
            with open(f"{state}/rnicd-{side}.log") as f:
                logged = [l for l in f if "on-demand access stayed pending" in l]
            print(f"rnicd {side} log: {logged[:2]}", flush=True)
            if not logged:
                failures.append(f"rnicd {side} logged no ODP timeout line")
        except OSError as e:
            print(f"rnicd {side} log unreadable: {e}")
    failures += bed.dead_daemons()
except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
    failures.append(f"bed: {e} {getattr(e, 'stderr', '')}")
finally:
    prober.stop = True
    if hostile and hostile.poll() is None:
        hostile.kill()
    if os.path.exists(hold):
        os.unlink(hold)
    bed.down()

print("FAILED: " + "; ".join(failures) if failures else "the hostile ODP client stalled only itself")
sys.exit(1 if failures else 0)
