#!/usr/bin/env python3
"""Debian's Open MPI 4.1 over UCX between two rnicd, unmodified: two ranks, one per namespace,
each beside its own rnicd, run by mpirun with the rsh launcher whose agent
(mpi_netns_agent.sh) starts Open MPI's orted in the other namespace through rnic-run instead of
ssh. Open MPI's own wire-up (orted <-> mpirun) uses the bed's --oob link; the MPI traffic goes
over UCX's pml with UCX_TLS=self,rc_verbs,ud_verbs:aux and UCX_NET_DEVICES=rnic0:1, i.e. through
rnicd only. mpi_rnic_check (ping-pong with every byte checked, MPI_Allreduce of 1 Mi doubles,
64 MiB one way and back, checked) must print PASS, both ranks must report their namespace's host
name, and both daemons' RoCE frame counters must account for the 64 MiB both ways.
Usage: check_mpi.py TESTBED RNICD RNIC_RUN RNICCTL MPI_RNIC_CHECK
Exit 0 pass, 1 failure, 77 skip (Open MPI not installed, or MPI_RNIC_CHECK is "none": not built)."""
import os
import re
import shutil
import subprocess
import sys

testbed, rnicd, rnic_run, rnicctl, program = sys.argv[1:6]
here = os.path.dirname(os.path.abspath(__file__))
agent = os.path.join(here, "mpi_netns_agent.sh")
name = f"hsm{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.71.5",
           RNIC_TESTBED_NET6="fd71:5::", RNIC_TESTBED_OOB_NET="10.72.5")
env.pop("LD_PRELOAD", None)
for k in list(env):
    if k.startswith(("UCX_", "OMPI_", "PMIX_")):
        del env[k]
failures = []
MIB = 64


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def roce_frames(run_dir):
    r = subprocess.run([rnicctl, "--run-dir", run_dir, "stat"], capture_output=True, text=True, timeout=30)
    counts = dict(re.findall(r"^\s+(roce_tx|roce_rx) (\d+)$", r.stdout, re.M))
    return int(counts.get("roce_tx", 0)), int(counts.get("roce_rx", 0))


def main():
    if program == "none" or shutil.which("mpirun") is None:
        print("SKIP: Open MPI (openmpi-bin, libopenmpi-dev) is not installed (tools/setup.sh installs it)")
        return 77
    try:
        up = subprocess.run([testbed, "up", "--daemons", "both", "--oob", "--rnicd", rnicd], env=env,
                            capture_output=True, text=True, timeout=60)
        if not check(up.returncode == 0, "testbed up --daemons both --oob"):
            print(up.stdout + up.stderr)
            return 1
        with open(f"{state}/env") as fh:
            bed = dict(kv.split("=", 1) for kv in fh.read().split())
        host_a, host_b = bed["oob_a"], bed["oob_b"]
        run_env = dict(env, RNIC_RUN=rnic_run,
                       RNIC_MPI_HOSTS=f"{host_a}={bed['ns_a']}:{state}/run-a,{host_b}={bed['ns_b']}:{state}/run-b")
        before = [roce_frames(f"{state}/run-{s}") for s in "ab"]
        # mpirun itself starts in A's namespace the way the agent starts orted in B's.
        cmd = [agent, host_a, "mpirun", "--allow-run-as-root", "-np", "2", "--host", f"{host_a},{host_b}",
               "--mca", "plm", "rsh", "--mca", "plm_rsh_agent", agent,
               "--mca", "oob_tcp_if_include", f"{bed['oob_a'].rsplit('.', 1)[0]}.0/24",
               "--mca", "pml", "ucx", "--mca", "btl", "self", "--mca", "osc", "ucx",
               "-x", "UCX_TLS=self,rc_verbs,ud_verbs:aux", "-x", "UCX_NET_DEVICES=rnic0:1", "-x", "PATH",
               program, str(MIB)]
        print("$ " + " ".join(cmd), flush=True)
        try:
            r = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
            out = r.stdout + r.stderr
            rc = r.returncode
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
            rc = "timeout"
        print(out.strip()[-4000:], flush=True)
        after = [roce_frames(f"{state}/run-{s}") for s in "ab"]
        check(rc == 0 and "mpi_rnic_check: PASS" in out, f"mpirun mpi_rnic_check: PASS (rc {rc})")
        check(f"rank 0 of 2 on {bed['ns_a']}" in out and f"rank 1 of 2 on {bed['ns_b']}" in out,
              "rank 0 runs in namespace A, rank 1 in B")
        for line in ("result pingpong size 1048576", "result allreduce", f"result large MiB {MIB}"):
            check(line in out, f"figure printed: {line}")
        # 64 MiB each way in frames of at most the 4096-byte MTU: at least 2 x 16384 data frames
        # through each daemon (sent by one side, received by the other).
        need = 2 * MIB * 1024 * 1024 // 4096
        for side, (b, a) in zip("ab", zip(before, after)):
            tx, rx = a[0] - b[0], a[1] - b[1]
            check(tx >= need // 2 and rx >= need // 2 and tx + rx >= need,
                  f"rnicd {side} carried the MPI traffic: {tx} RoCE frames sent, {rx} received (>= {need} in all)")
    finally:
        subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)
    return 1 if failures else 0


if __name__ == "__main__":
    rc = main()
    if rc != 77:
        print("FAILED: " + "; ".join(failures) if failures else "all Open MPI checks passed")
    sys.exit(rc)
