#!/usr/bin/env python3
"""rnicd --home-cpu on the real bed (docs/daemon.md, polling policy 8).

tools/testbed.sh gives both daemons of `--daemons both` the same home core. Each poll loop must
live there while idle, may run on every CPU it was allowed during a stream (a 64 KiB
ib_write_bw), and be home again once the stream is over; moves come in pairs. With
RNIC_TESTBED_HOME_CPU=none the loops keep every CPU. A CPU outside rnicd's affinity is refused at
start with its reason, before the daemon creates anything. Policy 9: a latency test sends no loop
off its client's core, while a 64 B WRITE stream whose client is pinned to the home core sends
the sending daemon's loop off that core for the stream, and home again after. No figure is
judged.
Usage: check_home_cpu.py TESTBED_SH RNICD RNIC_RUN RNICCTL"""
import os
import re
import sys
import tempfile
import time

from systest import Checks, finish_pair, make_run, start_pair

testbed, rnicd, rnic_run, rnicctl = sys.argv[1:5]
env = dict(os.environ)
env.setdefault("RNIC_TESTBED", "hcpu")
env.setdefault("RNIC_TESTBED_DIR", "/tmp/hcpu")
env.setdefault("RNIC_TESTBED_NET", "10.92.0")
env.pop("RNIC_TESTBED_HOME_CPU", None)
state = env["RNIC_TESTBED_DIR"]
run_dir = f"{state}/run"
run = make_run(env)
checks = Checks(verdict_first=True)
check = checks.check


def cpu_list(text):
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def allowed(pid):
    """The CPUs the poll loop (rnicd's main thread) may run on now."""
    with open(f"/proc/{pid}/task/{pid}/status") as f:
        return cpu_list(re.search(r"^Cpus_allowed_list:\s*(\S+)", f.read(), re.M).group(1))


def pids():
    return {side: int(open(f"{state}/rnicd-{side}.pid").read()) for side in ("a", "b")}


def counters(dev):
    text = run(rnicctl, "--run-dir", run_dir, "-d", dev, "stat").stdout
    return {k: int(v) for k, v in re.findall(r"^\s*(\w+)\s+(\d+)\s*$", text, re.M)}


def perftest(ns, prog, args, port, timeout=60, client_cpu=None):
    """Server on rnic0, client on rnic1 (pinned to `client_cpu` if given), both in namespace A;
    returns both processes."""
    pin = () if client_cpu is None else ("taskset", "-c", str(client_cpu))
    return start_pair(rnic_run, run_dir, ns, [prog, "-x", "0", "-F", "-p", str(port), *args], port, timeout, pin)


mine = os.sched_getaffinity(0)
home = min(mine)
try:
    run(testbed, "up", "--daemons", "both", "--one-run-dir", "--rnicd", rnicd, timeout=60)
    ns_a = re.search(r"ns_a=(\S+)", open(f"{state}/env").read()).group(1)
    p = pids()
    for side in ("a", "b"):
        log = open(f"{state}/rnicd-{side}.log").read()
        check(f" home-cpu {home}" in log, f"rnicd {side} starts with home CPU {home} (the first CPU the bed may use)")
        check(allowed(p[side]) == {home}, f"rnicd {side}'s poll loop may run only on CPU {home} while idle")

    # A 64 KiB WRITE stream: both loops stream (the sender its doorbells and ACKs, the receiver its
    # frames), so both may leave home while it lasts. Sampled every 20 ms, bounded by the run.
    server, client = perftest(ns_a, "ib_write_bw", ["-s", "65536", "-D", "3", "--report_gbits"], 18700)
    away = {"a": False, "b": False}
    deadline = time.monotonic() + 70
    while client.poll() is None and time.monotonic() < deadline:
        for side in ("a", "b"):
            away[side] |= allowed(p[side]) != {home}
        time.sleep(0.02)
    server_rc, client_rc, server_out, client_out = finish_pair(server, client)
    out = client_out + server_out
    line = re.search(r"^\s*65536\s+\d+.*$", out, re.M)
    check(client_rc == 0 and server_rc == 0 and line is not None, "ib_write_bw -s 65536 -D 3 runs")
    print("  ib_write_bw:", line.group(0).strip() if line else out)
    if len(mine) > 1:
        for side in ("a", "b"):
            check(away[side], f"rnicd {side}'s poll loop may use every CPU during the stream")
    else:
        print("  (one CPU: leaving home changes nothing to see)")
    # Home again once the stream has been over for 2 ms: the next turn after that (an idle loop
    # turns at least every nap cap, 10 ms) moves it back.
    time.sleep(0.5)
    stats = {dev: counters(dev) for dev in ("rnic0", "rnic1")}
    for side, dev in (("a", "rnic0"), ("b", "rnic1")):
        check(allowed(p[side]) == {home}, f"rnicd {side} is home again after the stream")
        moves = stats[dev].get("loop_home_cpu_moves", -1)
        check(moves >= 2 and moves % 2 == 0, f"{dev}: loop_home_cpu_moves {moves}: it left and came back, in pairs")

    before = {dev: counters(dev) for dev in ("rnic0", "rnic1")}
    server, client = perftest(ns_a, "ib_write_lat", ["-s", "2", "-n", "2000"], 18701)
    server_rc, client_rc, server_out, client_out = finish_pair(server, client)
    out = client_out + server_out
    line = re.search(r"^\s*2\s+2000\s+.*$", out, re.M)
    check(client_rc == 0 and server_rc == 0 and line is not None, "ib_write_lat -s 2 -n 2000 runs")
    print("  ib_write_lat (t_min t_max t_typical ...):", line.group(0).strip() if line else out)
    yields = {dev: counters(dev).get("loop_home_yields", -1) for dev in ("rnic0", "rnic1")}
    # A loop whose own application kicks it from the home core does not spin (polling policy 6),
    # so it has no empty spin turn to yield in; the loop serving the application on the other core
    # spins after each answer. Which daemon that is depends on where the scheduler put perftest.
    check(any(v > 0 for v in yields.values()),
          f"spinning at home, a loop yields the core to the other: loop_home_yields {yields}")

    after = {dev: counters(dev) for dev in ("rnic0", "rnic1")}
    left = {dev: after[dev].get("loop_client_core_moves", -1) - before[dev].get("loop_client_core_moves", 0)
            for dev in after}
    check(all(v == 0 for v in left.values()),
          f"a latency test sends no loop off its client's core (policy 9): loop_client_core_moves {left}")

    # Policy 9: perftest's client pinned to the home core, where the sending daemon's loop (rnic1,
    # B) lives while idle. Its 64 B WRITEs stream in with a doorbell each while the loop naps for
    # it; the loop must leave that core for the stream and come home after it.
    if len(mine) > 1:
        before = counters("rnic1")
        server, client = perftest(ns_a, "ib_write_bw", ["-s", "64", "-D", "2"], 18702, client_cpu=home)
        off_home = False
        deadline = time.monotonic() + 70
        while client.poll() is None and time.monotonic() < deadline:
            off_home |= home not in allowed(p["b"])
            time.sleep(0.02)
        server_rc, client_rc, server_out, client_out = finish_pair(server, client)
        out = client_out + server_out
        line = re.search(r"^\s*64\s+\d+.*$", out, re.M)
        check(client_rc == 0 and server_rc == 0 and line is not None,
              f"ib_write_bw -s 64 -D 2 runs with its client pinned to CPU {home}")
        print("  ib_write_bw -s 64, client on the home core:", line.group(0).strip() if line else out)
        time.sleep(0.5)
        stats = counters("rnic1")
        moved = stats.get("loop_client_core_moves", -1) - before.get("loop_client_core_moves", 0)
        check(moved >= 1 and off_home,
              f"rnic1's loop left CPU {home}, its streaming client's core (loop_client_core_moves +{moved}, "
              f"seen off it: {off_home})")
        check(allowed(p["b"]) == {home}, "rnicd b is home again after the client's stream")
        home_moves = stats.get("loop_home_cpu_moves", -1)
        check(home_moves % 2 == 0, f"rnic1: loop_home_cpu_moves {home_moves}: still in pairs")
    else:
        print("  (one CPU: no other core to leave a client's for)")

    env["RNIC_TESTBED_HOME_CPU"] = "none"
    run(testbed, "up", "--daemons", "both", "--one-run-dir", "--rnicd", rnicd, timeout=60)
    p = pids()
    for side in ("a", "b"):
        log = open(f"{state}/rnicd-{side}.log").read()
        check("home-cpu" not in log and allowed(p[side]) == mine,
              f"RNIC_TESTBED_HOME_CPU=none: rnicd {side} has no home and keeps every CPU")
    del env["RNIC_TESTBED_HOME_CPU"]

    outside = next(c for c in range(1024) if c not in mine)
    with tempfile.TemporaryDirectory() as tmp:
        r = run(rnicd, "--iface", "lo", "--ip", "10.92.9.1/24", "--run-dir", tmp, "--home-cpu", str(outside),
                check=False)
        want = f"rnicd: --home-cpu {outside}: not among the {len(mine)} CPUs rnicd may run on"
        check(r.returncode == 2 and want in r.stderr, f"--home-cpu {outside} refused with exit 2: {want!r}")
        check(os.listdir(tmp) == [], "refused before any control socket was created")
finally:
    run(testbed, "down", check=False, timeout=60)
    status = checks.finish()
sys.exit(status)
