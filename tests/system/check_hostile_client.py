#!/usr/bin/env python3
"""A hostile client and well-behaved ones on the same real rnicd (rnic0 of the test bed; rnic1 in
the other namespace is the peer). The hostile one (hostile_host_client.py) overflows a CQ it never
polls, floods control messages, writes garbage WQEs and wild producer indices, sets every doorbell
bit, destroys objects still in use, and is killed with SIGKILL while its memory is mapped.
Meanwhile, as before it started:
- Debian's unmodified ibv_rc_pingpong (-c: every buffer validated) runs between rnic0 and rnic1
  through our libibverbs.so.1;
- a raw client does RDMA WRITEs of random data from rnic0 to rnic1, each checked byte for byte.
Checks: both complete with correct data, only the hostile client's CQ overflowed (its CQ_ERR),
rnicd stays up, every object of the hostile session is reclaimed (rnicctl session: the counts of
before), rnicd exits 0 on SIGTERM. Prints the well-behaved figures with and without the hostile
client; the only timing checks are sanity bounds (not below a twentieth of the quiet figures).
Usage: check_hostile_client.py TESTBED RNICD RNIC_RUN RNICCTL"""
import json
import os
import re
import signal
import subprocess
import sys
import time

from raw_host_client import Sess
from systest import Checks, daemon_exit_status, make_run

testbed, rnicd, rnic_run, rnicctl = sys.argv[1:5]
here = os.path.dirname(os.path.abspath(__file__))
name = f"rnich{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.94.0",
           RNIC_TESTBED_NET6="fd94::")
checks = Checks(verdict_first=True)
check, failures = checks.check, checks.failures
run = make_run(env)
run_dir = f"{state}/run"


def ctl_json(*args):
    return json.loads(run(rnicctl, "--run-dir", run_dir, "--json", *args, timeout=15).stdout)


def pingpong(iters=2000, size=4096):
    """Server on rnic0, client on rnic1, both in namespace A (TCP over its loopback). Returns
    (ok, Mbit/s, usec/iter, output)."""
    port = str(20000 + os.getpid() % 12000)
    common = ["ip", "netns", "exec", f"{name}-a", rnic_run, "--run-dir", run_dir, "ibv_rc_pingpong", "-g", "0",
              "-s", str(size), "-n", str(iters), "-c", "-p", port]
    server = subprocess.Popen(["timeout", "60", *common, "-d", "rnic0"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    for _ in range(100):
        if f":{port} " in run("ip", "netns", "exec", f"{name}-a", "ss", "-Hltn").stdout:
            break
        time.sleep(0.1)
    client = run("timeout", "60", *common, "-d", "rnic1", "127.0.0.1", timeout=70, check=False)
    out, _ = server.communicate(timeout=70)
    out += client.stdout + client.stderr
    rates = [float(x) for x in re.findall(r"= ([\d.]+) Mbit/sec", out)]
    lat = [float(x) for x in re.findall(r"= ([\d.]+) usec/iter", out)]
    ok = server.returncode == 0 and client.returncode == 0 and len(rates) == 2 and len(lat) == 2
    return ok, min(rates) if rates else 0.0, max(lat) if lat else 0.0, out


def raw_writes(a, b, count=200, size=4096):
    """RDMA WRITEs of fresh random data from A's buffer into B's, each checked byte for byte once
    its completion came. Returns (writes correct, MB/s, usec per write)."""
    good = 0
    t0 = time.monotonic()
    for i in range(count):
        payload = os.urandom(size)
        a.buf[0:size] = payload
        a.post_send(i, 0, 0, size, b.addr + 4096, b.rkey)
        cqes = a.wait_cqes(1)
        if len(cqes) == 1 and cqes[0][1] == 0 and bytes(b.buf[4096:4096 + size]) == payload:
            good += 1
    dt = time.monotonic() - t0
    return good, count * size / dt / 1e6, dt / count * 1e6


def functional():
    run(testbed, "up", "--daemons", "both", "--one-run-dir", "--rnicd", rnicd, timeout=60)
    pid_a = int(open(f"{state}/rnicd-a.pid").read())
    a = Sess(f"{run_dir}/rnic0.sock")
    b = Sess(f"{run_dir}/rnic1.sock")
    a.connect(b.qpn, b.gid)
    b.connect(a.qpn, a.gid)

    quiet_pp = pingpong()
    check(quiet_pp[0], f"alone: ibv_rc_pingpong -c completes ({quiet_pp[1]:.0f} Mbit/s, {quiet_pp[2]:.1f} us/iter)")
    quiet_w = raw_writes(a, b)
    check(quiet_w[0] == 200, f"alone: 200 WRITEs of 4 KiB correct byte for byte ({quiet_w[0]})")
    base = ctl_json("-d", "rnic0", "session")["objects"]

    hostile = subprocess.Popen([sys.executable, f"{here}/hostile_host_client.py", f"{run_dir}/rnic0.sock"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(l.startswith("round") for l in lines):
            line = hostile.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
        check(any(l.startswith("cq_err") for l in lines), f"the hostile client's CQ overflowed: CQ_ERR ({lines[:3]})")
        check(any(l.startswith("round") for l in lines), "the hostile client runs its rounds")
        rereg = [l for l in lines if l.startswith("rereg")]
        check(rereg and all(l == "rereg as expected" for l in rereg),
              f"hostile ReregMr requests get their errno, right ones succeed ({rereg[:2]})")
        held = ctl_json("-d", "rnic0", "session")
        theirs = next((s for s in held["sessions"] if s["pid"] == hostile.pid), {})
        check(theirs.get("qps", 0) >= 2, f"the hostile session holds objects ({theirs})")

        busy_pp = pingpong()
        check(busy_pp[0], f"with it: ibv_rc_pingpong -c completes ({busy_pp[1]:.0f} Mbit/s, {busy_pp[2]:.1f} us/iter)")
        busy_w = raw_writes(a, b)
        check(busy_w[0] == 200, f"with it: 200 WRITEs of 4 KiB correct byte for byte ({busy_w[0]})")
        check(hostile.poll() is None, "the hostile client was still at it")
        rounds = sum(1 for _ in lines if _.startswith("round"))
        stats = json.loads(a.call(23, b"\0" * 8)[1])
        mine = [q for q in stats["qps"] if q["qpn"] == a.qpn]
        check(mine and mine[0]["state"] == "RTS", f"the raw client's QP is still RTS ({mine[:1]})")
        c = stats["counters"]
        print(f"daemon under attack: {c['host_corrupt_rings']} corrupt rings, {c['host_wqes_rejected']} WQEs rejected, "
              f"{c['host_control_errors']} malformed messages, {c['host_sessions_opened']} sessions, "
              f"{c.get('cq_overflows', '?')} CQ overflows, {c.get('internal_errors', '?')} internal errors")
        check(c.get('internal_errors', 0) == 0, "the engine caught nothing (internal_errors 0)")
    finally:
        hostile.send_signal(signal.SIGKILL)
        out, _ = hostile.communicate(timeout=10)
        lines += out.split()
    after, deadline = {}, time.monotonic() + 10
    while time.monotonic() < deadline:
        after = ctl_json("-d", "rnic0", "session")["objects"]
        if after == base:
            break
        time.sleep(0.05)
    check(after == base, f"the SIGKILLed hostile session is reclaimed: objects as before ({after} vs {base})")
    alive = os.path.exists(f"/proc/{pid_a}") and daemon_exit_status(state, "a", seconds=0) == "?"
    check(alive, "rnic0's rnicd is still running")
    check(raw_writes(a, b, count=20)[0] == 20, "afterwards: 20 more WRITEs correct")

    print(f"ibv_rc_pingpong 4 KiB x 2000: alone {quiet_pp[1]:.0f} Mbit/s {quiet_pp[2]:.1f} us/iter; "
          f"with the hostile client {busy_pp[1]:.0f} Mbit/s {busy_pp[2]:.1f} us/iter "
          f"({busy_pp[1] / max(quiet_pp[1], 1e-9):.2f}x)")
    print(f"raw WRITE 4 KiB x 200 (Python): alone {quiet_w[1]:.1f} MB/s {quiet_w[2]:.0f} us/write; "
          f"with the hostile client {busy_w[1]:.1f} MB/s {busy_w[2]:.0f} us/write ({busy_w[1] / quiet_w[1]:.2f}x)")
    check(busy_pp[1] >= quiet_pp[1] / 20 and busy_w[1] >= quiet_w[1] / 20,
          "sanity: neither collapsed below a twentieth of its quiet figure")
    run(testbed, "down", timeout=60)
    rc = daemon_exit_status(state, "a")
    check(rc == "0", f"rnic0's rnicd exits 0 on SIGTERM (got {rc})")
    log = open(f"{state}/rnicd-a.log").read()
    # Killed mid-flood, the session ends as "disconnected", "receive error" (ECONNRESET: it died with
    # replies unread) or "reply not accepted" (EPIPE): each is a reclaim.
    reclaimed = re.search(rf"\(pid {hostile.pid}\) (disconnected|receive error|reply not accepted): reclaimed", log)
    check(reclaimed is not None, "its log names the reclaimed hostile session")


try:
    functional()
except Exception as e:  # a broken step is a failure with its reason, not a traceback only
    check(False, f"{type(e).__name__}: {e}")
finally:
    run(testbed, "down", timeout=60, check=False)
    subprocess.run(["rm", "-rf", state])
sys.exit(checks.finish())
