#!/usr/bin/env python3
"""Debian's unmodified rdmacm-utils and perftest -R between two rnicd, through our
librdmacm.so.1 and libibverbs.so.1 (rnic-run): connections made by rdma_cm, the IB CM on QP 1
of each daemon, never a TCP side channel.

First bed: tools/testbed.sh with both daemons capturing, each in its own run directory (run-a,
run-b; both devices are rnic0), so each program sees one device: servers run in namespace A on
rnic0 (10.x.0.1, fd85::1), clients in namespace B on the other rnicd, and every CM message and
data packet crosses the veth. Over IPv4 and IPv6: rping -v -V -C 100 (and -S up to 65535, its
data checked by rping -V), ucmatose (one and ten connections), udaddy, rdma_server/rdma_client;
over IPv4 only rping -q (the application moves its own QP: rdma_init_qp_attr, rdma_establish),
ucmatose -m (rdma_migrate_id), rdma_xserver/rdma_xclient (RC; the server cannot bind IPv6),
ib_send_bw -R and ib_write_lat -R (perftest asks for AF_INET under -R); an IPv6 wildcard
listener taking an IPv4 client; a connection to a port nobody listens on is REJECTED. Both
captures then pass rnic-pcap (ICRC of every frame, every MAD to QP 1 decoded) and hold the RC
traffic and the CM messages REQ, REP, RTU, DREQ, DREP, REJ, SIDR_REQ, SIDR_REP.
Second bed: both daemons in one run directory (rnic0, rnic1), as one host with two RNICs: a
client with -I <rnic1's address> connects from rnic1, one without a source to rnic0's own
address from rnic0 (looped back), counted by the daemons' cm_req_sent; ucmatose on 0.0.0.0
listens on both devices (a client to rnic1's address finds it there); a connected rping client
whose rnicd is SIGKILLed gets DEVICE_REMOVAL (or its flushed QP) and exits, never hangs (its
server is told only if it had work in flight, as on Linux); a listening rping whose rnicd is
SIGKILLed gets DEVICE_REMOVAL.
A run passes when both sides exit 0 and print their success line, and neither prints an error.
Usage: check_rdmacm_utils.py TESTBED RNICD RNIC_RUN RNIC_PCAP [--quick] [--summary-first]"""
import io
import json
import os
import re
import subprocess
import sys
import threading
import time

from perftest_output import clock_calibration_failed

testbed, rnicd, rnic_run, rnic_pcap = sys.argv[1:5]
quick = "--quick" in sys.argv[5:]
summary_first = "--summary-first" in sys.argv[5:]
real_stdout = sys.stdout
if summary_first:
    sys.stdout = io.StringIO()
name = f"rnicm{os.getpid() % 10000}"
state = f"/tmp/{name}"
base_env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.85.0",
                RNIC_TESTBED_NET6="fd85::")
failures = []
passed = 0
port = 20000 + os.getpid() % 12000
BAD_WORDS = ("Failed", "failed", "Couldn't", "error", "Unable", "invalid", "mismatch", "failure", "unhandled",
             "removal")


def bed(*args, timeout=60):
    r = subprocess.run([testbed, *args], env=base_env, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError(f"testbed {' '.join(args)}: {r.stdout}{r.stderr}")
    return r.stdout


# The second bed puts both daemons in one run directory (rnic0 in A, rnic1 in B), as one host
# with two RNICs: every program then sees both, and the library picks the device by address.
one_run_dir = False


def run_dir(side):
    return f"{state}/run" if one_run_dir else f"{state}/run-{side}"


def on(side, args):
    """`args` in namespace `side` (a: the server's, b: the client's) on that side's rnicd only
    (on the second bed: in A, seeing both), its stdout line-buffered so that a run killed for
    hanging still shows how far it got."""
    ns = "a" if one_run_dir else side
    return ["ip", "netns", "exec", f"{name}-{ns}", rnic_run, "--run-dir", run_dir(side), "stdbuf", "-oL", *args]


def rnicctl(device, *command):
    tool = os.path.join(os.path.dirname(rnic_pcap), "rnicctl")
    r = subprocess.run([tool, "--run-dir", run_dir("a"), "-d", device, *command], capture_output=True, text=True,
                       timeout=10, stdin=subprocess.DEVNULL)
    return r.stdout


def counter(device, counter_name):
    m = re.search(rf"^\s*{counter_name} (\d+)$", rnicctl(device, "stat"), re.M)
    return int(m.group(1)) if m else -1


def listening(port, timeout=20):
    """Waits until rnicd on A has an rdma_cm id listening on `port` (rnicctl cm); False if none
    does within `timeout` s."""
    want = re.compile(rf"state LISTEN .* src \S+:{port} ")
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if want.search(rnicctl("rnic0", "cm")):
            return True
        time.sleep(0.05)
    return False


def next_port():
    global port
    port += 1
    return str(port)


class Program:
    """A program whose output is read as it comes: a pipe left unread fills (64 KiB, less with
    long lines written in pieces) and stops the program mid-run."""

    def __init__(self, args, side="a"):
        self.proc = subprocess.Popen(on(side, args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     stdin=subprocess.DEVNULL)
        self.chunks = []
        self.reader = threading.Thread(target=lambda: self.chunks.append(self.proc.stdout.read()), daemon=True)
        self.reader.start()

    def finish(self, timeout):
        """(exit status, output); TimeoutExpired if it is still running after `timeout` s."""
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.reader.join(timeout=10)
        return self.proc.returncode, "".join(self.chunks)

    def output(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout=10)
        return "".join(self.chunks)


def run_pair(label, server_args, client_args, server_ok, client_ok, port, timeout=120, retry_race=False):
    """Server on A, then, once it listens on `port`, the client on B. Both must exit 0, print
    their success pattern and no error word. `retry_race`: perftest -R connects its QPs right
    after its own data exchange, racing the server's second rdma_listen (a loaded machine loses
    it: REJECTED, reason 8, on Linux too); such a run is tried once more, as is one whose clock
    calibration failed (perftest_output.py)."""
    global passed
    started = time.monotonic()
    server = Program(server_args)
    if not listening(port):
        failures.append(f"{label}: the server never listened on {port}")
        print(f"FAIL {label}: no listener\n{server.output()[-2000:]}", flush=True)
        return None
    try:
        client = subprocess.run(on("b", client_args), capture_output=True, text=True, timeout=timeout,
                                stdin=subprocess.DEVNULL)
        client_out = client.stdout + client.stderr
        if retry_race and "RDMA_CM_EVENT_REJECTED; error: 8" in client_out:
            server.output()  # it would wait for the QP connection that lost the race
            time.sleep(0.5)  # its session (and listener) reclaimed by rnicd
            print(f"     {label}: the client's QP connection beat the server's listen (REJECTED 8): again",
                  flush=True)
            return run_pair(label, server_args, client_args, server_ok, client_ok, port, timeout)
        server_rc, server_out = server.finish(timeout)
    except subprocess.TimeoutExpired as e:
        server_out = server.output()
        out = e.output.decode(errors="replace") if isinstance(e.output, bytes) else (e.output or "")
        failures.append(f"{label}: timed out after {timeout} s")
        print(f"FAIL {label}: timed out\n--- client\n{out[-2000:]}\n--- server\n{server_out[-2000:]}", flush=True)
        return None
    bad = [w for w in BAD_WORDS if w in client_out + server_out]
    ok = (client.returncode == 0 and server_rc == 0 and re.search(client_ok, client_out, re.M)
          and re.search(server_ok, server_out, re.M) and not bad)
    if not ok and retry_race and clock_calibration_failed(client_out + server_out):
        print(f"     {label}: perftest's clock calibration failed (r^2 < 0.9, bandwidth printed as 0.00): again",
              flush=True)
        time.sleep(0.5)  # the finished server's session (and listener) reclaimed by rnicd
        return run_pair(label, server_args, client_args, server_ok, client_ok, port, timeout)
    if not ok:
        failures.append(f"{label}: client {client.returncode} server {server_rc} {bad}")
        print(f"FAIL {label}\n--- client\n{client_out[-3000:]}\n--- server\n{server_out[-3000:]}", flush=True)
        return None
    passed += 1
    line = [ln for ln in client_out.splitlines() if re.search(client_ok, ln)]
    print(f"ok   {label} ({time.monotonic() - started:.1f} s) {line[-1].strip()[:100] if line else ''}", flush=True)
    return client_out, server_out


def rping(label, server_ip, count, size=None):
    p = next_port()
    extra = ["-S", str(size)] if size else []
    res = run_pair(label, ["rping", "-s", "-a", server_ip, "-p", p, "-v", "-V", "-C", str(count), *extra],
                   ["rping", "-c", "-a", server_ip, "-p", p, "-v", "-V", "-C", str(count), *extra],
                   r"server ping data: rdma-ping", r"ping data: rdma-ping", p)
    if res is None:
        return
    pings = len(re.findall(r"^ping data: rdma-ping-", res[0], re.M))
    if pings != count:
        global passed
        passed -= 1
        failures.append(f"{label}: the client printed {pings} pings, not {count}")
        print(f"FAIL {label}: {pings} pings of {count}", flush=True)


def cmtime(server_ip, conns, limit=120):
    """cmtime: `conns` connections at once (issue 13's figure), every step timed by cmtime itself.
    Its server serves until killed, so only the client's exit and table are judged."""
    global passed
    label = f"cmtime -c {conns}"
    p = next_port()
    server = Program(["cmtime", "-b", server_ip, "-p", p, "-c", conns])
    if not listening(p):
        failures.append(f"{label}: the server never listened on {p}")
        print(f"FAIL {label}: no listener\n{server.output()[-2000:]}", flush=True)
        return
    try:
        r = subprocess.run(on("b", ["cmtime", "-s", server_ip, "-p", p, "-c", conns]), capture_output=True,
                           text=True, timeout=limit, stdin=subprocess.DEVNULL)
        out = r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        failures.append(f"{label}: the client still runs after {limit} s")
        print(f"FAIL {label}: timed out\n--- server\n{server.output()[-2000:]}", flush=True)
        return
    server_out = server.output()
    steps = dict(re.findall(r"^(\w[\w ]*?)\s*:\s+([0-9.]+)", out, re.M))
    bad = [w for w in BAD_WORDS if w in out + server_out]
    if r.returncode != 0 or "connect" not in steps or bad:
        failures.append(f"{label}: client exit {r.returncode}, steps {sorted(steps)}, {bad}")
        print(f"FAIL {label}\n--- client\n{out[-2000:]}\n--- server\n{server_out[-2000:]}", flush=True)
        return
    passed += 1
    ms = float(steps["connect"])
    print(f"ok   {label}: {conns} connections in {ms:.0f} ms ({int(conns) / ms * 1000:,.0f}/s); resolve addr "
          f"{steps.get('resolve addr', '?')} ms, create qp {steps.get('create qp', '?')} ms, disconnect "
          f"{steps.get('disconnect', '?')} ms", flush=True)


def expect_failure(label, args, expect, limit=30):
    """A client alone (nobody listens): a clean error exit with `expect`, within `limit` s."""
    global passed
    started = time.monotonic()
    try:
        r = subprocess.run(on("b", args), capture_output=True, text=True, timeout=limit, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        failures.append(f"{label}: hung for {limit} s")
        print(f"FAIL {label}: hung", flush=True)
        return
    out = r.stdout + r.stderr
    m = re.search(expect, out)
    if r.returncode < 0 or m is None:
        failures.append(f"{label}: exit {r.returncode}, output {out[-500:]!r}")
        print(f"FAIL {label}\n{out[-2000:]}", flush=True)
        return
    passed += 1
    print(f"ok   {label}: exit {r.returncode} in {time.monotonic() - started:.1f} s, {m.group(0)!r}", flush=True)


def daemon_killed(label, server_ip, client_source, limit=30, server_limit=30):
    """rping with many iterations; after 2 s the client's rnicd (B) is SIGKILLed. The client must
    report the loss and exit non-zero within `limit` s: DEVICE_REMOVAL, or its QP's flushed work
    first (rping then stops in its ERROR state, 11). Its server must be told too, within
    `server_limit` s: by its RC retries if it had work in flight, else (waiting for the client's
    next message, as Linux's would for ever) by rnicd's CM, whose probes of the silent peer go
    unanswered (5 s idle + 4 probes 2 s apart): DISCONNECTED, and rping's server gives up."""
    global passed
    p = next_port()
    args = ["-a", server_ip, "-p", p, "-v", "-C", "1000000"]
    server = Program(["rping", "-s", *args])
    listening(p)
    # Read as it runs: a client stalled on a full pipe would have nothing in flight.
    client = Program(["rping", "-c", *args, "-I", client_source], side="b")
    time.sleep(2)
    with open(f"{state}/rnicd-b.pid") as f:
        os.kill(int(f.read()), 9)
    killed = time.monotonic()
    try:
        client_rc, client_out = client.finish(limit)
    except subprocess.TimeoutExpired:
        client_out, server_out = client.output(), server.output()
        failures.append(f"{label}: the client still runs {limit} s after its daemon died")
        print(f"FAIL {label}: hung\n--- client\n{client_out[-1500:]}\n--- server\n{server_out[-1500:]}", flush=True)
        return
    client_took = time.monotonic() - killed
    try:
        server_rc, server_out = server.finish(max(1.0, server_limit - (time.monotonic() - killed)))
    except subprocess.TimeoutExpired:
        server_out = server.output()
        failures.append(f"{label}: the server still waits {server_limit} s after its peer's daemon died")
        print(f"FAIL {label}: server hung\n--- server\n{server_out[-1500:]}", flush=True)
        return
    server_took = time.monotonic() - killed
    told = re.search(r"cma detected device removal|cq completion failed status \d+|wait for \w+ state 11", client_out)
    server_told = re.search(r"server DISCONNECT EVENT|cq completion failed status \d+", server_out)
    pinged = "ping data: rdma-ping" in client_out
    if client_rc <= 0 or told is None or not pinged or server_rc < 0 or server_told is None:
        failures.append(f"{label}: client {client_rc} server {server_rc}, told {bool(told)}/{bool(server_told)}, "
                        f"pinged {pinged}")
        print(f"FAIL {label}\n--- client\n{client_out[-1500:]}\n--- server\n{server_out[-1500:]}", flush=True)
        return
    passed += 1
    print(f"ok   {label}: client exited {client_rc} {client_took:.1f} s after the kill ({told.group(0)!r}); "
          f"server exited {server_rc} {server_took:.1f} s after it ({server_told.group(0)!r})", flush=True)


def listener_removed(label, server_ip, limit=20):
    """rping -s listening on A; A's rnicd is SIGKILLed: the listening id gets DEVICE_REMOVAL
    (rping prints it) and the server exits with an error instead of waiting for ever."""
    global passed
    p = next_port()
    server = Program(["rping", "-s", "-a", server_ip, "-p", p, "-C", "1"])
    listening(p)
    with open(f"{state}/rnicd-a.pid") as f:
        os.kill(int(f.read()), 9)
    killed = time.monotonic()
    try:
        rc, out = server.finish(limit)
    except subprocess.TimeoutExpired:
        failures.append(f"{label}: still running {limit} s after the daemon died")
        print(f"FAIL {label}: hung\n{server.output()[-1500:]}", flush=True)
        return
    if rc <= 0 or "cma detected device removal" not in out:
        failures.append(f"{label}: exit {rc}, output {out[-300:]!r}")
        print(f"FAIL {label}\n{out[-1500:]}", flush=True)
        return
    passed += 1
    print(f"ok   {label}: DEVICE_REMOVAL, exit {rc} {time.monotonic() - killed:.1f} s after the kill", flush=True)


def device_choice(label, server_ip, source, device, other):
    """rping on the second bed, where the client sees both devices: its REQ must leave from
    `device` (the one owning its source address, or the destination itself), not from `other`."""
    global passed
    before = {d: counter(d, "cm_req_sent") for d in (device, other)}
    p = next_port()
    source_args = ["-I", source] if source else []
    if run_pair(label, ["rping", "-s", "-a", server_ip, "-p", p, "-C", "3", "-v"],
                ["rping", "-c", "-a", server_ip, "-p", p, "-C", "3", "-v", *source_args],
                r"server ping data", r"ping data", p) is None:
        return
    after = {d: counter(d, "cm_req_sent") for d in (device, other)}
    if after[device] != before[device] + 1 or after[other] != before[other]:
        passed -= 1
        failures.append(f"{label}: REQs sent before {before}, after {after}")
        print(f"FAIL {label}: REQs sent before {before}, after {after}", flush=True)


def wildcard_on_every_device(label, ip_b):
    """ucmatose listening on 0.0.0.0 on the second bed: the library listens on both devices, so a
    client connecting to rnic1's address (looped back on rnic1) finds the listener there."""
    global passed
    before = counter("rnic1", "cm_req_received")
    p = next_port()
    if run_pair(label, ["ucmatose", "-p", p], ["ucmatose", "-s", ip_b, "-p", p], DATA_OK, DATA_OK, p) is None:
        return
    after = counter("rnic1", "cm_req_received")
    if after != before + 1:
        passed -= 1
        failures.append(f"{label}: rnic1 received {after - before} REQs")
        print(f"FAIL {label}: rnic1 received {after - before} REQs, not 1", flush=True)


def check_captures(expected_opcodes, expected_mads):
    """Both captures: every frame's ICRC sound and every MAD to QP 1 decoded (rnic-pcap fails a
    frame otherwise), the data opcodes and the CM messages of the runs present."""
    global passed
    for side in "ab":
        pcap = f"{state}/{side}.pcap"
        r = subprocess.run([rnic_pcap, "--quiet", "--json", pcap], capture_output=True, text=True, timeout=300)
        try:
            f = json.loads(r.stdout)["files"][0]
        except (ValueError, KeyError, IndexError):
            failures.append(f"rnic-pcap {pcap}: exit {r.returncode}, unreadable output {r.stderr[-300:]!r}")
            continue
        missing = sorted(set(expected_opcodes) - set(f["histogram"])) + sorted(set(expected_mads) - set(f["mads"]))
        mads = ", ".join(f"{n} {name.removeprefix('CM ')}" for name, n in sorted(f["mads"].items()))
        print(f"rnic-pcap {side}: {f['frames']} frames, {f['rocev2']} RoCEv2, ICRC ok {f['icrc_ok']}, "
              f"{len(f['failed'])} failed, {len(f['histogram'])} opcodes; MADs: {mads}", flush=True)
        if r.returncode != 0 or f["failed"] or f["rocev2"] == 0 or f["icrc_ok"] != f["rocev2"] or missing:
            failures.append(f"rnic-pcap {pcap}: exit {r.returncode}, {f['rocev2']} RoCEv2 frames, "
                            f"failed {f['failed'][:10]}, missing {missing}")
        else:
            passed += 1


DATA_OK = r"^data transfers complete"
PERFTEST_BW_OK = r"^\s*\d+\s+\d+\s+[0-9.]+\s+(?!0\.00\s)[0-9.]+\s+[0-9.]+"
PERFTEST_LAT_OK = r"^\s*\d+\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+"

try:
    bed("up", "--daemons", "both", "--pcap", "--rnicd", rnicd)
    with open(f"{state}/env") as f:
        env_words = dict(kv.split("=", 1) for kv in f.read().split())
    for family, ip in (("IPv4", env_words["ip_a"]), ("IPv6", env_words["ip6_a"])):
        rping(f"rping -v -V -C 100 ({family})", ip, 10 if quick else 100)
        # 65535: the largest rping takes (its RPING_BUFSIZE, 64 KiB, less one).
        for size in ((65535,) if quick else (4096, 65535)):
            rping(f"rping -S {size} -V -C 10 ({family})", ip, 10, size)
        # The servers listen where -b (rdma_server: -s) says; without it rdma_getaddrinfo's first
        # passive answer is 0.0.0.0, which takes no IPv6 connection (Linux's rule too).
        bind = ["-b", ip] if family == "IPv6" else []
        p = next_port()
        run_pair(f"ucmatose ({family})", ["ucmatose", "-p", p, *bind], ["ucmatose", "-s", ip, "-p", p], DATA_OK,
                 DATA_OK, p)
        p = next_port()
        run_pair(f"ucmatose -c 10 ({family})", ["ucmatose", "-p", p, "-c", "10", *bind],
                 ["ucmatose", "-s", ip, "-p", p, "-c", "10"], DATA_OK, DATA_OK, p)
        run_pair(f"udaddy ({family})", ["udaddy", *bind], ["udaddy", "-s", ip], DATA_OK, DATA_OK, "7174")
        p = next_port()
        run_pair(f"rdma_server/rdma_client ({family})", ["rdma_server", "-p", p, *(["-s", ip] if bind else [])],
                 ["rdma_client", "-s", ip, "-p", p], r"rdma_server: end 0", r"rdma_client: end 0", p)
        if family == "IPv4":
            # rping -q moves its own QP with rdma_init_qp_attr and sends the RTU with
            # rdma_establish; ucmatose -m migrates every id to a new channel.
            p = next_port()
            run_pair("rping -q (the application's own QP: rdma_init_qp_attr, rdma_establish)",
                     ["rping", "-s", "-q", "-a", ip, "-p", p, "-v", "-V", "-C", "10"],
                     ["rping", "-c", "-q", "-a", ip, "-p", p, "-v", "-V", "-C", "10"], r"server ping data",
                     r"ping data: rdma-ping-9", p)
            p = next_port()
            run_pair("ucmatose -m -c 3 (rdma_migrate_id)", ["ucmatose", "-m", "-p", p, "-c", "3"],
                     ["ucmatose", "-m", "-s", ip, "-p", p, "-c", "3"], DATA_OK, DATA_OK, p)
            # rdma_xserver has no bind option: it listens on 0.0.0.0 only.
            p = next_port()
            run_pair("rdma_xserver/rdma_xclient RC", ["rdma_xserver", "-p", p], ["rdma_xclient", "-s", ip, "-p", p],
                     r"rdma_xserver: end 0", r"rdma_xclient: end 0", p)
            # perftest 4.5-0.17 asks rdma_getaddrinfo for AF_INET only under -R.
            p = next_port()
            n = ["-n", "100"] if quick else ["-n", "1000"]
            run_pair("ib_send_bw -R", ["ib_send_bw", "-R", "-F", "-p", p, *n],
                     ["ib_send_bw", "-R", "-F", "-p", p, *n, ip], PERFTEST_BW_OK, PERFTEST_BW_OK, p, retry_race=True)
            p = next_port()
            run_pair("ib_write_lat -R", ["ib_write_lat", "-R", "-F", "-p", p, "-n", "100"],
                     ["ib_write_lat", "-R", "-F", "-p", p, "-n", "100", ip], PERFTEST_LAT_OK, PERFTEST_LAT_OK, p,
                     retry_race=True)
    cmtime(env_words["ip_a"], "200" if quick else "1000")
    # A listener on :: without AFONLY takes IPv4 connections too, as Linux's.
    p = next_port()
    run_pair("ucmatose server on :: takes an IPv4 client", ["ucmatose", "-p", p, "-b", "::"],
             ["ucmatose", "-s", env_words["ip_a"], "-p", p], DATA_OK, DATA_OK, p)
    # Nobody listens on the port: the server's CM rejects (reason 8, invalid service ID).
    expect_failure("ucmatose to a port nobody listens on is REJECTED",
                   ["ucmatose", "-s", env_words["ip_a"], "-p", next_port()], r"RDMA_CM_EVENT_REJECTED, error: \d+")
    expect_failure("rping to a port nobody listens on is REJECTED",
                   ["rping", "-c", "-a", env_words["ip_a"], "-p", next_port(), "-C", "1"],
                   r"RDMA_CM_EVENT_REJECTED, error \d+")
    bed("down")
    check_captures({"UD_SEND_ONLY", "RC_SEND_ONLY", "RC_RDMA_WRITE_ONLY", "RC_RDMA_READ_REQUEST",
                    "RC_RDMA_READ_RESPONSE_ONLY", "RC_ACKNOWLEDGE"},
                   {"CM REQ", "CM REP", "CM RTU", "CM DREQ", "CM DREP", "CM REJ", "CM SIDR_REQ", "CM SIDR_REP"})

    # One host, two devices: the library picks the device; then daemons die under connections
    # (a bed of its own: a killed daemon's capture would end mid-frame).
    one_run_dir = True
    bed("up", "--daemons", "both", "--one-run-dir", "--rnicd", rnicd)
    device_choice("rping -I <rnic1's address>: the client's id on rnic1 (its source's device)", env_words["ip_a"],
                  env_words["ip_b"], "rnic1", "rnic0")
    device_choice("rping to rnic0's own address without a source: rnic0, looped back", env_words["ip_a"], None,
                  "rnic0", "rnic1")
    wildcard_on_every_device("ucmatose on 0.0.0.0 listens on both devices (a client on rnic1's address)",
                             env_words["ip_b"])
    daemon_killed("rping with the client's rnicd SIGKILLed", env_words["ip_a"], env_words["ip_b"])
    listener_removed("rping -s listening when its own rnicd is SIGKILLed", env_words["ip_a"])
    bed("down")
except Exception as e:  # a bed that does not come up is a failure, with its reason
    failures.append(str(e))
finally:
    subprocess.run([testbed, "down"], env=base_env, capture_output=True, timeout=60)

verdict = f"{passed} checks passed\n" + ("FAILED: " + "; ".join(failures) if failures else
                                        "rdmacm-utils and perftest -R ran on rnicd")
if summary_first:
    progress = sys.stdout.getvalue()
    sys.stdout = real_stdout
    print(f"{verdict}\n--- progress ---\n{progress}{verdict}")
else:
    print(verdict)
sys.exit(1 if failures else 0)
