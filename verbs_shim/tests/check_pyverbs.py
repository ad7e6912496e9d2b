#!/usr/bin/env python3
"""Debian's python3-pyverbs through rnic-run: the export tables and the failures of what we do
not implement, seen by a real consumer of all of rdma-core's libraries.
 1. No daemon (an empty run directory): every pyverbs extension module imports (Python binds
    every symbol a module names at import, so one symbol missing from libibverbs.so.1,
    libmlx5.so.1 or libefa.so.1 fails it, as `undefined symbol: mlx5dv_reserved_qpn_alloc,
    version MLX5_1.18` did), and the libraries in the process are ours.
 2. No daemon: mlx5dv_*, efadv_*, IBVERBS_PRIVATE_34 and old-version entry points called through
    ctypes return the failure docs/verbs_shim.md documents.
 3. One rnicd on the test bed: pyverbs opens the device, query_device/query_port agree with
    Debian's ibv_devinfo -v, GID[0] is the daemon's address, PD/MR/CQ work; the mlx5 and EFA
    contexts refuse the device.
Usage: check_pyverbs.py TESTBED RNICD RNIC_RUN LIB_DIR
Exit 0 pass, 1 failure, 77 skip (python3-pyverbs not installed)."""
import os
import shutil
import subprocess
import sys
import tempfile

testbed, rnicd, rnic_run, lib_dir = sys.argv[1:5]
probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyverbs_probe.py")
# Debian's interpreter: python3-pyverbs is installed for it, not for another python3 on PATH.
python = "/usr/bin/python3"
name = f"rnicpv{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.84.0")
env.pop("LD_PRELOAD", None)
failures = []


def run(args, run_dir, timeout=120):
    print("$ " + " ".join(args), flush=True)
    r = subprocess.run([rnic_run, "--run-dir", run_dir, python, probe] + args, env=env, capture_output=True,
                       text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    out = (r.stdout + r.stderr).strip()
    lines = out.splitlines()
    shown = [ln for ln in lines if not ln.startswith("ok   import ")]
    if len(shown) < len(lines):
        shown.insert(0, f"({len(lines) - len(shown)} modules imported, one 'ok' line each, not shown)")
    print("\n".join(shown[-120:]), flush=True)
    if r.returncode != 0:
        failures.append(f"pyverbs_probe.py {' '.join(args)} -> {r.returncode}")
    return r


def main():
    if subprocess.run([python, "-c", "import pyverbs"], capture_output=True).returncode != 0:
        print("SKIP: python3-pyverbs is not installed (tools/setup.sh installs it)")
        return 77
    empty = tempfile.mkdtemp(prefix="rnic-pyverbs-")
    try:
        run(["imports", lib_dir], empty)
        run(["failures"], empty)
    finally:
        shutil.rmtree(empty, ignore_errors=True)
    try:
        up = subprocess.run([testbed, "up", "--daemons", "a", "--rnicd", rnicd], env=env, capture_output=True,
                            text=True, timeout=60)
        if up.returncode != 0:
            failures.append(f"testbed up -> {up.returncode}: {(up.stdout + up.stderr).strip()[-500:]}")
        else:
            with open(f"{state}/env") as f:
                bed = dict(kv.split("=", 1) for kv in f.read().split())
            run(["device", "rnic0", bed["ip_a"]], f"{state}/run-a")
    finally:
        subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)
    print("FAILED: " + "; ".join(failures) if failures else "all pyverbs checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
