#!/usr/bin/env python3
"""The host interface against two real rnicd on the test bed, driven by a raw client (the
control protocol and the rings from docs/host_interface.md, no client library): one QP in each
daemon, RTR waits for ARP, a 3000-byte SEND from A to B through the rings (doorbell + kick of a
sleeping daemon, CQEs back with the user's wr_ids), Stats, and SIGTERM while a session is open
(IBV_EVENT_DEVICE_FATAL in the async ring, the connection closed, exit 0, socket removed).
Usage: check_host_rings.py TESTBED RNICD"""
import json
import os
import socket
import struct
import subprocess
import sys
import time

from raw_host_client import Sess
from systest import Checks, daemon_exit_status, make_run

testbed, rnicd = sys.argv[1:3]
name = f"rnicht{os.getpid() % 10000}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=f"/tmp/{name}")
state = env["RNIC_TESTBED_DIR"]
checks = Checks()
check, failures = checks.check, checks.failures
run = make_run(env)


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
    rc = daemon_exit_status(state, "b", seconds=5)
    check(rc == "0", f"rnicd B exits 0 (got {rc})")
    check(not os.path.exists(f"{state}/run-b/rnic0.sock"), "B removed its socket file")


try:
    functional()
finally:
    run(testbed, "down", timeout=60, check=False)
    subprocess.run(["rm", "-rf", state])
sys.exit(1 if failures else 0)
