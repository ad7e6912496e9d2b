"""The CM MADs of an interop capture, from rnic-pcap's JSON: which exchange each belongs to (by
the rdma_cm port of its REQ or SIDR_REQ and the communication ids that follow), who sent what,
and which MADs were sent again. rnicd's probes of silent peers (a Get(ClassPortInfo) to the
peer's CM, docs/rdma_cm.md "Beyond Linux") and their answers are paired apart by transaction id.

A MAD counts as *resent* when its sender already sent one with the same attribute, transaction
id and communication ids: REQ, REP, DREQ and SIDR_REQ come again when their answer times out
(the CM's retransmission); MRA, RTU, DREP, REJ and SIDR_REP come again only as the answer to a
duplicate. Both kinds are listed apart, by sender."""
import json
import struct
import subprocess

TIMED = ("REQ", "REP", "DREQ", "SIDR_REQ")  # what a CM retransmits on its own timer
METHOD_GET, METHOD_GET_RESP = 0x01, 0x81


def probes(packets):
    """Pairs the CM-class Get(ClassPortInfo) probes with their GetResp answers by (prober, TID).
    Returns ({prober ip: {"sent": n, "answered": n}}, the rest of the packets, answers nobody
    asked for)."""
    asked, counts, rest, stray = {}, {}, [], []
    for p in packets:
        m = p["mad"]
        probe = m.get("mgmt_class") == 7 and m.get("attribute") == "ClassPortInfo" and "cm" not in m
        if probe and m.get("method") == METHOD_GET:
            asked[(p["src"], m["transaction_id"])] = False
            counts.setdefault(p["src"], {"sent": 0, "answered": 0})["sent"] += 1
        elif probe and m.get("method") == METHOD_GET_RESP:
            key = (p["dst"], m["transaction_id"])
            if key in asked and not asked[key]:
                asked[key] = True
                counts[p["dst"]]["answered"] += 1
            else:
                stray.append(p)
        else:
            rest.append(p)
    return counts, rest, stray


def mads(rnic_pcap, pcap):
    """(rnic-pcap exit status, failures, [packet dicts with a decoded MAD]) of one capture."""
    r = subprocess.run([rnic_pcap, "--json", pcap], capture_output=True, text=True, timeout=300)
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError:
        return r.returncode, [f"rnic-pcap --json: {r.stderr.strip()[-300:]}"], []
    f = doc["files"][0]
    return r.returncode, f.get("failed", []), [p for p in f.get("packets", []) if "mad" in p]


class Exchange:
    """One connection (or SIDR query) as the wire shows it, in order."""

    def __init__(self, port, port_space, active):
        self.port, self.port_space, self.active = port, port_space, active
        self.steps = []  # (sender ip, attribute, resent?)
        self.start_ns = 0  # capture time of the first MAD

    def text(self):
        """'REQ> <REP RTU> DREQ> <DREP' from the active side's point of view; resent MADs in ()."""
        out = []
        for src, attr, again in self.steps:
            word = f"{attr}>" if src == self.active else f"<{attr}"
            out.append(f"({word})" if again else word)
        return " ".join(out)


def exchanges(packets):
    """Groups the MADs into exchanges; returns (list of Exchange, per-sender resend counts,
    MADs matching no exchange). Counts: {sender ip: {"timer": {attr: n}, "answer": {attr: n}}}.
    Probes and their answers are not exchanges (probes()); an answer to no probe is unmatched."""
    by_comm = {}  # (ip, comm id) -> Exchange
    seen = set()
    found, resent = [], {}
    _, packets, unmatched = probes(packets)
    for p in packets:
        m, src, dst = p["mad"], p["src"], p["dst"]
        if m.get("mgmt_class") != 7 or "cm" not in m:
            unmatched.append(p)
            continue
        cm, attr = m["cm"], m["attribute"]
        local, remote = cm.get("local_comm_id", 0), cm.get("remote_comm_id", 0)
        key = (src, attr, m["transaction_id"], local, remote)
        again = key in seen
        seen.add(key)
        if again:
            kind = "timer" if attr in TIMED else "answer"
            counts = resent.setdefault(src, {"timer": {}, "answer": {}})[kind]
            counts[attr] = counts.get(attr, 0) + 1
        ex = by_comm.get((src, local)) or by_comm.get((dst, remote))
        if ex is None and attr in ("REQ", "SIDR_REQ") and not again:
            ex = Exchange(cm.get("port"), cm.get("port_space"), src)
            ex.start_ns = p.get("time_ns", 0)
            found.append(ex)
        if ex is None:
            unmatched.append(p)
            continue
        if local:
            by_comm[(src, local)] = ex
        if remote:
            by_comm[(dst, remote)] = ex
        ex.steps.append((src, attr, again))
    return found, resent, unmatched


def resent_total(resent, sender, kind="timer"):
    return sum(resent.get(sender, {}).get(kind, {}).values())


def summary(packets, ours, theirs):
    """One line: how many CM MADs each side sent, by attribute, and what each resent."""
    def count(ip):
        c = {}
        for p in packets:
            if p["src"] == ip:
                c[p["mad"]["attribute"]] = c.get(p["mad"]["attribute"], 0) + 1
        return " ".join(f"{k} {v}" for k, v in sorted(c.items()))

    _, resent, _ = exchanges(packets)
    parts = []
    for name, ip in (("rnicd", ours), ("rxe", theirs)):
        r = resent.get(ip, {"timer": {}, "answer": {}})
        parts.append(f"{name} sent {count(ip) or 'none'}; resent on timeout {dict(sorted(r['timer'].items())) or 0}, "
                     f"answers to duplicates {dict(sorted(r['answer'].items())) or 0}")
    return "; ".join(parts)


def write_gsi_pcap(src, dst):
    """Copies the frames to QP 1 (the CM's MADs) of classic pcap `src` into `dst`: tshark's
    checks are for the CM here, and its heuristic RPC-over-RDMA dissector calls small RC SENDs
    of perftest's and rsockets' malformed, rxe's as much as ours. Returns how many."""
    with open(src, "rb") as f:
        data = f.read()
    endian = "<" if struct.unpack("<I", data[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    out, off, n = [data[:24]], 24, 0
    while off + 16 <= len(data):
        incl = struct.unpack(endian + "I", data[off + 8:off + 12])[0]
        rec, frame = data[off:off + 16 + incl], data[off + 16:off + 16 + incl]
        off += 16 + incl
        ethertype = struct.unpack("!H", frame[12:14])[0] if len(frame) >= 14 else 0
        if ethertype == 0x0800 and len(frame) > 34 and frame[23] == 17:
            l4 = 14 + (frame[14] & 0x0F) * 4
        elif ethertype == 0x86DD and len(frame) > 54 and frame[20] == 17:
            l4 = 54
        else:
            continue
        bth = l4 + 8
        if len(frame) >= bth + 12 and struct.unpack("!H", frame[l4 + 2:l4 + 4])[0] == 4791 and \
                int.from_bytes(frame[bth + 5:bth + 8], "big") == 1:
            out.append(rec)
            n += 1
    with open(dst, "wb") as f:
        f.write(b"".join(out))
    return n
