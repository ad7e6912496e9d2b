#!/usr/bin/env python3
"""Ordinary users on real rnicd: two daemons on the test bed (rnic0 in A, rnic1 in B, one run
directory), started with their defaults, and Debian's unmodified programs run as nobody (65534)
through rnic-run, as on a host where every user may open /dev/infiniband/uverbs*:
  sockets      the run directory 0755, both sockets 0666;
  ibv_devinfo  as nobody, lists rnic0 and rnic1, ports active;
  pingpong     ibv_rc_pingpong between rnic0 and rnic1, both sides nobody;
  rnicctl      while nobody's pingpong server holds its QP and root's client holds another: root
               sees both users' sessions, QPs and usage, nobody only its own (the device totals
               count all; its usage against --user-limit nobody:qps=4); nobody may not set the
               log level (exit 1, EPERM), root may;
  memlock      under `prlimit --memlock=64KiB`, nobody's ibv_reg_mr (memlock_probe.py) registers
               what fits and fails with ENOMEM past it; root, with CAP_IPC_LOCK, under the same
               limit registers it all; the daemon counted the refusals.
Usage: check_users.py TESTBED RNICD RNIC_RUN RNICCTL"""
import json
import os
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from systest import Checks, daemon_exit_status, make_run  # noqa: E402

testbed, rnicd, rnic_run, rnicctl = sys.argv[1:5]
here = os.path.dirname(os.path.abspath(__file__))
name = f"rnicu{os.getpid() % 10000}"
state = f"/tmp/{name}"
run_dir = f"{state}/run"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.95.0")
checks = Checks(verdict_first=True)
check = checks.check
run = make_run(env)
port = 20000 + os.getpid() % 12000
NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
MEMLOCK = 64 * 1024


def in_a(args, user=True):
    """A command in namespace A, as nobody unless `user` is False."""
    return ["ip", "netns", "exec", f"{name}-a", *(AS_NOBODY if user else []), *args]


def ctl(*args, user=True):
    return run(*in_a([rnicctl, "--run-dir", run_dir, *args], user), timeout=15, check=False)


def ctl_json(*args, user=True):
    r = ctl("--json", *args, user=user)
    if r.returncode != 0:
        raise RuntimeError(f"rnicctl {' '.join(args)} -> {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def verbs(*args, user=True, memlock=None, timeout=30):
    """A program through rnic-run in namespace A (under `prlimit --memlock` if given)."""
    limit = ["prlimit", f"--memlock={memlock}:{memlock}"] if memlock else []
    return run(*in_a([*limit, rnic_run, "--run-dir", run_dir, *args], user), timeout=timeout, check=False)


# A root client holding a QP on rnic0 (raw_host_client), for rnicctl's views.
HOLDER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from raw_host_client import Sess
s = Sess(sys.argv[2])
s.to_init()
print(s.qpn, flush=True)
time.sleep(60)
"""


def wait_for(what, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = what()
        if v:
            return v
        time.sleep(0.1)
    return None


def functional(procs):
    # nobody must be able to read the build tree (rnic-run, the libraries, rnicctl).
    libdir = os.path.join(os.path.dirname(rnic_run), "lib")
    r = run(*AS_NOBODY, "sh", "-c", 'test -x "$0" && test -x "$1" && test -r "$2/libibverbs.so.1"', rnic_run, rnicctl,
            libdir, check=False)
    if not check(r.returncode == 0, f"nobody can read and run the build tree ({rnic_run}, {rnicctl}, {libdir})"):
        return

    run(testbed, "up", "--daemons", "both", "--one-run-dir", "--rnicd", rnicd, "--", "--user-limit", "nobody:qps=4",
        timeout=60)
    os.chmod(state, 0o755)  # the bed's own directory: nobody must pass through it to the run directory
    modes = {p: stat.S_IMODE(os.stat(p).st_mode) for p in (run_dir, f"{run_dir}/rnic0.sock", f"{run_dir}/rnic1.sock")}
    check(list(modes.values()) == [0o755, 0o666, 0o666], f"run directory 0755, sockets 0666 ({ {k: oct(v) for k, v in modes.items()} })")

    # ---- ibv_devinfo as nobody ----
    r = verbs("ibv_devinfo")
    out = r.stdout
    check(r.returncode == 0 and "hca_id:\trnic0" in out and "hca_id:\trnic1" in out and out.count("PORT_ACTIVE") == 2,
          f"ibv_devinfo as nobody: rnic0 and rnic1, both ports active (exit {r.returncode}: {r.stderr.strip()[:200]})")

    # ---- a root holder and nobody's pingpong server on rnic0 ----
    holder = subprocess.Popen(in_a(["python3", "-c", HOLDER, here, f"{run_dir}/rnic0.sock"], user=False),
                              stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    procs.append(holder)
    root_qpn = int(holder.stdout.readline() or 0)
    check(root_qpn > 0, f"root's client holds QP {root_qpn} on rnic0")
    pp = ["ibv_rc_pingpong", "-g", "0", "-p", str(port), "-s", "4096", "-n", "100"]
    server = subprocess.Popen(in_a([rnic_run, "--run-dir", run_dir, *pp, "-d", "rnic0"]), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    procs.append(server)

    def nobody_qps():
        return [q for q in ctl_json("-d", "rnic0", "qp", user=False) if q.get("uid") == NOBODY]

    their = wait_for(nobody_qps)
    check(bool(their), f"root's rnicctl shows the pingpong server's QP as nobody's ({[q['qpn'] for q in their or []]})")
    if not their:
        return

    # ---- what each one sees ----
    root_view = ctl_json("-d", "rnic0", "session", user=False)
    root_qps = ctl_json("-d", "rnic0", "qp", user=False)
    uids = sorted({s["uid"] for s in root_view["sessions"]})
    check(uids == [0, NOBODY] and {root_qpn, their[0]["qpn"]} <= {q["qpn"] for q in root_qps},
          f"root sees both users' sessions ({uids}) and both QPs")
    mine = ctl_json("-d", "rnic0", "session")
    mine_qps = ctl_json("-d", "rnic0", "qp")
    check({s["uid"] for s in mine["sessions"]} == {NOBODY} and len(mine["sessions"]) == 2,
          f"nobody sees only its own sessions, the server's and rnicctl's ({[(s['uid'], s['pid']) for s in mine['sessions']]})")
    check([q["qpn"] for q in mine_qps] == [their[0]["qpn"]],
          f"nobody sees only its own QP ({[(q['qpn'], q['uid']) for q in mine_qps]})")
    check(mine["objects"]["qps"] == root_view["objects"]["qps"] >= 2,
          f"the device's object totals are everyone's ({mine['objects']['qps']} QPs)")
    text = ctl("-d", "rnic0", "qp").stdout
    check(f"lqpn {root_qpn} " not in text and f"lqpn {their[0]['qpn']} " in text, "rnicctl qp as nobody: only its QP")
    lines = ctl("-d", "rnic0", "user").stdout.splitlines()
    check(len(lines) == 1 and lines[0].startswith(f"dev rnic0 uid {NOBODY} sessions 2/max ") and " qps 1/4 " in lines[0],
          f"rnicctl user as nobody: its own usage against --user-limit nobody:qps=4 ({lines})")
    lines = ctl("-d", "rnic0", "user", user=False).stdout.splitlines()
    check([l.split()[3] for l in lines] == ["0", str(NOBODY)], f"rnicctl user as root: both users ({lines})")

    # ---- the pingpong, both sides nobody ----
    listening = wait_for(lambda: run(*in_a(["ss", "-Hltn", f"sport = :{port}"], user=False)).stdout.strip())
    check(bool(listening), f"the pingpong server listens on {port}")
    client = verbs(*pp, "-d", "rnic1", "127.0.0.1", timeout=60)
    try:
        server_out = server.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        server.kill()
        server_out = server.communicate()[0]
    check(client.returncode == 0 and server.returncode == 0 and "bytes in" in client.stdout and "bytes in" in server_out,
          f"ibv_rc_pingpong between rnic0 and rnic1 as nobody (client {client.returncode}, server {server.returncode}: "
          f"{(client.stdout + client.stderr + server_out).strip()[-300:]})")

    # ---- log level ----
    r = ctl("-d", "rnic0", "log-level", "debug")
    check(r.returncode == 1 and "Operation not permitted" in r.stderr,
          f"nobody's log-level: exit 1, EPERM ({r.returncode}: {r.stderr.strip()})")
    r = ctl("-d", "rnic0", "log-level", "warn", user=False)
    check(r.returncode == 0, f"root's log-level: exit 0 ({r.stderr.strip()})")
    ctl("-d", "rnic0", "log-level", "info", user=False)

    # ---- RLIMIT_MEMLOCK ----
    probe = [sys.executable, os.path.join(here, "memlock_probe.py"), "rnic0"]
    sizes = [32768, 1048576, 32768, 4096]
    r = verbs(*probe, *map(str, sizes), memlock=MEMLOCK)
    want = ["32768 ok", "1048576 ENOMEM", "32768 ok", "4096 ENOMEM"]
    check(r.returncode == 0 and r.stdout.split("\n")[:4] == want,
          f"nobody under a 64 KiB RLIMIT_MEMLOCK: ibv_reg_mr {want} ({r.stdout.split(chr(10))[:4]} {r.stderr.strip()[-200:]})")
    r = verbs(*probe, "1048576", "1048576", memlock=MEMLOCK, user=False)
    check(r.returncode == 0 and r.stdout.split("\n")[:2] == ["1048576 ok"] * 2,
          f"root (CAP_IPC_LOCK) under the same limit registers 2 MiB ({r.stdout.strip()} {r.stderr.strip()[-200:]})")
    stats = ctl_json("-d", "rnic0", "stat", user=False)
    check(stats.get("host_memlock_refusals") == 2 and stats.get("host_sessions_refused") == 0,
          f"rnic0 counted 2 memlock refusals, refused no session ({stats.get('host_memlock_refusals')}, "
          f"{stats.get('host_sessions_refused')})")

    run(testbed, "down", timeout=60)
    for side in "ab":
        rc = daemon_exit_status(state, side)
        check(rc == "0", f"rnicd {side} exited 0 ({rc})")


def main():
    procs = []
    try:
        functional(procs)
    except Exception as e:  # noqa: BLE001 - any failure is reported as one
        check(False, f"exception: {e}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
