#!/usr/bin/python3
"""rdma_cm between two real rnicd on the test bed (rnic0 in A, rnic1 in B, one run directory, both
capturing), driven over the control protocol by a raw client (raw_cm_client.py, no library):
  rc           listen on B, resolve address and route on A (ARP), connect with private data,
               CONNECT_REQUEST with the data and both addresses, QP attributes (PSNs cross),
               accept, CONNECT_RESPONSE, RTU, ESTABLISHED, DREQ/DREP, TIMEWAIT_EXIT ~2 s later;
  rejects      a port nobody listens on: REJECTED 8; the server's reject: REJECTED 28 with its
               private data;
  ud           SIDR: ESTABLISHED with the server's QPN and Q_Key 0x01234567; no listener:
               UNREACHABLE 1;
  ipv6         the same connection over the IPv6 addresses;
  death        a client session that ends while connected: the server gets DISCONNECTED; a
               server session that ends with a request untaken: the client gets REJECTED 28;
  rnicctl      `cm` lists the ids with their states, `stat` the CM's counters;
then both daemons stop (SIGTERM) and their captures are checked: rnic-pcap verifies every frame
(ICRC, MADs), tshark decodes the MADs as InfiniBand CM with no malformed or expert mark and the
values rnic-pcap reports (check_tshark_decode.py), and every GSI frame follows what Linux rxe
puts on the wire in the golden rping capture: UDP source port 0xD872, TTL 64, DF, DSCP 0, P_Key
0xFFFF, AckReq, Q_Key 0x80010000, source QP 1, PSNs from 0 by one per sender, and each CM
message's fields as rxe's but for the ones that must differ (ids, GUIDs, QPNs, PSNs, addresses,
ports, the flow label, which is the ports' hash).
Usage: check_cm.py TESTBED RNICD RNICCTL RNIC_PCAP GOLDEN_DIR"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from raw_cm_client import PS_UDP, CmSess, conn_param  # noqa: E402
from systest import Checks, daemon_exit_status, exit_counters, make_run  # noqa: E402

testbed, rnicd, rnicctl, rnic_pcap, golden_dir = sys.argv[1:6]
here = os.path.dirname(os.path.abspath(__file__))
name = f"rnicm{os.getpid() % 10000}"
state = f"/tmp/{name}"
env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.97.0",
           RNIC_TESTBED_NET6="fd97::")
checks = Checks(verdict_first=True)
check, failures = checks.check, checks.failures
run = make_run(env)
IP_A, IP_B, IP6_B = "10.97.0.1", "10.97.0.2", "fd97::2"
PORT = 20000 + os.getpid() % 12000
IBV_QPS_RTR, IBV_QPS_RTS = 2, 3


def ctl_json(*args):
    r = run(rnicctl, "--run-dir", f"{state}/run", "--json", *args, timeout=15)
    return json.loads(r.stdout)


def expect(sess, ch, name, status=0, what=""):
    ev = sess.next_event(ch)
    check(ev is not None and ev.name == name and ev.status == status,
          f"{what}: {name} ({status}) (got {ev!r}{'' if ev is None else f' status {ev.status}'})")
    return ev


def connect(cli, cch, srv, sch, ip, port, private=b"", qpn=0x111, server_qpn=0x222, what="rc"):
    """Resolves, connects and establishes; returns (client id, server id, CONNECT_REQUEST)."""
    c = cli.create_id(cch)
    check(cli.resolve_addr(c, ip, port) == 0, f"{what}: ResolveAddr {ip}")
    expect(cli, cch, "ADDR_RESOLVED", 0, what)
    check(cli.resolve_route(c) == 0, f"{what}: ResolveRoute")
    expect(cli, cch, "ROUTE_RESOLVED", 0, what)
    check(cli.connect(c, conn_param(qpn, private)) == 0, f"{what}: Connect")
    req = expect(srv, sch, "CONNECT_REQUEST", 0, what)
    if req is None:
        raise RuntimeError(f"{what}: no CONNECT_REQUEST")
    check(srv.accept(req.id, conn_param(server_qpn, b"welcome")) == 0, f"{what}: Accept (REP)")
    resp = expect(cli, cch, "CONNECT_RESPONSE", 0, what)
    check(resp is not None and resp.qp_num == server_qpn and resp.private.startswith(b"welcome"),
          f"{what}: CONNECT_RESPONSE names the server's QPN and carries its private data")
    check(cli.accept(c) == 0, f"{what}: Accept (RTU)")
    expect(srv, sch, "ESTABLISHED", 0, what)
    return c, req.id, req


def scenarios():
    srv, cli = CmSess(f"{state}/run/rnic1.sock"), CmSess(f"{state}/run/rnic0.sock")
    sch, cch = srv.channel(), cli.channel()
    listener = srv.create_id(sch)
    srv.bind(listener, IP_B, PORT)
    check(srv.listen(listener) == 0, f"B listens on {IP_B}:{PORT}")

    # ---- RC, IPv4 ----
    c, s, req = connect(cli, cch, srv, sch, IP_B, PORT, b"hello rnicd", what="rc")
    q = cli.query(c)
    check(req.private.startswith(b"hello rnicd") and req.private_len == 56,
          f"rc: CONNECT_REQUEST carries the client's private data, rdma_cm's header stripped ({req.private_len})")
    check(req.src[1:] == (IP_B, PORT) and req.dst[1:] == (IP_A, q["src"][2]),
          f"rc: the new id's addresses come from the rdma_cm header ({req.src}, {req.dst})")
    check(q["path_count"] == 1 and q["path_mtu"] == 5 and q["hop_limit"] == 64 and q["dmac"] != "00:00:00:00:00:00",
          f"rc: the client's route: one path, MTU 4096, hop limit 64, the neighbour's MAC ({q})")
    c_rtr, c_rts = cli.init_qp_attr(c, IBV_QPS_RTR), cli.init_qp_attr(c, IBV_QPS_RTS)
    s_rtr, s_rts = srv.init_qp_attr(s, IBV_QPS_RTR), srv.init_qp_attr(s, IBV_QPS_RTS)
    check(c_rtr["rq_psn"] == s_rts["sq_psn"] and s_rtr["rq_psn"] == c_rts["sq_psn"],
          "rc: each side sends from the PSN the other receives from")
    check(c_rtr["dest_qp_num"] == 0x222 and s_rtr["dest_qp_num"] == 0x111 and c_rts["timeout"] == 19,
          f"rc: destination QPNs and ACK timeout 19 ({c_rtr['dest_qp_num']:#x}, {s_rtr['dest_qp_num']:#x}, {c_rts['timeout']})")
    ids = ctl_json("-d", "rnic1", "cm")
    states = sorted((i["state"], i["ib_state"]) for i in ids)
    check(states == [("CONNECT", "ESTABLISHED"), ("LISTEN", "LISTEN")], f"rnicctl cm on B: {states}")
    check(cli.disconnect(c) == 0, "rc: Disconnect (DREQ)")
    expect(srv, sch, "DISCONNECTED", 0, "rc server")
    check(srv.disconnect(s) == 0, "rc: Disconnect (DREP)")
    expect(cli, cch, "DISCONNECTED", 0, "rc client")
    t0 = time.monotonic()
    expect(cli, cch, "TIMEWAIT_EXIT", 0, "rc client")
    expect(srv, sch, "TIMEWAIT_EXIT", 0, "rc server")
    waited = time.monotonic() - t0
    check(1.5 < waited < 4, f"rc: timewait about 2 s ({waited:.2f} s)")
    check(cli.destroy_id(c) == 5 and srv.destroy_id(s) == 3, "rc: DestroyId counts the events handed out")

    # ---- rejects ----
    c = cli.create_id(cch)
    cli.resolve_addr(c, IP_B, PORT + 1)
    expect(cli, cch, "ADDR_RESOLVED", 0, "no listener")
    cli.resolve_route(c)
    expect(cli, cch, "ROUTE_RESOLVED", 0, "no listener")
    cli.connect(c, conn_param(0x333))
    expect(cli, cch, "REJECTED", 8, "no listener (reason 8, invalid service ID)")
    cli.destroy_id(c)
    c = cli.create_id(cch)
    cli.resolve_addr(c, IP_B, PORT)
    expect(cli, cch, "ADDR_RESOLVED", 0, "reject")
    cli.resolve_route(c)
    expect(cli, cch, "ROUTE_RESOLVED", 0, "reject")
    cli.connect(c, conn_param(0x334))
    req = expect(srv, sch, "CONNECT_REQUEST", 0, "reject")
    check(srv.reject(req.id, b"not today") == 0, "reject: the server rejects with private data")
    ev = expect(cli, cch, "REJECTED", 28, "reject (28, consumer defined)")
    check(ev is not None and ev.private.startswith(b"not today") and ev.private_len == 148,
          "reject: the client gets the server's private data")
    cli.destroy_id(c)
    srv.destroy_id(req.id)

    # ---- UD ----
    ul = srv.create_id(sch, PS_UDP)
    srv.bind(ul, IP_B, PORT)
    srv.listen(ul)
    u = cli.create_id(cch, PS_UDP)
    cli.resolve_addr(u, IP_B, PORT)
    expect(cli, cch, "ADDR_RESOLVED", 0, "ud")
    cli.resolve_route(u)
    expect(cli, cch, "ROUTE_RESOLVED", 0, "ud")
    cli.connect(u, conn_param(0x444, b"ud hello"))
    req = expect(srv, sch, "CONNECT_REQUEST", 0, "ud")
    check(req is not None and req.private.startswith(b"ud hello") and req.private_len == 180,
          "ud: SIDR_REQ's private data, the header stripped")
    srv.accept(req.id, conn_param(0x555))
    ev = expect(cli, cch, "ESTABLISHED", 0, "ud")
    check(ev is not None and ev.qp_num == 0x555 and ev.qkey == 0x01234567,
          f"ud: the server's QPN and the port space's Q_Key ({ev and hex(ev.qp_num)}, {ev and hex(ev.qkey)})")
    u2 = cli.create_id(cch, PS_UDP)
    cli.resolve_addr(u2, IP_B, PORT + 1)
    expect(cli, cch, "ADDR_RESOLVED", 0, "ud no listener")
    cli.resolve_route(u2)
    expect(cli, cch, "ROUTE_RESOLVED", 0, "ud no listener")
    cli.connect(u2, conn_param(0x446))
    expect(cli, cch, "UNREACHABLE", 1, "ud without a listener (SIDR status 1, unsupported)")
    for i in (u, u2):
        cli.destroy_id(i)
    srv.destroy_id(req.id)
    srv.destroy_id(ul)

    # ---- IPv6 ----
    l6 = srv.create_id(sch)
    srv.bind(l6, IP6_B, PORT)
    srv.listen(l6)
    c6, s6, req6 = connect(cli, cch, srv, sch, IP6_B, PORT, b"six", qpn=0x611, server_qpn=0x622, what="ipv6")
    check(req6.dst[0] == 10 and req6.dst[1] == "fd97::1", f"ipv6: the new id's peer is fd97::1 ({req6.dst})")

    # ---- a client session ends while connected; a server session ends with a request untaken ----
    cli2 = CmSess(f"{state}/run/rnic0.sock")
    cch2 = cli2.channel()
    c2, s2, _ = connect(cli2, cch2, srv, sch, IP_B, PORT, qpn=0x711, server_qpn=0x722, what="death")
    cli2.close()
    expect(srv, sch, "DISCONNECTED", 0, "a client session ends: its connection's DREQ")
    srv.disconnect(s2)
    srv2 = CmSess(f"{state}/run/rnic1.sock")
    sch2 = srv2.channel()
    l2 = srv2.create_id(sch2)
    srv2.bind(l2, IP_B, PORT + 2)
    srv2.listen(l2)
    c3 = cli.create_id(cch)
    cli.resolve_addr(c3, IP_B, PORT + 2)
    expect(cli, cch, "ADDR_RESOLVED", 0, "death")
    cli.resolve_route(c3)
    expect(cli, cch, "ROUTE_RESOLVED", 0, "death")
    cli.connect(c3, conn_param(0x733))
    time.sleep(0.2)
    srv2.close()
    expect(cli, cch, "REJECTED", 28, "a server session ends with the request untaken: REJ")

    # ---- counters ----
    a = ctl_json("-d", "rnic0", "stat")
    b = ctl_json("-d", "rnic1", "stat")
    check(a.get("cm_req_sent", 0) >= 6 and b.get("cm_rep_sent", 0) >= 3 and b.get("cm_rej_sent", 0) >= 3
          and a.get("cm_bad_mads") == 0 and b.get("cm_bad_mads") == 0 and a.get("gsi_bad") == 0,
          f"counters: A sent {a.get('cm_req_sent')} REQs, B {b.get('cm_rep_sent')} REPs and {b.get('cm_rej_sent')} "
          f"REJs, no bad MADs")
    # Left connected on purpose: SIGTERM sends their DREQs.
    del c6, s6
    return cli, srv


def tshark_fields(pcap, attr=None):
    """Every GSI frame of `pcap` (attribute `attr` only, when given) as a flat {field: value}."""
    flt = "infiniband.bth.destqp == 1" + (f" && infiniband.mad.attributeid == {attr:#06x}" if attr else "")
    r = run("tshark", "-r", pcap, "-Y", flt, "-T", "json", timeout=60)
    out = []
    for pkt in json.loads(r.stdout or "[]"):
        flat = {}

        def walk(o):
            if isinstance(o, dict):
                for k, v in o.items():
                    if isinstance(v, (dict, list)):
                        walk(v)
                    else:
                        flat.setdefault(k, v)
            elif isinstance(o, list):
                for x in o:
                    walk(x)
        walk(pkt["_source"]["layers"])
        out.append(flat)
    return out


# Fields of a CM message that must differ between two connections (or are tshark's misreading of
# the REQ's flow label word, checked from the raw bytes instead), by the end of their names.
VARYING = ("transactionid", "mad.data", "smpdata", "localcaguid", "localqpn", "startpsn", "remoteqpneecn",
           "gid_ipv4", "gid", "serviceid.dport", "serviceid", "flowlabel", "reserved0", "pktrate",
           "localcommid", "remotecommid", "private", "invariant.crc", "psn", "pppmtu")
# The raw header and message blobs, and the fields of the rdma_cm header (addresses, port).
VARYING_EXACT = ("infiniband.mad", "infiniband.bth", "infiniband.deth", "infiniband.cm.req", "infiniband.cm.rep")


def comparable(frame):
    return {k: v for k, v in frame.items()
            if k.startswith("infiniband") and k not in VARYING_EXACT and ".ip_cm" not in k
            and not any(k.endswith(x) for x in VARYING)}


def check_captures():
    pcaps = [f"{state}/a.pcap", f"{state}/b.pcap"]
    for p in pcaps:
        r = run(rnic_pcap, "--quiet", "--json", p, check=False)
        f = json.loads(r.stdout)["files"][0] if r.stdout.startswith("{") else {}
        check(r.returncode == 0 and f.get("frames", 0) > 20 and f.get("icrc_ok") == f.get("frames"),
              f"rnic-pcap verifies {os.path.basename(p)}: {f.get('frames')} frames, {f.get('icrc_ok')} ICRC ok")
    r = run("/usr/bin/python3", f"{here}/check_tshark_decode.py", rnic_pcap, *pcaps, "--min-cm", "40", timeout=300,
            check=False)
    check(r.returncode == 0, "tshark decodes every frame as rnic-pcap does, MADs as InfiniBand CM, nothing malformed"
          + ("" if r.returncode == 0 else f": {(r.stdout + r.stderr).strip().splitlines()[-3:]}"))

    ours = tshark_fields(pcaps[0]) + tshark_fields(pcaps[1])
    bad = [f for f in ours if not (f.get("udp.srcport") == "55410" and f.get("infiniband.bth.p_key") == "65535"
                                   and f.get("infiniband.bth.a") == "1" and f.get("infiniband.bth.opcode") == "100"
                                   and f.get("infiniband.deth.q_key") == "0x0000000080010000"
                                   and f.get("infiniband.deth.srcqp") == "0x00000001"
                                   and f.get("infiniband.mad.baseversion") == "0x01"
                                   and f.get("infiniband.mad.classversion") == "0x02"
                                   and (f.get("ip.ttl") in (None, "64")) and (f.get("ip.flags.df") in (None, "1"))
                                   and (f.get("ip.dsfield") in (None, "0x00")))]
    check(len(ours) > 40 and not bad,
          f"every GSI frame ({len(ours)}) as rxe's: UDP source port 55410, P_Key, AckReq, Q_Key, source QP 1, "
          f"TTL 64, DF, DSCP 0 ({len(bad)} differ)")
    for pcap in pcaps:
        seen = {}
        ok = True
        for f in tshark_fields(pcap):
            src = f.get("eth.src")  # one GSI QP per port, whatever address it sends from
            psn = int(f.get("infiniband.bth.psn", "-1"))
            ok &= psn == seen.get(src, -1) + 1
            seen[src] = psn
        check(ok and seen, f"{os.path.basename(pcap)}: each sender's GSI PSNs count from 0 by one ({seen})")

    golden = f"{golden_dir}/rxe_rping_rdmacm_c5_s64.pcap"
    for attr, what in ((0x10, "REQ"), (0x13, "REP"), (0x14, "RTU"), (0x15, "DREQ"), (0x16, "DREP")):
        g = tshark_fields(golden, attr)
        mine = [f for f in ours if f.get("infiniband.mad.attributeid") == f"{attr:#06x}"]
        if not g or not mine:
            check(False, f"{what}: in the golden capture ({len(g)}) and ours ({len(mine)})")
            continue
        want = comparable(g[0])
        diffs = [{k: (v, want.get(k)) for k, v in comparable(m).items() if want.get(k) != v} for m in mine]
        diffs = [d for d in diffs if d]
        check(not diffs, f"{what}: {len(mine)} of ours with rxe's field values but ids, PSNs and addresses"
              + (f" (first difference: {diffs[0]})" if diffs else ""))

    # The REQ's flow label is the ports' hash (cma_get_roce_udp_flow_label), in its raw bytes.
    r = run("tshark", "-r", pcaps[0], "-Y", "infiniband.mad.attributeid == 0x0010", "-T", "fields",
            "-e", "infiniband.mad.data", timeout=60)
    good = 0
    lines = [line for line in r.stdout.split() if line]
    for hexdata in lines:
        d = bytes.fromhex(hexdata.replace(":", ""))
        label = int.from_bytes(d[88:92], "big") >> 12
        sport = int.from_bytes(d[142:144], "big")
        dport = int.from_bytes(d[14:16], "big")
        good += label == (sport * 31 + dport) & 0xFFFFF and d[95] >> 3 == 19 and d[52:54] == b"\xff\xff"
    check(lines and good == len(lines),
          f"REQ: flow label = (source port x 31 + port) & 0xFFFFF, local ACK timeout 19, LIDs 0xFFFF ({good}/{len(lines)})")


def functional():
    run(testbed, "up", "--daemons", "both", "--one-run-dir", "--pcap", "--rnicd", rnicd, timeout=60)
    cli, srv = scenarios()
    # SIGTERM while the IPv6 connection stands: whichever rnicd stops first sends its DREQ in its
    # last turn, the other answers it (DREP) or sends its own when it stops.
    run(testbed, "down", timeout=60)
    rc = (daemon_exit_status(state, "a"), daemon_exit_status(state, "b"))
    check(rc == ("0", "0"), f"both rnicd exit 0 ({rc})")
    a, b = exit_counters(state, "a"), exit_counters(state, "b")
    ended = a.get("cm_dreq_sent", 0) + a.get("cm_drep_sent", 0) + b.get("cm_dreq_sent", 0) + b.get("cm_drep_sent", 0)
    check(ended >= 6, f"the standing connection ended on the wire at shutdown (DREQs and DREPs: {ended})")
    check_captures()
    cli.close()
    srv.close()


try:
    try:
        functional()
    except Exception as exc:  # a broken step is a failure with its reason, not a bare traceback
        import traceback
        traceback.print_exc(file=sys.stdout)
        failures.append(f"{type(exc).__name__}: {exc}")
    finally:
        run(testbed, "down", timeout=60, check=False)
        subprocess.run(["rm", "-rf", state])
finally:
    status = checks.finish()
sys.exit(status)
