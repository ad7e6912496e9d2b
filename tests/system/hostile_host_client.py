#!/usr/bin/env python3
"""A hostile client of one rnicd, for check_hostile_client.py: everything a buggy or malicious
application can do through the control socket and the memory it maps, in a loop until it is
killed. It prints "ready" once set up, "cq_err HANDLE" when its never-polled CQ overflowed
(IBV_EVENT_CQ_ERR in its async ring), then "round N" after each round of:
- a CQ of 2 under two QPs sending to each other, never polled;
- WQEs of random bytes and producer indices past the ring (the QP goes to error: QP_FATAL);
- every doorbell bit set, again and again;
- objects destroyed while in use (CQ and PD: EBUSY; the MR under queued WQEs; QPs with WQEs
  queued), then used;
- a second connection that floods requests without reading a reply, then sends garbage, and a
  third that sends random bytes;
- Stats;
- ReregMr with every field wrong (each must get its errno, "rereg as expected"), right ones (a new
  translation, rights, on demand and back), and one whose runs do not match its count.
Usage: hostile_host_client.py SOCKET"""
import mmap
import os
import random
import socket
import struct
import sys
import time

from raw_host_client import MAGIC, ABI_VERSION, Sess

rng = random.Random(7)


def create_cq(s, cqe):
    st, body, fds = s.call(10, struct.pack("<IIII", cqe, 0, 0, 0))
    if st != 0:
        return None
    handle, _, size, nbytes = struct.unpack_from("<IIII", body)
    return {"handle": handle, "size": size, "ring": mmap.mmap(fds[0], nbytes)}


def create_qp(s, cq, depth):
    st, body, fds = s.call(16, struct.pack("<IIIIII", 2, s.pd, cq, cq, 0, 0) + struct.pack("<IIIII", depth, depth, 1, 1, 0))
    if st != 0:
        return None
    f = struct.unpack_from("<I5I6II", body)
    return {"qpn": f[0], "sq_size": f[6], "sq_stride": f[7], "rq_size": f[8], "rq_stride": f[9], "rq_off": f[10],
            "mem": mmap.mmap(fds[0], f[11]), "slot": f[12], "sq": 0, "rq": 0}


def modify(s, qpn, mask, attr):
    return s.call(17, struct.pack("<II", qpn, mask) + attr)[0]


def connect(s, qp, dest):
    modify(s, qp["qpn"], 1 | 16 | 32 | 8, Sess.qpattr(state=1, access=7, port=1))
    modify(s, qp["qpn"], 1 | 128 | 256 | (1 << 20) | (1 << 12) | (1 << 17) | (1 << 15),
           Sess.qpattr(state=2, mtu=3, dest=dest, mdrd=1, minrnr=1, dgid=s.gid))
    return modify(s, qp["qpn"], 1 | (1 << 16) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 13),
                  Sess.qpattr(state=3, timeout=14, retry=7, rnr=7, mrd=1))


def ring(s, slot):
    """The doorbell bit of `slot` and the summary bits above it (as raw_host_client.Sess.doorbell)."""
    word = slot // 64
    for offset, bit in ((128 + 8 * word, slot % 64), (64 + 8 * (word // 64), word % 64), (0, word // 64)):
        at = s.doorbell_offset + offset
        struct.pack_into("<Q", s.async_ring, at, struct.unpack_from("<Q", s.async_ring, at)[0] | (1 << bit))
    if struct.unpack_from("<I", s.status, 0)[0]:
        os.write(s.kick, (1).to_bytes(8, "little"))


def every_doorbell_bit(s):
    s.async_ring[s.doorbell_offset:s.doorbell_offset + 128 + 8 * 512] = b"\xff" * (128 + 8 * 512)
    os.write(s.kick, (1).to_bytes(8, "little"))


def post_send(s, qp, opcode, length, lkey=None):
    at = 192 + (qp["sq"] % qp["sq_size"]) * qp["sq_stride"]
    struct.pack_into("<QB3xIIIIIQ", qp["mem"], at, qp["sq"], opcode, 2, 0, 1, 0, 0, 0)
    struct.pack_into("<QII", qp["mem"], at + 80, s.addr, length, s.lkey if lkey is None else lkey)
    qp["sq"] += 1
    struct.pack_into("<I", qp["mem"], 0, qp["sq"])


def post_recv(s, qp, length):
    at = qp["rq_off"] + 192 + (qp["rq"] % qp["rq_size"]) * qp["rq_stride"]
    struct.pack_into("<QII", qp["mem"], at, qp["rq"], 1, 0)
    struct.pack_into("<QII", qp["mem"], at + 16, s.addr + 4096, length, s.lkey)
    qp["rq"] += 1
    struct.pack_into("<I", qp["mem"], qp["rq_off"], qp["rq"])


def async_events(s, seen):
    """The async ring's new entries (never consumed: the ring fills and later events are dropped)."""
    prod = struct.unpack_from("<I", s.async_ring, 0)[0]
    out = [struct.unpack_from("<II", s.async_ring, 192 + (i % s.async_size) * 8) for i in range(seen, prod)]
    return prod, out


def overflow_a_cq(s):
    """Two QPs sending to each other on a CQ of 2 nobody polls; returns the CQ."""
    cq = create_cq(s, 2)
    a, b = create_qp(s, cq["handle"], 64), create_qp(s, cq["handle"], 64)
    connect(s, a, b["qpn"])
    connect(s, b, a["qpn"])
    for _ in range(48):
        post_recv(s, b, 64)
    ring(s, b["slot"])
    for _ in range(48):
        post_send(s, a, 2, 64)
    ring(s, a["slot"])
    return cq, a, b


def flood_connection(path):
    """Requests that are never read until the daemon gives up on the connection, then garbage."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect(path)
    c.setblocking(False)
    efd = os.eventfd(0)
    sent = 0
    try:
        socket.send_fds(c, [struct.pack("<IHHIIiI", MAGIC, ABI_VERSION, 1, 1, 32, 0, 0) + struct.pack("<II", 1, 0)], [efd])
        for seq in range(2, 3000):
            c.send(struct.pack("<IHHIIiI", MAGIC, ABI_VERSION, 22, seq, 24, 0, 0))  # QueryPort
            sent += 1
        c.send(b"\xde\xad" * 20)
    except (BlockingIOError, BrokenPipeError, ConnectionResetError):
        pass
    finally:
        os.close(efd)
        c.close()
    return sent


def rereg(s, lkey, flags, pd=0, access=0, addr=0, length=0, iova=0, off=0, runs=(), run_count=None):
    body = struct.pack("<IIIIQQQII", lkey, flags, pd, access, addr, length, iova, off,
                       len(runs) if run_count is None else run_count)
    return s.call(49, body + b"".join(struct.pack("<IIQQ", *r) for r in runs))[0]


def rereg_attacks(s):
    """ReregMr (op 49) with everything wrong, each answered with its errno and the region left
    as it was, then right ones (a new translation, rights, on demand and back) while its QPs may
    still have WQEs naming it. Returns the cases that were not answered as expected."""
    st, body, _ = s.call(6, struct.pack("<IIQQQII", s.pd, 7, s.addr, 8192, s.addr, 0, 1) +
                         struct.pack("<IIQQ", 1, 0, 0, 8192))
    if st != 0:
        return [f"RegMr {st}"]
    lkey = struct.unpack_from("<I", body)[0]
    page = [(1, 0, 0, 4096)]
    EINVAL, EOPNOTSUPP = 22, 95
    cases = [
        ("unknown key", rereg(s, lkey ^ 0x5A5A00, 4, access=1), EINVAL),
        ("no flag", rereg(s, lkey, 0), EINVAL),
        ("unknown flag", rereg(s, lkey, 8 | 4, access=1), EOPNOTSUPP),
        ("unknown PD", rereg(s, lkey, 2, pd=s.pd + 1000), EINVAL),
        ("rights", rereg(s, lkey, 4, access=0xFFFFFFFF), EINVAL),
        ("remote write without local", rereg(s, lkey, 4, access=2), EINVAL),
        ("runs without translation", rereg(s, lkey, 4, access=1, runs=page), EINVAL),
        ("unknown segment", rereg(s, lkey, 1, addr=s.addr, length=4096, iova=s.addr, runs=[(99, 0, 0, 4096)]), EINVAL),
        ("run past the segment", rereg(s, lkey, 1, addr=s.addr, length=4096, iova=s.addr, runs=[(1, 0, 8192, 4096)]),
         EINVAL),
        ("run too short", rereg(s, lkey, 1, addr=s.addr, length=8192, iova=s.addr, runs=page), EINVAL),
        ("length 0", rereg(s, lkey, 1, addr=s.addr, length=0, iova=s.addr, runs=page), EINVAL),
        ("length 2^64-1", rereg(s, lkey, 1, addr=s.addr, length=2**64 - 1, iova=s.addr, runs=page), EINVAL),
        ("iova wraps", rereg(s, lkey, 1, addr=s.addr, length=4096, iova=2**64 - 100, off=4096 - 100, runs=page),
         EINVAL),
        ("page offset", rereg(s, lkey, 1, addr=s.addr, length=100, iova=s.addr + 5000, off=5000, runs=page), EINVAL),
        ("iova offset", rereg(s, lkey, 1, addr=s.addr, length=100, iova=s.addr + 8, off=0, runs=page), EINVAL),
        ("on demand without translation", rereg(s, lkey, 4, access=7 | 64), EINVAL),
        ("on demand with runs", rereg(s, lkey, 5, access=7 | 64, addr=s.addr, length=4096, iova=s.addr, runs=page),
         EINVAL),
        ("on demand at 0", rereg(s, lkey, 5, access=7 | 64, addr=0, length=4096, iova=0), EINVAL),
        ("FLUSH_PERSISTENT", rereg(s, lkey, 4, access=1 | 512), EOPNOTSUPP),
        # Right ones: the first page only, read-only, on demand over the whole address space, back.
        ("first page", rereg(s, lkey, 1, addr=s.addr, length=4096, iova=s.addr, runs=page), 0),
        ("read only", rereg(s, lkey, 4, access=4), 0),
        ("implicit on demand", rereg(s, lkey, 5, access=7 | 64, addr=0, length=2**64 - 1, iova=0), 0),
        ("pinned again", rereg(s, lkey, 5, access=7, addr=s.addr, length=8192, iova=s.addr,
                               runs=[(1, 0, 0, 8192)]), 0),
        ("PD", rereg(s, lkey, 2, pd=s.pd), 0),
    ]
    wrong = [f"{what}: {got} (want {want})" for what, got, want in cases if got != want]
    if s.call(7, struct.pack("<II", lkey, 0))[0] != 0:
        wrong.append("DeregMr after the re-registrations")
    return wrong


def malformed_rereg(path):
    """A ReregMr whose runs do not match its run_count: the daemon closes that connection."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect(path)
    c.settimeout(5)
    try:
        c.send(struct.pack("<IHHIIiI", MAGIC, ABI_VERSION, 1, 1, 32, 0, 0) + struct.pack("<II", 1, 0))
        socket.recv_fds(c, 65536, 5)
        body = struct.pack("<IIIIQQQII", 1, 1, 0, 0, 0, 4096, 0, 0, 1000)
        c.send(struct.pack("<IHHIIiI", MAGIC, ABI_VERSION, 49, 2, 24 + len(body), 0, 0) + body)
        c.recv(65536)
    except OSError:
        pass
    finally:
        c.close()


def attack_round(s, path):
    cq = create_cq(s, 4)
    qps = [q for q in (create_qp(s, cq["handle"], 16), create_qp(s, cq["handle"], 16)) if q]
    if len(qps) == 2:
        connect(s, qps[0], qps[1]["qpn"])
        connect(s, qps[1], qps[0]["qpn"])
        for _ in range(8):
            post_recv(s, qps[1], 64)
            post_send(s, qps[0], 2, 64)
        ring(s, qps[0]["slot"])
        ring(s, qps[1]["slot"])
        # Random bytes as WQEs, the producer moved by less than the ring, then past it.
        q = qps[0]
        q["mem"][192:192 + q["sq_size"] * q["sq_stride"]] = rng.randbytes(q["sq_size"] * q["sq_stride"])
        struct.pack_into("<I", q["mem"], 0, q["sq"] + q["sq_size"] // 2)
        ring(s, q["slot"])
        struct.pack_into("<I", qps[1]["mem"], 0, rng.getrandbits(32))
        ring(s, qps[1]["slot"])
    for _ in range(20):
        every_doorbell_bit(s)
        time.sleep(0.0005)
    # In use: EBUSY for the CQ and the PD; the MR and the QPs go with WQEs still queued.
    s.call(11, struct.pack("<II", cq["handle"], 0))
    s.call(3, struct.pack("<II", s.pd, 0))
    for q in qps:
        s.call(19, struct.pack("<II", q["qpn"], 0))
        post_send(s, q, 2, 64)  # into memory the daemon no longer reads
    s.call(11, struct.pack("<II", cq["handle"], 0))
    flood_connection(path)
    garbage = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # not even a header: closed
    garbage.connect(path)
    garbage.send(rng.randbytes(rng.randrange(1, 200)))
    garbage.close()
    s.call(23, struct.pack("<II", 0, 0))
    wrong = rereg_attacks(s)
    print("rereg " + ("as expected" if not wrong else "UNEXPECTED " + "; ".join(wrong)), flush=True)
    malformed_rereg(path)


def main():
    path = sys.argv[1]
    s = Sess(path)
    cq, a, b = overflow_a_cq(s)
    print("ready", flush=True)
    seen, deadline = 0, time.monotonic() + 10
    while time.monotonic() < deadline:
        seen, events = async_events(s, 0)
        if any(e == (0, cq["handle"]) for e in events):  # IBV_EVENT_CQ_ERR
            print(f"cq_err {cq['handle']}", flush=True)
            break
        time.sleep(0.01)
    # Deregistering the MR that queued WQEs still name: they fail (their QP's problem only).
    post_send(s, a, 0, 4096)
    s.call(7, struct.pack("<II", s.lkey, 0))
    ring(s, a["slot"])
    n = 0
    while True:
        attack_round(s, path)
        n += 1
        print(f"round {n}", flush=True)


if __name__ == "__main__":
    main()
