"""A raw client of rnicd's control socket and rings, written from docs/host_interface.md and
control.hpp without the client library (so the tests check the protocol itself): a session with
one registered 8 KiB buffer, one CQ and one RC QP, moved along its states by ModifyQp. Offsets are
those of abi::HelloReply, QpAttr and friends (static_asserted there)."""
import ctypes
import mmap
import os
import socket
import struct
import time

MAGIC = 0x434E5252
ABI_VERSION = 3


class Sess:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); self.s.connect(path); self.seq = 0
        self.s.settimeout(10)
        # Reply fds: status page, kick eventfd, async ring, async event socket and its peer.
        st, body, fds = self.call(1, struct.pack("<II", os.getpid(), 0)); assert st == 0 and len(fds) == 5
        self.status = mmap.mmap(fds[0], 4096, mmap.MAP_SHARED, mmap.PROT_READ); self.kick = fds[1]
        self.async_events = fds[3:5]
        self.gid_count = struct.unpack_from("<H", body, 266)[0]
        self.gids = [body[268 + 16 * i:284 + 16 * i] for i in range(self.gid_count)]
        self.gid_types = list(body[540:540 + self.gid_count])
        self.gid = self.gids[0]
        self.async_size = struct.unpack_from("<I", body, 268 + 16 * 16)[0]
        self.doorbell_offset = struct.unpack_from("<I", body, 536)[0]
        # The async ring, then the doorbell bits (abi::DoorbellBits: top, 8 summary words, 512 words).
        self.async_ring = mmap.mmap(fds[2], self.doorbell_offset + 128 + 8 * 512)
        st, body, _ = self.call(2); self.pd = struct.unpack_from("<I", body)[0]
        bfd = os.memfd_create("buf", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING); os.ftruncate(bfd, 8192)
        self.buf = mmap.mmap(bfd, 8192); self.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.buf))
        assert self.call(4, struct.pack("<IIQ", 1, 0, 8192), [bfd])[0] == 0
        st, body, _ = self.call(6, struct.pack("<IIQQQII", self.pd, 7, self.addr, 8192, self.addr, 0, 1) + struct.pack("<IIQQ", 1, 0, 0, 8192)); assert st == 0
        self.lkey, self.rkey = struct.unpack_from("<II", body)
        st, body, cfds = self.call(10, struct.pack("<IIII", 16, 0, 0, 0)); assert st == 0
        self.cq, _, self.cq_size, cq_bytes = struct.unpack_from("<IIII", body); self.cqm = mmap.mmap(cfds[0], cq_bytes); self.cons = 0
        st, body, qfds = self.call(16, struct.pack("<IIIIII", 2, self.pd, self.cq, self.cq, 0, 0) + struct.pack("<IIIII", 4, 4, 1, 1, 0)); assert st == 0
        f = struct.unpack_from("<I5I6II", body); self.qpn = f[0]; self.rq_off = f[10]; self.qm = mmap.mmap(qfds[0], f[11])
        self.doorbell_slot = f[12]
        self.sq_size, self.sq_stride, self.rq_size, self.rq_stride = f[6:10]; self.sq_prod = self.rq_prod = 0
    def call(self, op, body=b"", fds=()):
        self.seq += 1
        m = struct.pack("<IHHIIiI", MAGIC, ABI_VERSION, op, self.seq, 24+len(body), 0, 0) + body
        socket.send_fds(self.s, [m], list(fds)) if fds else self.s.send(m)
        data, rfds, _, _ = socket.recv_fds(self.s, 65536, 5)
        return struct.unpack_from("<IHHIIiI", data)[5], data[24:], rfds
    @staticmethod
    def qpattr(state=0, mtu=0, dest=0, access=0, timeout=0, retry=0, rnr=0, mrd=0, mdrd=0, minrnr=0, port=0,
               dgid=b"\0"*16, sgid=0, rq_psn=0, sq_psn=0):
        av = dgid + struct.pack("<IBBBBBBBBH6s", 0, sgid, 64, 0, 0, 1, 1, 0, 0, 0, b"\0"*6)
        return struct.pack("<8I", state, 0, mtu, 0, rq_psn, sq_psn, dest, access) + b"\0"*20 + av + struct.pack("<HBBBBBBBBBB", 0, 0, 0, mrd, mdrd, minrnr, port, timeout, retry, rnr, 0)
    def to_init(self):
        assert self.call(17, struct.pack("<II", self.qpn, 1|16|32|8) + self.qpattr(state=1, access=7, port=1))[0] == 0
    def to_rtr(self, dest, dgid, sgid=0, rq_psn=0):
        """ModifyQp to RTR with a path to `dgid` from GID `sgid`: waits for ARP or ND. Returns the status."""
        t0 = time.monotonic()
        st = self.call(17, struct.pack("<II", self.qpn, 1|128|256|(1<<20)|(1<<12)|(1<<17)|(1<<15)) + self.qpattr(state=2, mtu=5, dest=dest, mdrd=1, minrnr=1, dgid=dgid, sgid=sgid, rq_psn=rq_psn))[0]
        self.rtr_ms = (time.monotonic() - t0) * 1000
        return st
    def connect(self, dest, dgid, sgid=0, sq_psn=0, rq_psn=0):
        self.to_init()
        st = self.to_rtr(dest, dgid, sgid, rq_psn); assert st == 0, st
        assert self.call(17, struct.pack("<II", self.qpn, 1|(1<<16)|(1<<9)|(1<<10)|(1<<11)|(1<<13)) + self.qpattr(state=3, timeout=14, retry=7, rnr=7, mrd=1, sq_psn=sq_psn))[0] == 0
    def post_send(self, wr_id, opcode, offset, length, remote_addr=0, rkey=0):
        """One signaled WQE (IBV_WR_SEND 2, IBV_WR_RDMA_WRITE 0) gathering `length` bytes at `offset` of the buffer."""
        slot = 192 + (self.sq_prod % self.sq_size) * self.sq_stride
        struct.pack_into("<QB3xIIIIIQ", self.qm, slot, wr_id, opcode, 2, 0, 1, 0, rkey, remote_addr)
        struct.pack_into("<QII", self.qm, slot + 80, self.addr + offset, length, self.lkey)
        self.sq_prod += 1
        struct.pack_into("<I", self.qm, 0, self.sq_prod)
        self.doorbell()
    def post_recv(self, wr_id, offset, length):
        slot = self.rq_off + 192 + (self.rq_prod % self.rq_size) * self.rq_stride
        struct.pack_into("<QII", self.qm, slot, wr_id, 1, 0)
        struct.pack_into("<QII", self.qm, slot + 16, self.addr + offset, length, self.lkey)
        self.rq_prod += 1
        struct.pack_into("<I", self.qm, self.rq_off, self.rq_prod)
        self.doorbell()
    def path(self):
        """QueryQp: the path's (dgid, sgid_index, dmac) as the daemon resolved it."""
        st, body, _ = self.call(18, struct.pack("<II", self.qpn, 0)); assert st == 0, st
        av = body[52:88]
        return av[0:16], av[20], av[30:36]
    def doorbell(self):
        """The QP's doorbell bit and the summary bits above it (abi::ring_doorbell_slot), then a kick
        if the daemon sleeps. Python has no atomics: only this process sets bits and the daemon only
        clears them, so a lost race costs a spurious look, never a missed doorbell."""
        word = self.doorbell_slot // 64
        for offset, bit in ((128 + 8 * word, self.doorbell_slot % 64), (64 + 8 * (word // 64), word % 64), (0, word // 64)):
            at = self.doorbell_offset + offset
            struct.pack_into("<Q", self.async_ring, at, struct.unpack_from("<Q", self.async_ring, at)[0] | (1 << bit))
        if struct.unpack_from("<I", self.status, 0)[0]: os.write(self.kick, (1).to_bytes(8, "little"))
    def run_sends(self, wqes, timeout=30.0):
        """Posts every (wr_id, opcode, offset, length[, remote_addr, rkey]) keeping at most the SQ's
        size outstanding (a slot is free once its CQE came). Returns the CQEs; stops early when
        none comes for 5 s or `timeout` passed. Needs a CQ that only this SQ completes on meanwhile."""
        cqes, posted, deadline = [], 0, time.monotonic() + timeout
        while len(cqes) < len(wqes) and time.monotonic() < deadline:
            while posted < len(wqes) and posted - len(cqes) < self.sq_size:
                self.post_send(*wqes[posted]); posted += 1
            got = self.wait_cqes(1)
            if not got: break
            cqes += got
        return cqes
    def wait_cqes(self, n, timeout=5.0):
        """Polls until `n` CQEs arrived or `timeout` seconds passed; returns what came."""
        out, deadline = [], time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            out += self.poll()
            if len(out) < n: time.sleep(0.0002)
        return out
    def poll(self):
        out = []
        prod = struct.unpack_from("<I", self.cqm, 0)[0]
        while self.cons != prod:
            out.append(struct.unpack_from("<QIIII", self.cqm, 192 + (self.cons % self.cq_size) * 64)); self.cons += 1
        if out: struct.pack_into("<I", self.cqm, 64, self.cons)  # the consumer index: frees the slots
        return out
