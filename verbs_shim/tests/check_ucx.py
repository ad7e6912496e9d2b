#!/usr/bin/env python3
"""Debian's UCX 1.13 (ucx-utils) between two rnicd, through rnic-run, unmodified:
 1. ucx_info -d lists the memory domain rnic0 with the rc_verbs and ud_verbs transports on
    device rnic0:1 (UCX needs the sysfs tree and /dev/infiniband/uverbs0 that rnic-run provides),
    and no error.
 2. ucx_perftest, server in namespace B, client in A, over the RDMA device only
    (UCX_NET_DEVICES=rnic0:1; the TCP side channel of ucx_perftest itself runs on the bed's --oob
    link): tag latency and bandwidth, put latency and bandwidth, get bandwidth, over rc_verbs
    (UCX_TLS=rc_verbs,ud_verbs:aux: UCP connects RC endpoints through an auxiliary UD transport,
    which carries no data) and over ud_verbs alone. Each run must end with its "Final:" line, the
    client's endpoint configuration must name the expected transport, and rnicd A's RoCE frame
    counters (sent + received) must have moved by at least the iterations run.
Prints the figures (docs/benchmarks.md holds a run of them).
Usage: check_ucx.py TESTBED RNICD RNIC_RUN RNICCTL
Exit 0 pass, 1 failure, 77 skip (ucx-utils not installed)."""
import os
import re
import shutil
import subprocess
import sys
import time

testbed, rnicd, rnic_run, rnicctl = sys.argv[1:5]
name = f"hsu{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.71.4",
           RNIC_TESTBED_NET6="fd71:4::", RNIC_TESTBED_OOB_NET="10.72.4")
env.pop("LD_PRELOAD", None)
for k in list(env):
    if k.startswith("UCX_"):
        del env[k]  # the caller's UCX settings would change what is measured
failures = []
PORT = 13337


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def ns(side, args, run_dir, extra_env=None):
    cmd = [testbed, "exec", side, "env"] + [f"{k}={v}" for k, v in (extra_env or {}).items()]
    return cmd + [rnic_run, "--run-dir", run_dir] + args


def roce_frames(run_dir):
    r = subprocess.run([rnicctl, "--run-dir", run_dir, "stat"], capture_output=True, text=True, timeout=30)
    counts = dict(re.findall(r"^\s+(roce_tx|roce_rx) (\d+)$", r.stdout, re.M))
    return int(counts.get("roce_tx", 0)), int(counts.get("roce_rx", 0))


def wait_listening(port, deadline_s=15):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        r = subprocess.run([testbed, "exec", "b", "ss", "-ltnH"], env=env, capture_output=True, text=True, timeout=10)
        if re.search(rf":{port}\b", r.stdout):
            return True
        time.sleep(0.2)
    return False


def perftest(bed, label, tls, test, size, iters, transport):
    ucx = {"UCX_TLS": tls, "UCX_NET_DEVICES": "rnic0:1"}
    server = subprocess.Popen(ns("b", ["ucx_perftest", "-p", str(PORT)], bed["run_b"], ucx), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    try:
        if not check(wait_listening(PORT), f"{label} {test}: ucx_perftest server listening in B"):
            return None
        before = roce_frames(bed["run_a"])
        args = ["ucx_perftest", bed["oob_b"], "-p", str(PORT), "-t", test, "-n", str(iters)]
        if size:
            args += ["-s", str(size)]
        r = subprocess.run(ns("a", args, bed["run_a"], dict(ucx, UCX_LOG_LEVEL="info")), env=env, capture_output=True,
                           text=True, timeout=150, stdin=subprocess.DEVNULL)
        after = roce_frames(bed["run_a"])
        out = r.stdout + r.stderr
        final = re.search(r"^Final:\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(\d+)", out, re.M)
        cfg = re.search(r"ep_cfg\[\d+\]: (\S+)", out)
        ok = check(r.returncode == 0 and final is not None and int(final.group(1)) == iters,
                   f"{label} {test}: {iters} iterations, Final line (rc {r.returncode})")
        if not ok:
            print(out[-2500:], flush=True)
            return None
        check(cfg is not None and f"({transport}/rnic0:1)" in cfg.group(1),
              f"{label} {test}: endpoint over {transport} ({cfg.group(1) if cfg else 'no ep_cfg line'})")
        tx, rx = after[0] - before[0], after[1] - before[1]
        # One-way tests: the data goes one way, acknowledgements (batched on UD) the other.
        check(tx + rx >= iters, f"{label} {test}: rnicd A sent {tx} and received {rx} RoCE frames")
        return {"p50_us": float(final.group(2)), "avg_us": float(final.group(3)), "bw_mbs": float(final.group(5)),
                "rate": int(final.group(7))}
    finally:
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main():
    if shutil.which("ucx_perftest") is None or shutil.which("ucx_info") is None:
        print("SKIP: ucx-utils is not installed (tools/setup.sh installs it)")
        return 77
    try:
        up = subprocess.run([testbed, "up", "--daemons", "both", "--oob", "--rnicd", rnicd], env=env,
                            capture_output=True, text=True, timeout=60)
        if not check(up.returncode == 0, "testbed up --daemons both --oob"):
            print(up.stdout + up.stderr)
            return 1
        with open(f"{state}/env") as fh:
            bed = dict(kv.split("=", 1) for kv in fh.read().split())
        bed["run_a"], bed["run_b"] = f"{state}/run-a", f"{state}/run-b"

        r = subprocess.run(ns("a", ["ucx_info", "-d"], bed["run_a"]), env=env, capture_output=True, text=True,
                           timeout=60)
        out = r.stdout + r.stderr
        md = out.split("# Memory domain: rnic0", 1)
        rnic_part = md[1].split("# Memory domain:", 1)[0] if len(md) == 2 else ""
        check(r.returncode == 0 and rnic_part != "", "ucx_info -d: memory domain rnic0")
        for tl in ("rc_verbs", "ud_verbs"):
            check(re.search(rf"Transport: {tl}\s+#\s+Device: rnic0:1", rnic_part) is not None,
                  f"ucx_info -d: {tl} on rnic0:1")
        check(" ERROR " not in out, "ucx_info -d: no UCX error")
        nosys = subprocess.run(ns("a", ["--no-sysfs", "ucx_info", "-d"], bed["run_a"]), env=env, capture_output=True,
                               text=True, timeout=60)
        print(f"(without the sysfs tree, rnic-run --no-sysfs: ucx_info -d "
              f"{'lists' if 'rc_verbs' in nosys.stdout else 'does not list'} rc_verbs)", flush=True)

        results = []
        for label, tls, transports in (("rc_verbs", "rc_verbs,ud_verbs:aux", ("rc_verbs", "rc_verbs")),
                                       ("ud_verbs", "ud_verbs", ("ud_verbs", "ud_verbs"))):
            for test, size, iters in (("tag_lat", 0, 1000), ("tag_bw", 65536, 500), ("ucp_put_lat", 0, 1000),
                                      ("ucp_put_bw", 65536, 500), ("ucp_get", 65536, 500)):
                res = perftest(bed, label, tls, test, size, iters, transports[0])
                if res:
                    results.append((label, test, size, res))
        print("\nUCX 1.13 ucx_perftest between two rnicd (client in A, server in B, UCX_NET_DEVICES=rnic0:1)")
        print(f"{'transport':<10} {'test':<12} {'size':>6} {'p50 us':>9} {'avg us':>9} {'MB/s':>9} {'msg/s':>8}")
        for label, test, size, res in results:
            print(f"{label:<10} {test:<12} {size or 8:>6} {res['p50_us']:>9.1f} {res['avg_us']:>9.1f} "
                  f"{res['bw_mbs']:>9.1f} {res['rate']:>8}")
    finally:
        subprocess.run([testbed, "down"], env=env, capture_output=True, timeout=60)
    return 1 if failures else 0


if __name__ == "__main__":
    rc = main()
    if rc != 77:
        print("FAILED: " + "; ".join(failures) if failures else "all UCX checks passed")
    sys.exit(rc)
