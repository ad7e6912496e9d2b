"""The wire phase of run_interop_cm.py: rnicd's CM driven through its control protocol by
tests/system/raw_cm_client.py (no librdmacm of ours in the way) against the VM's rdmacm-utils
over rxe, so a CM difference shows even where our library would hide or add one. Each check
asserts the events on our side and what the VM's program printed and returned:
  - our REQ to `rping -s`: CONNECT_RESPONSE with rxe's QPN, RTU, our DREQ, DISCONNECTED and
    TIMEWAIT_EXIT; rping sees the disconnect and ends;
  - `rping -c` to our listener: CONNECT_REQUEST with both addresses and ports as the REQ's
    rdma_cm header gives them, our REP with private data, rxe's RTU (ESTABLISHED), our DREQ;
  - `ucmatose` rejected by us with private data: rxe reports REJECTED status 28 (consumer);
  - SIDR both ways with udaddy: the QPN and rdma_cm's UDP Q_Key 0x01234567."""
import socket
import time

import interop_bed as bedlib
from raw_cm_client import PS_UDP, CmSess, conn_param

UDP_QKEY = 0x01234567
UDADDY_PORT = 7174  # udaddy has no port option
IBV_QPT_UD = 4


def run(r):
    """r: the Runner (bed, ports, record, selected)."""
    sess = CmSess(f"{r.bed.run_dir}/rnic0.sock")
    try:
        ch = sess.channel()
        for name, fn, fixed in (("raw REQ to rping -s", req_to_rping, None),
                                ("rping -c to a raw listener", rping_to_listener, None),
                                ("raw REJ with private data to ucmatose", reject_ucmatose, None),
                                ("raw SIDR_REQ to udaddy", sidr_to_udaddy, UDADDY_PORT),
                                ("udaddy to a raw UDP listener", udaddy_to_listener, UDADDY_PORT)):
            if not r.selected(name) or not r.in_budget("wire", name):
                continue
            port = fixed or r.next_port()
            r.add_run(port, f"wire: {name}")
            t0 = time.monotonic()
            notes, problems = [], []
            try:
                fn(r, sess, ch, port, notes, problems)
            except Exception as e:  # a broken step is this check's failure, the phase goes on
                problems.append(f"{type(e).__name__}: {e}")
            r.record("wire", name, "", not problems, time.monotonic() - t0,
                     "; ".join(notes) if not problems else "; ".join(problems + notes), port=port)
    finally:
        sess.close()


def expect(sess, ch, name, problems, status=0, timeout=15):
    ev = sess.next_event(ch, timeout)
    if ev is None or ev.name != name or ev.status != status:
        problems.append(f"expected {name}({status}), got {ev!r}" + ("" if ev is None else f" status {ev.status}"))
        return None
    return ev


def vm_end(job, problems, notes, want_rc=None, words=(), timeout=20):
    rc = job.wait(timeout)
    if rc is None:
        job.kill()
        job.wait(5)
        problems.append(f"the VM's program did not end within {timeout} s")
    out = job.output()
    if want_rc is not None and rc != want_rc:
        problems.append(f"VM exit {rc}, {want_rc} expected")
    for w in words:
        if w not in out:
            problems.append(f"VM output lacks '{w}': {out[-600:]!r}")
    notes.append(f"VM exit {rc}")
    return out


def connect(sess, ch, ip, port, problems, ps=None, qpn=0x111, private=b""):
    c = sess.create_id(ch, ps=ps, qp_type=IBV_QPT_UD) if ps else sess.create_id(ch)
    if sess.resolve_addr(c, ip, port) != 0 or not expect(sess, ch, "ADDR_RESOLVED", problems):
        return c, None
    if sess.resolve_route(c) != 0 or not expect(sess, ch, "ROUTE_RESOLVED", problems):
        return c, None
    if sess.connect(c, conn_param(qpn, private)) != 0:
        problems.append("Connect refused")
        return c, None
    return c, True


def req_to_rping(r, sess, ch, port, notes, problems):
    job, up = r.vm_server(f"rping -s -a $RXE_IP -p {port} -V -C 1", port, 60)
    if not up:
        problems.append("rping -s not listening")
        return
    c, ok = connect(sess, ch, bedlib.VM_IP, port, problems, private=b"rnicd raw client")
    resp = ok and expect(sess, ch, "CONNECT_RESPONSE", problems)
    if resp:
        if resp.qp_num == 0:
            problems.append("CONNECT_RESPONSE without rxe's QPN")
        notes.append(f"REP: rxe QPN {resp.qp_num:#x}, responder resources {resp.responder_resources}, "
                     f"initiator depth {resp.initiator_depth}, RNR retry {resp.rnr_retry_count}")
        if sess.accept(c) != 0:  # the RTU
            problems.append("Accept (RTU) refused")
        time.sleep(0.5)
        sess.disconnect(c)
        expect(sess, ch, "DISCONNECTED", problems)
        expect(sess, ch, "TIMEWAIT_EXIT", problems, timeout=30)
    sess.destroy_id(c)
    vm_end(job, problems, notes, words=("DISCONNECT",))


def rping_to_listener(r, sess, ch, port, notes, problems):
    listener = sess.create_id(ch)
    sess.bind(listener, bedlib.RNIC_IP, port)
    if sess.listen(listener) != 0:
        problems.append("Listen refused")
        return
    job = r.bed.vm_job(f"timeout 60 rping -c -a {bedlib.RNIC_IP} -p {port} -V -C 1")
    req = expect(sess, ch, "CONNECT_REQUEST", problems, timeout=30)
    if req:
        if req.src[1:] != (bedlib.RNIC_IP, port) or req.dst[1] != bedlib.VM_IP or req.dst[2] == 0:
            problems.append(f"CONNECT_REQUEST addresses {req.src} <- {req.dst}")
        notes.append(f"REQ from {req.dst[1]}:{req.dst[2]}, rxe QPN {req.qp_num:#x}")
        if sess.accept(req.id, conn_param(0x222, b"welcome from rnicd")) != 0:
            problems.append("Accept (REP) refused")
        if expect(sess, ch, "ESTABLISHED", problems):
            time.sleep(0.5)
            sess.disconnect(req.id)
            expect(sess, ch, "DISCONNECTED", problems)
            expect(sess, ch, "TIMEWAIT_EXIT", problems, timeout=30)
        sess.destroy_id(req.id)
    sess.destroy_id(listener)
    vm_end(job, problems, notes, words=("DISCONNECT",))


def reject_ucmatose(r, sess, ch, port, notes, problems):
    listener = sess.create_id(ch)
    sess.bind(listener, bedlib.RNIC_IP, port)
    sess.listen(listener)
    job = r.bed.vm_job(f"timeout 60 ucmatose -s {bedlib.RNIC_IP} -p {port} -c 1")
    req = expect(sess, ch, "CONNECT_REQUEST", problems, timeout=30)
    if req:
        if sess.reject(req.id, b"not today, rxe") != 0:
            problems.append("Reject refused")
        sess.destroy_id(req.id)
    sess.destroy_id(listener)
    vm_end(job, problems, notes, want_rc=28, words=("RDMA_CM_EVENT_REJECTED, error: 28",))


def sidr_to_udaddy(r, sess, ch, port, notes, problems):
    job, up = r.vm_server("udaddy -b $RXE_IP -c 1 -C 0", port, 60)
    if not up:
        problems.append("udaddy not listening")
        return
    c, ok = connect(sess, ch, bedlib.VM_IP, port, problems, ps=PS_UDP, qpn=0x444, private=b"sidr from rnicd")
    ev = ok and expect(sess, ch, "ESTABLISHED", problems)
    if ev:
        if ev.qp_num == 0 or ev.qkey != UDP_QKEY:
            problems.append(f"SIDR_REP gave QPN {ev.qp_num:#x}, Q_Key {ev.qkey:#x}")
        notes.append(f"SIDR_REP: rxe QPN {ev.qp_num:#x}, Q_Key {ev.qkey:#x}, AH DGID "
                     f"{socket.inet_ntop(socket.AF_INET6, ev.ah_dgid)}")
    sess.destroy_id(c)
    vm_end(job, problems, notes, want_rc=0, words=("return status 0",))


def udaddy_to_listener(r, sess, ch, port, notes, problems):
    listener = sess.create_id(ch, ps=PS_UDP, qp_type=IBV_QPT_UD)
    sess.bind(listener, bedlib.RNIC_IP, port)
    sess.listen(listener)
    job = r.bed.vm_job(f"timeout 60 udaddy -s {bedlib.RNIC_IP} -c 1 -C 0")
    req = expect(sess, ch, "CONNECT_REQUEST", problems, timeout=30)
    if req:
        notes.append(f"SIDR_REQ from {req.dst[1]}:{req.dst[2]}")
        if sess.accept(req.id, conn_param(0x555)) != 0:
            problems.append("Accept (SIDR_REP) refused")
        sess.destroy_id(req.id)
    sess.destroy_id(listener)
    vm_end(job, problems, notes, want_rc=0, words=("return status 0",))
