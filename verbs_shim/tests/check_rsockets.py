#!/usr/bin/env python3
"""rsockets between two rnicd through our librdmacm.so.1 (rnic-run): Debian's unmodified
rdmacm-utils rstream, riostream and rcopy, and rsocket_probe (ours) for what those leave out.

The bed: tools/testbed.sh with both daemons capturing, each program on one device: servers in
namespace A on rnic0 (10.x.0.1, fd86::1), clients in namespace B on the other rnicd, so every CM
message and RDMA WRITE crosses the veth. First bed, veth MTU 9000 (path MTU 4096):
  rstream  custom sizes from 64 B to 1 MB, non-blocking (its default), blocking (-T b), with
           rpoll (-T a), data verified (-T v); over IPv6; through rdma_getaddrinfo (-T r); and
           rstream's own full run (latency then bandwidth, 64 B to 1 MB, two connections)
  riostream riowrite into the peer's riomap'ed buffer with the marker ping-pong (2000-byte
           transfers, 2000 iterations), 64 KiB verified, blocking and with rpoll
  rcopy    a 32 MiB random file and an odd-sized one, compared by SHA-256
  probe    options and their read-back, MSG_PEEK/MSG_WAITALL, vectored I/O, half-close, a
           non-blocking connect and accept through rpoll, refused connects, riomap at an
           offset, rselect beside a pipe, keepalives on an idle connection, a peer SIGKILLed
           under a blocked rrecv; and plain POSIX socket calls under Debian's librspreload
Then both captures must pass rnic-pcap (ICRC of every frame, MADs decoded), hold the opcodes
rsockets use (WRITE WITH IMMEDIATE, plain WRITE for riowrite and keepalives, the CM's MADs),
every immediate must carry an rsocket op with a sane argument, and keepalives (zero-length
RDMA WRITEs) must be there.
Second bed, veth MTU 1500 (path MTU 1024, as rxe's golden capture): `rstream -S 4000 -C 5`,
whose RDMA WRITEs per side (opcodes, lengths, immediates, where each lands relative to the
peer's connection data) must be those of rdma-core's rsockets in
rxe_write_imm_rstream_mtu1024_s4000.pcap, and whose capture tshark decodes as rnic-pcap does.
Third bed: 2% of the RoCEv2 frames lost each way, rstream and riostream with their data verified.
Usage: check_rsockets.py TESTBED RNICD RNIC_RUN RNIC_PCAP PROBE GOLDEN_DIR [--quick] [--summary-first]"""
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import threading
import time

testbed, rnicd, rnic_run, rnic_pcap, probe, golden_dir = sys.argv[1:7]
quick = "--quick" in sys.argv[7:]
summary_first = "--summary-first" in sys.argv[7:]
real_stdout = sys.stdout
if summary_first:
    sys.stdout = io.StringIO()
name = f"rnirs{os.getpid() % 10000}"
state = f"/tmp/{name}"
base_env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.86.0",
                RNIC_TESTBED_NET6="fd86::")
failures = []
passed = 0
port = 20000 + os.getpid() % 12000
BAD_WORDS = ("Failed", "failed", "error", "Unable", "invalid", "mismatch", "FAIL", "usage")
RSTREAM_OK = r"^\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+[0-9.]+s\s+[0-9.]+\s+[0-9.]+$"


def bed(*args, mtu="9000", timeout=60):
    r = subprocess.run([testbed, *args], env=dict(base_env, RNIC_TESTBED_MTU=mtu), capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError(f"testbed {' '.join(args)}: {r.stdout}{r.stderr}")
    return r.stdout


def on(side, args):
    return ["ip", "netns", "exec", f"{name}-{side}", rnic_run, "--run-dir", f"{state}/run-{side}", "stdbuf", "-oL",
            *args]


def next_port():
    global port
    port += 1
    return str(port)


def ok(label, detail=""):
    global passed
    passed += 1
    print(f"ok   {label}{' ' + detail if detail else ''}", flush=True)


def fail(label, detail):
    failures.append(label)
    print(f"FAIL {label}\n{detail}", flush=True)


class Program:
    """A program whose output is read as it comes (a full pipe would stop it)."""

    def __init__(self, args, side="a"):
        self.proc = subprocess.Popen(on(side, args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     stdin=subprocess.DEVNULL)
        self.chunks = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.chunks.append(line)

    def text(self):
        return "".join(self.chunks)

    def finish(self, timeout):
        """(exit status, output), or (None, output) after killing it at `timeout`."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.reader.join(timeout=10)
            return None, self.text()
        self.reader.join(timeout=10)
        return self.proc.returncode, self.text()


def run_pair(label, server_args, client_args, server_ok, client_ok, timeout=120, settle=0.7, server_exits=True):
    """Server on A, then the client on B: both exit 0 (a server that never exits, rcopy's, is
    stopped once the client is done), print their success pattern and no error word."""
    started = time.monotonic()
    server = Program(server_args)
    time.sleep(settle)
    client = Program(client_args, side="b")
    client_rc, client_out = client.finish(timeout)
    if server_exits:
        server_rc, server_out = server.finish(timeout if client_rc is not None else 5)
    else:
        time.sleep(0.5)
        server.proc.terminate()
        server_rc, server_out = server.finish(10)
        server_rc = 0 if server_rc in (0, -15) else server_rc
    text = client_out + server_out
    bad = [w for w in BAD_WORDS if w in text]
    good = (client_rc == 0 and server_rc == 0 and re.search(client_ok, client_out, re.M) and
            re.search(server_ok, server_out, re.M) and not bad)
    if not good:
        fail(label, f"client {client_rc} server {server_rc} {bad}\n--- client\n{client_out[-3000:]}\n"
                    f"--- server\n{server_out[-3000:]}")
        return None
    lines = [ln for ln in client_out.splitlines() if re.search(client_ok, ln)]
    ok(label, f"({time.monotonic() - started:.1f} s) {lines[-1].strip()[:110] if lines else ''}")
    return client_out, server_out


def rstream(label, ip, args, timeout=120):
    p = next_port()
    return run_pair(label, ["rstream", "-b", ip, "-p", p, *args], ["rstream", "-s", ip, "-p", p, *args],
                    RSTREAM_OK, RSTREAM_OK, timeout)


def riostream(label, ip, args, timeout=120):
    p = next_port()
    return run_pair(label, ["riostream", "-b", ip, "-p", p, *args], ["riostream", "-s", ip, "-p", p, *args],
                    RSTREAM_OK, RSTREAM_OK, timeout)


def rcopy(label, ip, size):
    src, dst = f"{state}/rcopy-src-{size}", f"{state}/rcopy-dst-{size}"
    with open(src, "wb") as f:
        f.write(os.urandom(size))
    p = next_port()
    res = run_pair(label, ["rcopy", "-p", p], ["rcopy", src, f"{ip}:{dst}", "-p", p],
                   r"transferring\.\.\.\d+ bytes\.\.\.closing\.\.\.done", r"\d+ bytes in [0-9.]+ seconds",
                   server_exits=False)
    if res is None:
        return
    digests = [hashlib.sha256(open(f, "rb").read()).hexdigest() if os.path.exists(f) else None for f in (src, dst)]
    if digests[0] != digests[1]:
        global passed
        passed -= 1
        fail(f"{label}: SHA-256", f"source {digests[0]} copy {digests[1]}")
    else:
        print(f"     {label}: SHA-256 {digests[0][:16]}... equal", flush=True)


def probe_pair(scenario, ip, mtu, timeout=60):
    p = next_port()
    run_pair(f"probe {scenario}", [probe, "server", ip, p, scenario, mtu], [probe, "client", ip, p, scenario, mtu],
             rf"^server {scenario}: 0 failures", rf"^client {scenario}: 0 failures", timeout)


PRELOAD = "/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so"


def probe_preload(ip):
    """The POSIX socket calls under Debian's librspreload (its socket() becomes rsocket(), poll()
    rpoll(), ...): plain programs talk RDMA through our library."""
    if not os.path.exists(PRELOAD):
        fail("probe plain under librspreload", f"{PRELOAD} is missing (Debian's librdmacm1)")
        return
    p = next_port()
    pre = ["env", f"LD_PRELOAD={PRELOAD}", probe]
    run_pair("probe plain under librspreload (socket, bind, accept, connect, poll, send, recv, shutdown)",
             [*pre, "server", ip, p, "plain"], [*pre, "client", ip, p, "plain"], r"^server plain: 0 failures",
             r"^client plain: 0 failures")


def probe_refused(ip):
    prog = Program([probe, "client", ip, next_port(), "refused"], side="b")
    rc, out = prog.finish(60)
    if rc != 0 or "FAIL" in out:
        fail("probe refused", out[-2000:])
    else:
        ok("probe refused", "(blocking ECONNREFUSED; non-blocking POLLERR and SO_ERROR)")


def probe_peer_death(ip):
    """The client connects, says hello and sleeps; it is SIGKILLed: its rnicd ends the session
    and sends DREQ, the server's rrecv (asleep in it) returns end of stream, never hangs."""
    p = next_port()
    server = Program([probe, "server", ip, p, "peerdeath"])
    time.sleep(0.7)
    client = Program([probe, "client", ip, p, "peerdeath"], side="b")
    end = time.monotonic() + 20
    while "ready" not in client.text() and time.monotonic() < end:
        time.sleep(0.05)
    while "waiting" not in server.text() and time.monotonic() < end:
        time.sleep(0.05)
    # The probe itself, not the namespace or rnic-run wrappers (exec'd into it: one pid).
    client.proc.kill()
    client.finish(10)
    rc, out = server.finish(30)
    if rc != 0 or "FAIL" in out:
        fail("probe peerdeath", f"server {rc}\n{out[-2000:]}")
    else:
        m = re.search(r"peer gone after ([0-9.]+) s", out)
        ok("probe peerdeath", f"(rrecv returned {m.group(1) if m else '?'} s after the client was killed)")


def tshark_fields(pcap, fields, display_filter):
    r = subprocess.run(["tshark", "-r", pcap, "-Y", display_filter, "-T", "fields", "-E", "separator=\t",
                        *sum((["-e", f] for f in fields), [])], capture_output=True, text=True, timeout=300)
    return [ln.split("\t") for ln in r.stdout.splitlines()]


def check_captures():
    """rnic-pcap over both captures; every immediate an rsocket op; keepalives present."""
    global passed
    for side in "ab":
        pcap = f"{state}/{side}.pcap"
        r = subprocess.run([rnic_pcap, "--quiet", "--json", pcap], capture_output=True, text=True, timeout=300)
        try:
            f = json.loads(r.stdout)["files"][0]
        except (ValueError, KeyError, IndexError):
            fail(f"rnic-pcap {pcap}", f"exit {r.returncode}, unreadable output {r.stderr[-300:]!r}")
            continue
        want_ops = {"UD_SEND_ONLY", "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", "RC_RDMA_WRITE_ONLY", "RC_RDMA_WRITE_FIRST",
                    "RC_RDMA_WRITE_MIDDLE", "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", "RC_ACKNOWLEDGE"}
        want_mads = {"CM REQ", "CM REP", "CM RTU", "CM DREQ", "CM DREP", "CM REJ"}
        missing = sorted(want_ops - set(f["histogram"])) + sorted(want_mads - set(f["mads"]))
        mads = ", ".join(f"{n} {k.removeprefix('CM ')}" for k, n in sorted(f["mads"].items()))
        print(f"rnic-pcap {side}: {f['frames']} frames, {f['rocev2']} RoCEv2, ICRC ok {f['icrc_ok']}, "
              f"{len(f['failed'])} failed; MADs: {mads}", flush=True)
        if r.returncode != 0 or f["failed"] or f["icrc_ok"] != f["rocev2"] or missing:
            fail(f"rnic-pcap {pcap}", f"exit {r.returncode}, failed {f['failed'][:10]}, missing {missing}")
        else:
            passed += 1
        # The immediates: what only a WRITE WITH IMMEDIATE's last packet carries.
        rows = tshark_fields(pcap, ["ip.src", "infiniband.immdt"], "infiniband.immdt")
        ops = {}
        bad = []
        for src, imm in rows:
            v = int(imm.split(",")[0], 16)
            op, arg = v >> 29, v & 0x1FFFFFFF
            ops[op] = ops.get(op, 0) + 1
            if op == 0 and not 0 < arg <= 65536:
                bad.append(f"DATA length {arg}")
            elif op == 7 and arg not in (0, 2):
                bad.append(f"CTRL {arg}")
            elif op not in (0, 4, 6, 7):
                bad.append(f"op {op}")
        names = {0: "DATA", 4: "SGL", 6: "IOMAP_SGL", 7: "CTRL"}
        summary = ", ".join(f"{n} {names.get(k, k)}" for k, n in sorted(ops.items()))
        if bad or not all(k in ops for k in (0, 4, 6, 7)):
            fail(f"immediates in {side}.pcap", f"{summary}; bad: {bad[:10]}")
        else:
            ok(f"immediates in {side}.pcap", f"({summary})")
    # Keepalives: zero-length RDMA WRITE ONLY from the probe's client (B) during its idle wait.
    rows = tshark_fields(f"{state}/b.pcap", ["ip.src"],
                         "infiniband.bth.opcode == 10 && infiniband.reth.dmalen == 0")
    if len(rows) < 2:
        fail("keepalives on the wire", f"{len(rows)} zero-length RDMA WRITEs")
    else:
        ok("keepalives on the wire", f"({len(rows)} zero-length RDMA WRITE ONLY)")


def write_messages(pcap):
    """Per sender, its RDMA WRITE messages: (first opcode, length, immediate, va, rkey)."""
    rows = tshark_fields(pcap, ["ip.src", "infiniband.bth.opcode", "infiniband.reth.va", "infiniband.reth.r_key",
                                "infiniband.reth.dmalen", "infiniband.immdt"],
                         "infiniband.bth.opcode >= 6 && infiniband.bth.opcode <= 11")
    out = {}
    for src, op, va, rkey, length, imm in rows:
        op = int(op)
        msgs = out.setdefault(src, [])
        if op in (6, 10, 11):  # FIRST / ONLY / ONLY WITH IMMEDIATE open a message
            msgs.append({"op": op, "va": int(va, 16), "rkey": int(rkey, 16), "len": int(length), "imm": None})
        if imm:
            msgs[-1]["imm"] = int(imm.split(",")[0], 16)
    return out


def conn_data(pcap):
    """The rsocket connection data in the REQ (after the 36-byte rdma_cm header) and the REP."""
    req = tshark_fields(pcap, ["ip.src", "infiniband.cm.req.ip_cm"], "infiniband.cm.req.ip_cm")
    rep = tshark_fields(pcap, ["ip.src", "infiniband.cm.rep.private"], "infiniband.cm.rep.private")

    def parse(hexstr):
        b = bytes.fromhex(hexstr.replace(":", ""))
        return {"version": b[0], "flags": b[1], "credits": int.from_bytes(b[2:4], "big"),
                "sgl_addr": int.from_bytes(b[8:16], "big"), "sgl_key": int.from_bytes(b[16:20], "big"),
                "sgl_len": int.from_bytes(b[20:24], "big"), "buf_addr": int.from_bytes(b[24:32], "big"),
                "buf_key": int.from_bytes(b[32:36], "big"), "buf_len": int.from_bytes(b[36:40], "big")}

    return (req[0][0], parse(req[0][1].replace(":", "")[72:])), (rep[0][0], parse(rep[0][1]))


def shape(pcap):
    """What must be equal between two runs of the same rstream command: per side, the sequence of
    WRITE messages as (opcode, length, immediate, target), the target named relative to the
    peer's connection data (its target list's entry 1, or an offset into its first half-ring)."""
    (client, creq), (server, crep) = conn_data(pcap)
    result = {}
    for src, msgs in write_messages(pcap).items():
        peer = crep if src == client else creq
        mine = creq if src == client else crep
        seq = []
        for m in msgs:
            if m["len"] == 0:
                target = "none"
            elif m["rkey"] == peer["sgl_key"]:
                target = f"target list +{m['va'] - peer['sgl_addr']}"
            elif m["rkey"] == peer["buf_key"]:
                target = f"ring +{m['va'] - peer['buf_addr']}"
            else:
                target = "elsewhere"
            seq.append((m["op"], m["len"], m["imm"], target))
        result["client" if src == client else "server"] = seq
        result[("client" if src == client else "server") + " data"] = (mine["version"], mine["flags"],
                                                                      mine["credits"], mine["sgl_len"], mine["buf_len"])
    return result


try:
    bed("up", "--daemons", "both", "--pcap", "--rnicd", rnicd)
    with open(f"{state}/env") as f:
        env_words = dict(kv.split("=", 1) for kv in f.read().split())
    ip, ip6 = env_words["ip_a"], env_words["ip6_a"]
    sizes = [("64", "1000"), ("4096", "1000"), ("65536", "200"), ("1000000", "20")]
    if quick:
        sizes = sizes[1:3]
    for size, count in sizes:
        rstream(f"rstream -S {size} -C {count} -T v (non-blocking)", ip, ["-S", size, "-C", count, "-T", "v"])
        rstream(f"rstream -S {size} -C {count} -T b -T v (blocking)", ip,
                ["-S", size, "-C", count, "-T", "b", "-T", "v"])
        rstream(f"rstream -S {size} -C {count} -T a -T v (rpoll)", ip, ["-S", size, "-C", count, "-T", "a", "-T", "v"])
    rstream("rstream -S 100000 -C 100 -T a -T n -T v (rpoll, non-blocking)", ip,
            ["-S", "100000", "-C", "100", "-T", "a", "-T", "n", "-T", "v"])
    rstream("rstream -S 65536 -C 100 -T v over IPv6", ip6, ["-S", "65536", "-C", "100", "-T", "v"])
    rstream("rstream -S 65536 -C 100 -T r -T v (rdma_getaddrinfo)", ip, ["-S", "65536", "-C", "100", "-T", "r", "-T", "v"])
    if not quick:
        rstream("rstream (its full run: latency and bandwidth, 64 B to 1 MB)", ip, [], timeout=300)
    riostream("riostream -S 2000 -C 1 -I 2000 (marker ping-pong)", ip, ["-S", "2000", "-C", "1", "-I", "2000"])
    riostream("riostream -S 65536 -C 100 -T v", ip, ["-S", "65536", "-C", "100", "-T", "v"])
    riostream("riostream -S 65536 -C 100 -T b -T v (blocking)", ip, ["-S", "65536", "-C", "100", "-T", "b", "-T", "v"])
    riostream("riostream -S 65536 -C 100 -T a (rpoll)", ip, ["-S", "65536", "-C", "100", "-T", "a"])
    rcopy("rcopy of 32 MiB", ip, 32 << 20)
    rcopy("rcopy of 100003 bytes", ip, 100003)
    for scenario in ("basic", "nonblock", "iomap", "select", "keepalive"):
        probe_pair(scenario, ip, "4096")
    probe_pair("basic", ip6, "4096")
    probe_refused(ip)
    probe_peer_death(ip)
    probe_preload(ip)
    bed("down")
    check_captures()

    # The framing of rxe's golden capture: path MTU 1024, rstream -S 4000 -C 5.
    bed("up", "--daemons", "both", "--pcap", "--rnicd", rnicd, mtu="1500")
    rstream("rstream -S 4000 -C 5 at path MTU 1024", ip, ["-S", "4000", "-C", "5"])
    bed("down", mtu="1500")
    # tshark decodes every frame as rnic-pcap does, nothing malformed; scapy agrees on the ICRCs.
    checker = os.path.join(os.path.dirname(os.path.abspath(testbed)), "..", "tests", "system",
                           "check_tshark_decode.py")
    r = subprocess.run(["/usr/bin/python3", checker, rnic_pcap, f"{state}/a.pcap"], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        fail("tshark and scapy on the MTU 1024 capture", (r.stdout + r.stderr)[-2000:])
    else:
        ok("tshark and scapy on the MTU 1024 capture", f"({r.stdout.strip().splitlines()[-1]})")
    ours = shape(f"{state}/a.pcap")
    golden = shape(f"{golden_dir}/rxe_write_imm_rstream_mtu1024_s4000.pcap")
    # The closing DISCONNECT: each side sends one unless the other's came in first (rdma-core's
    # rule too), so a side may lack it; at least one side sends it.
    disconnect = (11, 0, 0xE0000000, "none")
    closers = sum(1 for side in ("client", "server") if ours.get(side) and ours[side][-1] == disconnect)
    for run in (ours, golden):
        for side in ("client", "server"):
            if run.get(side) and run[side][-1] == disconnect:
                run[side] = run[side][:-1]
    if closers == 0:
        fail("rstream -S 4000 -C 5: a DISCONNECT at the end", str(ours))
    elif ours != golden:
        diff = [f"{k}: ours {ours.get(k)}\n  rxe  {golden.get(k)}" for k in sorted(set(ours) | set(golden))
                if ours.get(k) != golden.get(k)]
        fail("rstream -S 4000 -C 5: the WRITEs of rdma-core's rsockets", "\n".join(diff))
    else:
        n = sum(len(v) for k, v in ours.items() if not k.endswith("data"))
        ok("rstream -S 4000 -C 5: the WRITEs of rdma-core's rsockets",
           f"({n} messages: opcodes, lengths, immediates and targets equal rxe's capture)")
    # Loss: 2% of the RoCEv2 frames each side sends dropped (tools/testbed.sh loss, XDP): the
    # transport's retransmissions under the rsocket protocol, data verified.
    bed("up", "--daemons", "both", "--rnicd", rnicd)
    bed("loss", "2", "both")
    rstream("rstream -S 65536 -C 50 -T v with 2% loss", ip, ["-S", "65536", "-C", "50", "-T", "v"], timeout=180)
    riostream("riostream -S 65536 -C 50 -T v with 2% loss", ip, ["-S", "65536", "-C", "50", "-T", "v"], timeout=180)
    bed("down")
except Exception as e:  # a bed that does not come up is a failure, with its reason
    failures.append(f"{type(e).__name__}: {e}")
    print(f"FAIL {type(e).__name__}: {e}", flush=True)
finally:
    subprocess.run([testbed, "down"], env=base_env, capture_output=True, timeout=60)

verdict = f"{passed} checks passed\n" + ("FAILED: " + "; ".join(failures) if failures else
                                        "rsockets ran on rnicd: rstream, riostream, rcopy, probe, captures")
if summary_first:
    progress = sys.stdout.getvalue()
    sys.stdout = real_stdout
    print(f"{verdict}\n--- progress ---\n{progress}{verdict}")
else:
    print(verdict)
sys.exit(1 if failures else 0)
