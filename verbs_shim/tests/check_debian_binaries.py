#!/usr/bin/env python3
"""Debian's unmodified rdma-core and perftest binaries between two rnicd, through our
libibverbs.so.1 (rnic-run). Three beds, one after the other:
  jumbo: veth MTU 9000 (active MTU 4096): ibv_devices, ibv_devinfo -v, the four pingpongs at
         path MTU 1024 and 4096, 1 B to 64 KiB, buffers validated (-c), events (-e); every
         perftest benchmark (-a once, -e once, UD once); RoCEv2 over IPv6 through GIDs 1
         (link-local) and 2 (fd77::) with pingpongs and perftest; both daemons capturing.
         Paths we do not offer (mlx5's DC, XRC) must fail with a message (rdma_cm, perftest -R
         included, is check_rdmacm_utils.py's).
  plain: veth MTU 1500 (active MTU 1024): the pingpongs and UD at the port's own MTU 1024.
  kill:  rnic1's daemon SIGKILLed under a running ib_write_bw: both sides exit with errors.
Both applications of a run live in the bed's namespace A, exchanging their connection data over
its loopback; the RDMA traffic crosses the veth between the daemons (rnic0 in A, rnic1 in B).
After the first two beds, both captures must pass rnic-pcap (ICRC verified on every frame) and
hold every opcode the bed's programs put on the wire.
Usage: check_debian_binaries.py TESTBED RNICD RNIC_RUN RNIC_PCAP [--quick] [--summary-first]"""
import io
import json
import os
import re
import subprocess
import sys
import time

from perftest_output import clock_calibration_failed

testbed, rnicd, rnic_run, rnic_pcap = sys.argv[1:5]
quick = "--quick" in sys.argv[5:]
# --summary-first (CTest): the verdict first, then the progress lines, so that an excerpt of the
# log that starts at the test's first lines shows what failed.
summary_first = "--summary-first" in sys.argv[5:]
real_stdout = sys.stdout
if summary_first:
    sys.stdout = io.StringIO()
name = f"rnicdb{os.getpid() % 10000}"
state = f"/tmp/{name}"
base_env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.84.0")
failures = []
passed = 0
port = 20000 + os.getpid() % 12000


def bed(*args, mtu="9000", timeout=60):
    env = dict(base_env, RNIC_TESTBED_MTU=mtu)
    r = subprocess.run([testbed, *args], env=env, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError(f"testbed {' '.join(args)}: {r.stdout}{r.stderr}")
    return r.stdout


def in_ns(args):
    return ["ip", "netns", "exec", f"{name}-a", rnic_run, "--run-dir", f"{state}/run", *args]


def tool(label, args, expect):
    """A single-process program (ibv_devices, ibv_devinfo): exit 0 and every regex in `expect`."""
    global passed
    r = subprocess.run(in_ns(args), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    missing = [e for e in expect if not re.search(e, r.stdout, re.M)]
    if r.returncode != 0 or missing:
        failures.append(f"{label}: exit {r.returncode}, missing {missing}")
        print(f"FAIL {label}\n{r.stdout[-2000:]}{r.stderr[-2000:]}", flush=True)
    else:
        passed += 1
        print(f"ok   {label}", flush=True)


def refuses(label, args, expect):
    """A path we do not offer (XRC): a clean error exit, never a crash or a hang."""
    global passed
    r = subprocess.run(in_ns(args), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    out = r.stdout + r.stderr
    if r.returncode <= 0 or not re.search(expect, out):
        failures.append(f"{label}: exit {r.returncode} (wanted a clean error), output {out[-500:]!r}")
        print(f"FAIL {label}\n{out[-2000:]}", flush=True)
    else:
        passed += 1
        print(f"ok   {label}: exit {r.returncode}, {re.search(expect, out).group(0)!r}", flush=True)


BAD_WORDS = ("Failed", "failed", "Couldn't", "error", "Unable", "invalid data")


def listening(pid, tcp_port):
    """True when some process in `pid`'s network namespace listens on TCP `tcp_port` (rnic-run
    execs the program, so `pid` is the program itself)."""
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                for line in f.readlines()[1:]:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == tcp_port:
                        return True
        except OSError:
            pass
    return False


def daemon_state():
    """What a hung run needs to be understood: both daemons' QPs (states, PSNs) and their
    non-zero counters that tell of loss, drops, errors and events."""
    rnicctl = os.path.join(os.path.dirname(rnic_pcap), "rnicctl")
    wanted = re.compile(r"drop|miss|error|nak|retrans|timeout|rnr|uc_|cq_events|cqes|kicks|naps")
    lines = []
    for dev in ("rnic0", "rnic1"):
        for command in (["qp"], ["stat"]):
            r = subprocess.run([rnicctl, "--run-dir", f"{state}/run", "-d", dev, *command], capture_output=True,
                               text=True, timeout=10, stdin=subprocess.DEVNULL)
            out = r.stdout + r.stderr
            if command == ["stat"]:
                out = "\n".join(line for line in out.splitlines()
                                if wanted.search(line) and not line.rstrip().endswith(" 0"))
            lines.append(f"--- rnicctl -d {dev} {' '.join(command)}\n{out.rstrip()}")
    return "\n".join(lines)


def refuses_pair(label, program, args, expect, timeout=60):
    """A transport we do not offer, run as server and client: both exit non-zero with `expect`
    in their output within `timeout`, neither hangs nor crashes (a signal is a negative code)."""
    global passed, port
    port += 1
    common = [program, *args, "-p", str(port)]
    server = subprocess.Popen(in_ns(common + ["-d", "rnic0"]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, stdin=subprocess.DEVNULL)
    end = time.monotonic() + 20
    while not listening(server.pid, port) and server.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    try:
        client = subprocess.run(in_ns(common + ["-d", "rnic1", "127.0.0.1"]), capture_output=True, text=True,
                                timeout=timeout, stdin=subprocess.DEVNULL)
        server_out, _ = server.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        server.kill()
        server.communicate()
        failures.append(f"{label}: hung for {timeout} s")
        print(f"FAIL {label}: hung", flush=True)
        return
    outs = (client.stdout + client.stderr, server_out)
    if client.returncode <= 0 or server.returncode <= 0 or not all(re.search(expect, o) for o in outs):
        failures.append(f"{label}: client {client.returncode} server {server.returncode} (wanted clean errors)")
        print(f"FAIL {label}\n--- client\n{outs[0][-1500:]}\n--- server\n{outs[1][-1500:]}", flush=True)
    else:
        passed += 1
        print(f"ok   {label}: exits {client.returncode}/{server.returncode}, {expect!r}", flush=True)


def pair(label, program, args, success, timeout=180, retry_calibration=True):
    """Server on rnic0 and client on rnic1; both must exit 0 and print `success`. A perftest run
    whose clock calibration failed (perftest_output.py) is run once more."""
    global passed, port
    port += 1
    common = [program, *args, "-p", str(port)]
    server_args = common + ["-d", "rnic0"]
    client_args = common + ["-d", "rnic1", "127.0.0.1"]
    started = time.monotonic()
    server = subprocess.Popen(in_ns(server_args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              stdin=subprocess.DEVNULL)
    # The client dials once the server listens on its TCP port (at most 20 s).
    end = time.monotonic() + 20
    while not listening(server.pid, port) and server.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    try:
        client = subprocess.run(in_ns(client_args), capture_output=True, text=True, timeout=timeout,
                                stdin=subprocess.DEVNULL)
        server_out, _ = server.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as e:
        server.kill()
        server_out, _ = server.communicate()
        failures.append(f"{label}: timed out after {timeout} s")
        client_out = e.output.decode(errors="replace") if isinstance(e.output, bytes) else (e.output or "")
        print(f"FAIL {label}: timed out\n--- client\n{client_out[-1500:]}\n--- server\n{server_out[-1500:]}\n"
              f"{daemon_state()}", flush=True)
        return ""
    out = client.stdout + client.stderr
    # The pingpongs' -c check prints "invalid data" and still exits 0: that is a failure here.
    bad = [w for w in BAD_WORDS if w in out + server_out]
    ok = client.returncode == 0 and server.returncode == 0 and re.search(success, out, re.M) and not bad
    if not ok and retry_calibration and clock_calibration_failed(out + server_out):
        print(f"     {label}: perftest's clock calibration failed (r^2 < 0.9, bandwidth printed as 0.00): again",
              flush=True)
        return pair(label, program, args, success, timeout, retry_calibration=False)
    if not ok:
        failures.append(f"{label}: client {client.returncode} server {server.returncode} {bad}")
        print(f"FAIL {label}\n--- client\n{out[-3000:]}\n--- server\n{server_out[-3000:]}", flush=True)
        return out
    passed += 1
    summary = [line for line in out.splitlines() if re.search(success, line, re.M)]
    print(f"ok   {label} ({time.monotonic() - started:.1f} s) {summary[-1].strip() if summary else ''}", flush=True)
    return out


def dies_under_load(label, limit=30):
    """ib_write_bw -D 10 between rnic0 and rnic1; after 2 s rnic1's daemon is SIGKILLed. The
    client on rnic1 must see error completions (flushed work: status 5) and exit non-zero, the
    server must exit too, both well before the run's 10 s and within `limit`."""
    global passed, port
    port += 1
    common = ["ib_write_bw", "-x", "0", "-F", "-s", "65536", "-D", "10", "-p", str(port)]
    server = subprocess.Popen(in_ns(common + ["-d", "rnic0"]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, stdin=subprocess.DEVNULL)
    end = time.monotonic() + 20
    while not listening(server.pid, port) and server.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    client = subprocess.Popen(in_ns(common + ["-d", "rnic1", "127.0.0.1"]), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    time.sleep(2)
    with open(f"{state}/rnicd-b.pid") as f:
        os.kill(int(f.read()), 9)
    killed = time.monotonic()
    try:
        client_out, _ = client.communicate(timeout=limit)
        server_out, _ = server.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        client.kill()
        server.kill()
        failures.append(f"{label}: still running {limit} s after the daemon died")
        print(f"FAIL {label}: hung", flush=True)
        return
    took = time.monotonic() - killed
    ok = client.returncode > 0 and server.returncode > 0 and "Failed status" in client_out and took < 9
    if ok:
        passed += 1
        status = re.search(r"Failed status \d+", client_out).group(0)
        print(f"ok   {label}: both exited {took:.1f} s after the kill (client {client.returncode}, "
              f"server {server.returncode}, {status!r})", flush=True)
    else:
        failures.append(f"{label}: client {client.returncode} server {server.returncode} after {took:.1f} s")
        print(f"FAIL {label}\n--- client\n{client_out[-1500:]}\n--- server\n{server_out[-1500:]}", flush=True)


def check_captures(tag, expected_opcodes):
    """Both daemons' captures: every frame's ICRC sound (rnic-pcap), frames in them, and every
    opcode the bed's programs must have put on the wire present in each (a capture that stopped
    early or missed a direction fails)."""
    global passed
    for side in "ab":
        pcap = f"{state}/{side}.pcap"
        r = subprocess.run([rnic_pcap, "--quiet", "--json", pcap], capture_output=True, text=True, timeout=300)
        try:
            f = json.loads(r.stdout)["files"][0]
        except (ValueError, KeyError, IndexError):
            failures.append(f"rnic-pcap {pcap} ({tag}): exit {r.returncode}, unreadable output {r.stderr[-300:]!r}")
            continue
        missing = sorted(set(expected_opcodes) - set(f["histogram"]))
        print(f"rnic-pcap {tag} {side}: {f['frames']} frames, {f['rocev2']} RoCEv2, ICRC ok {f['icrc_ok']}, "
              f"{len(f['failed'])} failed, {len(f['histogram'])} opcodes", flush=True)
        if r.returncode != 0 or f["failed"] or f["rocev2"] == 0 or f["icrc_ok"] != f["rocev2"] or missing:
            failures.append(f"rnic-pcap {pcap} ({tag}): exit {r.returncode}, {f['rocev2']} RoCEv2 frames, "
                            f"failed {f['failed'][:10]}, opcodes missing {missing}")
        else:
            passed += 1


PINGPONG_OK = r"\d+ iters in [0-9.]+ seconds"
# bytes, iterations, peak, average (not 0.00), message rate
PERFTEST_BW_OK = r"^\s*\d+\s+\d+\s+[0-9.]+\s+(?!0\.00\s)[0-9.]+\s+[0-9.]+"
PERFTEST_LAT_OK = r"^\s*\d+\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+"

try:
    # ---- jumbo bed: active MTU 4096 ----
    bed("up", "--daemons", "both", "--pcap", "--one-run-dir", "--rnicd", rnicd)
    with open(f"{state}/env") as f:
        env_words = dict(kv.split("=", 1) for kv in f.read().split())
    ip_a = env_words["ip_a"]
    tool("ibv_devices lists both daemons", ["ibv_devices"], [r"^\s+rnic0\s+[0-9a-f]{16}$", r"^\s+rnic1\s+[0-9a-f]{16}$"])
    tool("ibv_devinfo -v", ["ibv_devinfo", "-v", "-d", "rnic0"],
         [r"hca_id:\s+rnic0", r"transport:\s+InfiniBand \(0\)", r"link_layer:\s+Ethernet", r"state:\s+PORT_ACTIVE",
          # the veth's 10 Gb/s, mapped as Linux maps it for every RoCE device
          r"active_width:\s+1X \(1\)", r"active_speed:\s+10\.0 Gbps \(8\)",
          r"active_mtu:\s+4096 \(5\)", rf"GID\[\s*0\]:\s+::ffff:{re.escape(ip_a)}, RoCE v2",
          r"GID\[\s*1\]:\s+fe80::[0-9a-f:]+, RoCE v2", rf"GID\[\s*2\]:\s+{re.escape(env_words['ip6_a'])}, RoCE v2"])

    iters = ["-n", "10"] if quick else ["-n", "20"]
    # 1 B (3 bytes of pad), one packet at 4096 or four at 1024, one byte more (a 1-byte last
    # packet), 64 KiB - 1 (a short last packet and pad) and 64 KiB.
    sizes = [1, 65536] if quick else [1, 4096, 4097, 65535, 65536]
    for program in ("ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_srq_pingpong"):
        for mtu in (1024, 4096):
            for size in sizes:
                extra = ["-q", "4"] if program == "ibv_srq_pingpong" else []
                pair(f"{program} -m {mtu} -s {size} -c", program,
                     ["-g", "0", "-m", str(mtu), "-s", str(size), "-c", *iters, *extra], PINGPONG_OK)
    # -e: completion channels, ibv_req_notify_cq and ibv_get_cq_event in every program.
    for program, extra in (("ibv_rc_pingpong", []), ("ibv_uc_pingpong", []), ("ibv_srq_pingpong", ["-q", "4"])):
        for mtu in (1024, 4096):
            pair(f"{program} -e (events) -m {mtu} -s 65536 -c", program,
                 ["-g", "0", "-e", "-m", str(mtu), "-s", "65536", "-c", *iters, *extra], PINGPONG_OK)
    pair("ibv_ud_pingpong -e (events) -s 4096 -c", "ibv_ud_pingpong", ["-g", "0", "-e", "-s", "4096", "-c", *iters],
         PINGPONG_OK)
    # -N: the new post-send API (ibv_qp_to_qp_ex, ibv_wr_*).
    pair("ibv_rc_pingpong -N (ibv_wr_* API) -s 4097 -c", "ibv_rc_pingpong", ["-g", "0", "-N", "-s", "4097", "-c", *iters],
         PINGPONG_OK)
    # -t: completion timestamps; the program prints receive-completion intervals in device clock
    # cycles (ns here), which must be real intervals, not zero.
    pair("ibv_rc_pingpong -t (completion timestamps)", "ibv_rc_pingpong", ["-g", "0", "-t", "-c", *iters],
         r"Average receive completion clock cycles = [1-9]")
    for size in (1, 1024, 4095, 4096):
        pair(f"ibv_ud_pingpong -s {size} -c", "ibv_ud_pingpong", ["-g", "0", "-s", str(size), "-c", *iters],
             PINGPONG_OK)

    n = ["-n", "100"] if quick else ["-n", "500"]
    common = ["-x", "0", "-F"]  # -F: no CPU-frequency warning (a VM has no governor)
    pair("ib_write_bw 64 KiB", "ib_write_bw", [*common, "-s", "65536", *n], PERFTEST_BW_OK)
    pair("ib_write_bw -a (2 B .. 8 MiB)", "ib_write_bw", [*common, "-a", "-n", "20"], r"^\s*8388608\s+20\s+", 600)
    pair("ib_send_bw 64 KiB", "ib_send_bw", [*common, "-s", "65536", *n], PERFTEST_BW_OK)
    pair("ib_send_bw -e (events)", "ib_send_bw", [*common, "-e", "-s", "4096", *n], PERFTEST_BW_OK)
    pair("ib_send_bw -m 1024 --use_old_post_send", "ib_send_bw",
         [*common, "-m", "1024", "--use_old_post_send", "-s", "10000", *n], PERFTEST_BW_OK)
    pair("ib_send_bw -c UD", "ib_send_bw", [*common, "-c", "UD", *n], PERFTEST_BW_OK)
    pair("ib_read_bw 64 KiB", "ib_read_bw", [*common, "-s", "65536", *n], PERFTEST_BW_OK)
    pair("ib_atomic_bw -A FETCH_AND_ADD", "ib_atomic_bw", [*common, "-A", "FETCH_AND_ADD", *n], PERFTEST_BW_OK)
    pair("ib_atomic_bw -A CMP_AND_SWAP", "ib_atomic_bw", [*common, "-A", "CMP_AND_SWAP", *n], PERFTEST_BW_OK)
    lat_n = ["-n", "100"]
    pair("ib_send_lat 2 B", "ib_send_lat", [*common, "-s", "2", *lat_n], PERFTEST_LAT_OK)
    pair("ib_write_lat 2 B", "ib_write_lat", [*common, "-s", "2", *lat_n], PERFTEST_LAT_OK)
    pair("ib_read_lat 2 B", "ib_read_lat", [*common, "-s", "2", *lat_n], PERFTEST_LAT_OK)
    pair("ib_atomic_lat", "ib_atomic_lat", [*common, *lat_n], PERFTEST_LAT_OK)
    pair("ib_write_lat -m 1024 -s 8192", "ib_write_lat", [*common, "-m", "1024", "-s", "8192", *lat_n],
         PERFTEST_LAT_OK)
    # RoCEv2 over IPv6: the same programs through the link-local (1) and fd77:: (2) GIDs; the
    # daemons find each other's MAC through neighbour discovery.
    pair("ibv_rc_pingpong -g 2 (IPv6) -s 65536 -c", "ibv_rc_pingpong", ["-g", "2", "-s", "65536", "-c", *iters],
         PINGPONG_OK)
    pair("ibv_ud_pingpong -g 1 (IPv6 link-local) -s 1024 -c", "ibv_ud_pingpong",
         ["-g", "1", "-s", "1024", "-c", *iters], PINGPONG_OK)
    pair("ib_write_bw -x 2 (IPv6) 64 KiB", "ib_write_bw", ["-x", "2", "-F", "-s", "65536", *n], PERFTEST_BW_OK)
    pair("ib_send_lat -x 1 (IPv6 link-local) 2 B", "ib_send_lat", ["-x", "1", "-F", "-s", "2", *lat_n],
         PERFTEST_LAT_OK)
    # Paths we do not offer: mlx5 direct verbs (DC transport) and XRC fail with a message, no crash.
    refuses_pair("ib_write_bw -c DC (mlx5 direct verbs) fails cleanly on both sides", "ib_write_bw",
                 ["-x", "0", "-F", "-c", "DC"], r"Unable to create QP")
    refuses("ibv_xsrq_pingpong (XRC) fails cleanly", ["ibv_xsrq_pingpong", "-d", "rnic0", "-g", "0"],
            r"Couldn't Open the XRC Domain")
    bed("down")
    check_captures("jumbo", {
        "RC_SEND_FIRST", "RC_SEND_MIDDLE", "RC_SEND_LAST", "RC_SEND_ONLY", "UC_SEND_FIRST", "UC_SEND_MIDDLE",
        "UC_SEND_LAST", "UC_SEND_ONLY", "UD_SEND_ONLY", "RC_RDMA_WRITE_FIRST", "RC_RDMA_WRITE_MIDDLE",
        "RC_RDMA_WRITE_LAST", "RC_RDMA_WRITE_ONLY", "RC_RDMA_READ_REQUEST", "RC_RDMA_READ_RESPONSE_FIRST",
        "RC_RDMA_READ_RESPONSE_MIDDLE", "RC_RDMA_READ_RESPONSE_LAST", "RC_RDMA_READ_RESPONSE_ONLY", "RC_ACKNOWLEDGE",
        "RC_COMPARE_SWAP", "RC_FETCH_ADD", "RC_ATOMIC_ACKNOWLEDGE"})

    # ---- plain bed: the port's own MTU is 1024 ----
    bed("up", "--daemons", "both", "--pcap", "--one-run-dir", "--rnicd", rnicd, mtu="1500")
    tool("ibv_devinfo active_mtu 1024", ["ibv_devinfo", "-d", "rnic1"], [r"active_mtu:\s+1024 \(3\)"])
    pair("ibv_ud_pingpong at the port MTU (1024)", "ibv_ud_pingpong", ["-g", "0", "-s", "1024", "-c", *iters],
         PINGPONG_OK)
    pair("ibv_rc_pingpong -s 65536 at the port MTU", "ibv_rc_pingpong", ["-g", "0", "-s", "65536", "-c", *iters],
         PINGPONG_OK)
    pair("ib_send_bw -c UD at the port MTU", "ib_send_bw", [*common, "-c", "UD", *n], PERFTEST_BW_OK)
    pair("ib_write_bw 64 KiB at MTU 1024", "ib_write_bw", [*common, "-s", "65536", *n], PERFTEST_BW_OK)
    bed("down", mtu="1500")
    check_captures("plain", {"UD_SEND_ONLY", "RC_SEND_FIRST", "RC_SEND_MIDDLE", "RC_SEND_LAST", "RC_RDMA_WRITE_FIRST",
                             "RC_RDMA_WRITE_MIDDLE", "RC_RDMA_WRITE_LAST", "RC_ACKNOWLEDGE"})

    # ---- a daemon dies under a running program: errors, never a hang ----
    bed("up", "--daemons", "both", "--one-run-dir", "--rnicd", rnicd)
    dies_under_load("ib_write_bw with rnic1's daemon SIGKILLed mid-run")
    bed("down")
except Exception as e:  # a bed that does not come up is a failure, with its reason
    failures.append(str(e))
finally:
    subprocess.run([testbed, "down"], env=base_env, capture_output=True, timeout=60)

verdict = f"{passed} checks passed\n" + ("FAILED: " + "; ".join(failures) if failures else
                                        "all Debian binaries ran on rnicd")
if summary_first:
    progress = sys.stdout.getvalue()
    sys.stdout = real_stdout
    print(f"{verdict}\n--- progress ---\n{progress}{verdict}")
else:
    print(verdict)
sys.exit(1 if failures else 0)
