"""A raw client of rnicd's CM ops (emulator/host/abi/cm.hpp), written from the ABI without the
client library or librdmacm: a control session (Hello), then CM channels and ids. Layouts are
those of cm.hpp's structs (CmAddress 24 bytes, CmConnParam 276, CmEvent 380, CmQueryReply 108,
CmInitQpAttrReply 108)."""
import errno
import os
import select
import socket
import struct
import time

MAGIC = 0x434E5252
ABI_VERSION = 3
AF_INET, AF_INET6 = 2, 10

# CmOp
CREATE_CHANNEL, DESTROY_CHANNEL, CREATE_ID, DESTROY_ID, MIGRATE_ID, BIND_ADDR, RESOLVE_ADDR, \
    RESOLVE_ROUTE, QUERY, LISTEN, CONNECT, ACCEPT, REJECT, DISCONNECT, INIT_QP_ATTR, NOTIFY, \
    SET_OPTION, GET_EVENT, JOIN_MULTICAST, LEAVE_MULTICAST, ESTABLISH = range(25, 46)

PS_TCP, PS_UDP, PS_IB = 0x0106, 0x0111, 0x013F

EVENTS = ["ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR", "CONNECT_REQUEST",
          "CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE", "REJECTED", "ESTABLISHED", "DISCONNECTED",
          "DEVICE_REMOVAL", "MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE", "TIMEWAIT_EXIT"]


def address(ip, port, scope=0):
    """A CmAddress: IPv4 as ::ffff:a.b.c.d."""
    if ":" in ip:
        return struct.pack("<HHI", AF_INET6, port, scope) + socket.inet_pton(socket.AF_INET6, ip)
    return struct.pack("<HHI", AF_INET, port, 0) + b"\0" * 10 + b"\xff\xff" + socket.inet_aton(ip)


def parse_address(b):
    family, port, scope = struct.unpack_from("<HHI", b)
    raw = b[8:24]
    ip = socket.inet_ntoa(raw[12:]) if family == AF_INET else socket.inet_ntop(socket.AF_INET6, raw)
    return family, ip, port


def conn_param(qpn, private=b"", responder_resources=1, initiator_depth=1, retry=7, rnr=7):
    return struct.pack("<IIIBBBBBB2x", len(private), qpn, 0, responder_resources, initiator_depth, 0, retry, rnr, 0) + \
        private.ljust(256, b"\0")


class Event:
    def __init__(self, b):
        self.event, self.status, self.id, self.listen_id = struct.unpack_from("<IiII", b)
        self.name = EVENTS[self.event] if self.event < len(EVENTS) else str(self.event)
        self.src = parse_address(b[16:40])
        self.dst = parse_address(b[40:64])
        p = b[64:340]
        (self.private_len, self.qp_num, self.qkey, self.responder_resources, self.initiator_depth,
         self.flow_control, self.retry_count, self.rnr_retry_count, self.srq) = struct.unpack_from("<IIIBBBBBB", p)
        self.private = p[20:20 + min(self.private_len, 256)]
        self.ah_dgid = b[340:356]

    def __repr__(self):
        return f"{self.name}({self.status}) id {self.id}"


class CmSess:
    def __init__(self, path, timeout=10):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.connect(path)
        self.s.settimeout(timeout)
        self.seq = 0
        st, body, fds = self.call(1, struct.pack("<II", os.getpid(), 0))
        assert st == 0, st
        for fd in fds:
            os.close(fd)
        self.channels = {}  # handle -> our socket

    def close(self):
        for fd in self.channels.values():
            os.close(fd)
        self.channels = {}
        self.s.close()

    def call(self, op, body=b"", fds=()):
        self.seq += 1
        m = struct.pack("<IHHIIiI", MAGIC, ABI_VERSION, op, self.seq, 24 + len(body), 0, 0) + body
        socket.send_fds(self.s, [m], list(fds)) if fds else self.s.send(m)
        data, rfds, _, _ = socket.recv_fds(self.s, 65536, 5)
        return struct.unpack_from("<IHHIIiI", data)[5], data[24:], rfds

    def ok(self, op, body=b""):
        st, out, fds = self.call(op, body)
        for fd in fds:
            os.close(fd)
        if st != 0:
            raise OSError(st, f"CmOp {op}: {os.strerror(st)}")
        return out

    def channel(self):
        st, body, fds = self.call(CREATE_CHANNEL)
        assert st == 0 and len(fds) == 2, (st, fds)
        os.close(fds[1])  # the daemon's end: the daemon holds its own
        handle = struct.unpack_from("<I", body)[0]
        self.channels[handle] = fds[0]
        return handle

    def create_id(self, channel, ps=PS_TCP, qp_type=0):
        return struct.unpack_from("<I", self.ok(CREATE_ID, struct.pack("<IIII", channel, ps, qp_type, 0)))[0]

    def destroy_id(self, id_):
        return struct.unpack_from("<I", self.ok(DESTROY_ID, struct.pack("<II", id_, 0)))[0]

    def bind(self, id_, ip, port, scope=0):
        return self.ok(BIND_ADDR, struct.pack("<II", id_, 0) + address(ip, port, scope))

    def resolve_addr(self, id_, ip, port, timeout_ms=2000, scope=0):
        return self.call(RESOLVE_ADDR, struct.pack("<II", id_, timeout_ms) + b"\0" * 24 + address(ip, port, scope))[0]

    def resolve_route(self, id_):
        return self.call(RESOLVE_ROUTE, struct.pack("<II", id_, 2000))[0]

    def listen(self, id_, backlog=16):
        return self.call(LISTEN, struct.pack("<II", id_, backlog))[0]

    def connect(self, id_, param):
        return self.call(CONNECT, struct.pack("<II", id_, 0) + param)[0]

    def accept(self, id_, param=None):
        return self.call(ACCEPT, struct.pack("<II", id_, 0) + (param or conn_param(0)))[0]

    def reject(self, id_, private=b""):
        return self.call(REJECT, struct.pack("<IIII", id_, 0, len(private), 0) + private.ljust(256, b"\0"))[0]

    def disconnect(self, id_):
        return self.call(DISCONNECT, struct.pack("<II", id_, 0))[0]

    def query(self, id_):
        b = self.ok(QUERY, struct.pack("<II", id_, 0))
        q = {"src": parse_address(b[0:24]), "dst": parse_address(b[24:48]), "dmac": b[80:86].hex(":")}
        (q["pkey"], q["port_num"], q["path_count"], q["hop_limit"], q["traffic_class"], q["flow_label"],
         q["path_mtu"], q["sl"], q["packet_life_time"], q["sgid_index"], q["state"]) = struct.unpack_from("<HBBBBII4B", b, 86)
        return q

    def init_qp_attr(self, id_, state):
        b = self.ok(INIT_QP_ATTR, struct.pack("<II", id_, state))
        f = struct.unpack_from("<8I", b)
        attr = {"qp_state": f[0], "path_mtu": f[2], "qkey": f[3], "rq_psn": f[4], "sq_psn": f[5], "dest_qp_num": f[6],
                "qp_access_flags": f[7]}
        av = b[52:88]
        attr["dgid"] = av[:16]
        attr["flow_label"], attr["sgid_index"], attr["hop_limit"], attr["traffic_class"] = struct.unpack_from("<IBBB", av, 16)
        (attr["max_rd_atomic"], attr["max_dest_rd_atomic"], attr["min_rnr_timer"], attr["port_num"], attr["timeout"],
         attr["retry_cnt"], attr["rnr_retry"]) = struct.unpack_from("<7B", b, 92)
        attr["mask"] = struct.unpack_from("<I", b, 100)[0]
        return attr

    def next_event(self, channel, timeout=10.0):
        """The oldest event, waiting up to `timeout` for one: as the library does, the socket is a
        wake-up (readable while events wait; its bytes are drained, not counted, since a reader far
        behind may find the daemon's bytes dropped on a full socket) and GetEvent runs until EAGAIN."""
        fd = self.channels[channel]
        deadline = time.monotonic() + timeout
        while True:
            st, body, _ = self.call(GET_EVENT, struct.pack("<II", channel, 0))
            if st == 0:
                return Event(body)
            if st != errno.EAGAIN:
                raise OSError(st, f"GetEvent: {os.strerror(st)}")
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            os.set_blocking(fd, False)
            try:
                while os.read(fd, 4096):
                    pass
            except BlockingIOError:
                pass
