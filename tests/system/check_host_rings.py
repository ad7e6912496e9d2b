#!/usr/bin/env python3
"""The host interface against two real rnicd on the test bed, driven by a raw client (the
control protocol and the rings from docs/host_interface.md, no client library): one QP in each
daemon, RTR waits for ARP, a 3000-byte SEND from A to B through the rings (doorbell + kick of a
sleeping daemon, CQEs back with the user's wr_ids), Stats, and SIGTERM while a session is open
(IBV_EVENT_DEVICE_FATAL in the async ring, the connection closed, exit 0, socket removed).
Usage: check_host_rings.py TESTBED RNICD"""
import ctypes
import json
import mmap
import os
import socket
import struct
import subprocess
import sys
import time

testbed, rnicd = sys.argv[1:3]
name = f"rnicht{os.getpid() % 10000}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=f"/tmp/{name}")
state = env["RNIC_TESTBED_DIR"]
failures = []
MAGIC = 0x434E5252


def run(*args, timeout=30, check=True):
    r = subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


class Sess:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); self.s.connect(path); self.seq = 0
        self.efd = os.eventfd(0, os.EFD_NONBLOCK)
        self.s.settimeout(10)
        st, body, fds = self.call(1, struct.pack("<II", os.getpid(), 0), [self.efd]); assert st == 0
        self.status = mmap.mmap(fds[0], 4096, mmap.MAP_SHARED, mmap.PROT_READ); self.kick = fds[1]
        self.gid = body[268:284]
        self.async_size = struct.unpack_from("<I", body, 268 + 16 * 16)[0]
        self.async_ring = mmap.mmap(fds[2], 192 + 8 * self.async_size)
        st, body, _ = self.call(2); self.pd = struct.unpack_from("<I", body)[0]
        bfd = os.memfd_create("buf"); os.ftruncate(bfd, 8192)
        self.buf = mmap.mmap(bfd, 8192); self.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.buf))
        assert self.call(4, struct.pack("<IIQ", 1, 0, 8192), [bfd])[0] == 0
        st, body, _ = self.call(6, struct.pack("<IIQQQII", self.pd, 7, self.addr, 8192, self.addr, 0, 1) + struct.pack("<IIQQ", 1, 0, 0, 8192)); assert st == 0
        self.lkey, self.rkey = struct.unpack_from("<II", body)
        st, body, cfds = self.call(10, struct.pack("<IIII", 16, 0, 0, 0)); assert st == 0
        self.cq, _, self.cq_size, cq_bytes = struct.unpack_from("<IIII", body); self.cqm = mmap.mmap(cfds[0], cq_bytes); self.cons = 0
        st, body, qfds = self.call(16, struct.pack("<IIIIII", 2, self.pd, self.cq, self.cq, 0, 0) + struct.pack("<IIIII", 4, 4, 1, 1, 0)); assert st == 0
        f = struct.unpack_from("<I5I6I", body); self.qpn = f[0]; self.rq_off = f[10]; self.qm = mmap.mmap(qfds[0], f[11])
    def call(self, op, body=b"", fds=()):
        self.seq += 1
        m = struct.pack("<IHHIIiI", MAGIC, 1, op, self.seq, 24+len(body), 0, 0) + body
        socket.send_fds(self.s, [m], list(fds)) if fds else self.s.send(m)
        data, rfds, _, _ = socket.recv_fds(self.s, 65536, 4)
        return struct.unpack_from("<IHHIIiI", data)[5], data[24:], rfds
    def connect(self, dest, dgid):
        def qpattr(state=0, mtu=0, dest=0, access=0, timeout=0, retry=0, rnr=0, mrd=0, mdrd=0, minrnr=0, port=0, dgid=b"\0"*16):
            av = dgid + struct.pack("<IBBBBBBBBH6s", 0, 0, 64, 0, 0, 1, 1, 0, 0, 0, b"\0"*6)
            return struct.pack("<8I", state, 0, mtu, 0, 0, 0, dest, access) + b"\0"*20 + av + struct.pack("<HBBBBBBBBBB", 0, 0, 0, mrd, mdrd, minrnr, port, timeout, retry, rnr, 0)
        assert self.call(17, struct.pack("<II", self.qpn, 1|16|32|8) + qpattr(state=1, access=7, port=1))[0] == 0
        t0 = time.monotonic()
        st = self.call(17, struct.pack("<II", self.qpn, 1|128|256|(1<<20)|(1<<12)|(1<<17)|(1<<15)) + qpattr(state=2, mtu=5, dest=dest, mdrd=1, minrnr=1, dgid=dgid))[0]; assert st == 0, st
        self.rtr_ms = (time.monotonic() - t0) * 1000
        assert self.call(17, struct.pack("<II", self.qpn, 1|(1<<16)|(1<<9)|(1<<10)|(1<<11)|(1<<13)) + qpattr(state=3, timeout=14, retry=7, rnr=7, mrd=1))[0] == 0
    def doorbell(self):
        if struct.unpack_from("<I", self.status, 0)[0]: os.write(self.kick, (1).to_bytes(8, "little"))
    def poll(self):
        out = []
        prod = struct.unpack_from("<I", self.cqm, 0)[0]
        while self.cons != prod:
            out.append(struct.unpack_from("<QIIII", self.cqm, 192 + (self.cons % self.cq_size) * 64)); self.cons += 1
        return out


def functional():
    run(testbed, "up", "--daemons", "both", "--rnicd", rnicd, timeout=60)
    a = Sess(f"{state}/run-a/rnic0.sock")
    b = Sess(f"{state}/run-b/rnic0.sock")
    a.connect(b.qpn, b.gid)
    b.connect(a.qpn, a.gid)
    print(f"RTR on A (ARP for B) took {a.rtr_ms:.1f} ms")
    time.sleep(0.2)  # both daemons asleep
    struct.pack_into("<QII", b.qm, b.rq_off + 192, 0xB0B, 1, 0)
    struct.pack_into("<QII", b.qm, b.rq_off + 208, b.addr + 4096, 4096, b.lkey)
    struct.pack_into("<I", b.qm, b.rq_off, 1)
    b.doorbell()
    payload = os.urandom(3000)
    a.buf[0:3000] = payload
    struct.pack_into("<QB3xIIIII", a.qm, 192, 0xA11CE, 2, 2, 0, 1, 0, 0)  # IBV_WR_SEND, signaled, 1 SGE
    struct.pack_into("<QII", a.qm, 192 + 80, a.addr, 3000, a.lkey)
    t0 = time.monotonic()
    struct.pack_into("<I", a.qm, 0, 1)
    a.doorbell()
    ga, gb = [], []
    while time.monotonic() - t0 < 5 and (not ga or not gb):
        ga += a.poll()
        gb += b.poll()
        time.sleep(0.0001)
    print(f"SEND completed on both sides in {(time.monotonic() - t0) * 1000:.2f} ms")
    check(len(ga) == 1 and ga[0][0] == 0xA11CE and ga[0][1] == 0 and ga[0][2] == 0, f"A: one send CQE with its wr_id ({ga})")
    check(len(gb) == 1 and gb[0][0] == 0xB0B and gb[0][1] == 0 and gb[0][2] == 128 and gb[0][4] == 3000,
          f"B: one receive CQE, 3000 bytes ({gb})")
    check(bytes(b.buf[4096:7096]) == payload, "the payload landed in B's registered memory")
    st, body, _ = a.call(23, struct.pack("<II", 0, 0))
    j = json.loads(body)
    check(st == 0 and j["device"]["ipv4"] == "10.77.0.1/24", "Stats answers JSON")
    check(j["counters"]["host_deferred_replies"] >= 1 and j["counters"]["arp_requests_sent"] >= 1,
          "A's ModifyQp(RTR) waited for ARP")
    check([q["state"] for q in j["qps"]] == ["RTS"] and j["counters"]["tx_packets"] >= 1, "A's QP is in RTS and sent")

    # SIGTERM with B's session open.
    pid_b = int(open(f"{state}/rnicd-b.pid").read())
    os.kill(pid_b, 15)
    deadline = time.monotonic() + 10
    closed = False
    while time.monotonic() < deadline and not closed:
        try:
            closed = b.s.recv(100) == b""
        except socket.timeout:
            break
    prod = struct.unpack_from("<I", b.async_ring, 0)[0]
    event = struct.unpack_from("<II", b.async_ring, 192) if prod else None
    check(closed, "B closed the session on SIGTERM")
    check(prod == 1 and event == (8, 1), f"B sent IBV_EVENT_DEVICE_FATAL first (async ring: {prod}, {event})")
    for _ in range(100):
        if os.path.exists(f"{state}/rnicd-b.rc"):
            break
        time.sleep(0.05)
    rc = open(f"{state}/rnicd-b.rc").read().strip() if os.path.exists(f"{state}/rnicd-b.rc") else "?"
    check(rc == "0", f"rnicd B exits 0 (got {rc})")
    check(not os.path.exists(f"{state}/run-b/rnic0.sock"), "B removed its socket file")


try:
    functional()
finally:
    run(testbed, "down", timeout=60, check=False)
    subprocess.run(["rm", "-rf", state])
sys.exit(1 if failures else 0)
