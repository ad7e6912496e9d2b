#!/usr/bin/python3
"""tools/wireshark/rnic-roce.lua under tshark:

  sound:    every RoCEv2 frame of the given captures (the frames rnic-pcap verifies) gets
            rnic.icrc.status "good" and no expert error;
  corrupt:  copies of IPv4, 802.1Q, IPv6 and CNP frames with one byte changed: a payload byte,
            an ICRC byte or an unmasked field (IP ID, addresses, UDP port, P_Key, QP, PSN, M bit)
            make the status "bad" with an expert error "Bad ICRC"; a masked field (IPv4 TOS, TTL,
            header checksum; IPv6 traffic class, flow label, hop limit; UDP checksum; FECN/BECN)
            leaves it "good";
  decode:   the CNP frame's fields, and FLUSH / ATOMIC WRITE frames (built here, ICRC by zlib)
            that Wireshark 4.0 shows as unknown opcodes, decoded field by field.

Usage: check_lua_plugin.py PLUGIN RNIC_PCAP SAMPLE.pcap IPV6_GOLDEN.pcap [MORE.pcap...]
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcap_records  # noqa: E402

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def tshark(plugin, path, fields, extra=()):
    cmd = ["tshark", "-n", "-r", path, "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a",
           "-E", "aggregator=|"]
    if plugin:
        cmd[1:1] = ["-X", f"lua_script:{plugin}"]
    for f in fields:
        cmd += ["-e", f]
    r = subprocess.run(cmd + list(extra), capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} -> {r.returncode}: {r.stderr}")
    if "Lua" in r.stderr and "rror" in r.stderr:
        raise RuntimeError(f"Lua error: {r.stderr}")
    rows = []
    for line in r.stdout.splitlines():
        cols = line.split("\t")
        rows.append(dict(zip(fields, cols + [""] * (len(fields) - len(cols)))))
    return rows


# ---------------------------------------------------------------- sound captures

def check_sound(plugin, rnic_pcap, path):
    run = subprocess.run([rnic_pcap, "--json", path], capture_output=True, text=True, timeout=120)
    doc = json.loads(run.stdout)["files"][0]
    sound = {p["frame"] for p in doc["packets"] if p.get("icrc_ok")}
    rows = tshark(plugin, path, ["frame.number", "rnic.icrc.status", "_ws.expert.message"])
    status = {int(r["frame.number"]): r["rnic.icrc.status"] for r in rows if r["rnic.icrc.status"]}
    bad = sorted(n for n, s in status.items() if s != "good")
    errors = sorted(int(r["frame.number"]) for r in rows if "Bad ICRC" in r["_ws.expert.message"])
    name = os.path.basename(path)
    check(len(sound) > 0 and set(status) == sound,
          f"{name}: plugin checked the {len(status)} frames rnic-pcap verified ({len(sound)})"
          + ("" if set(status) == sound else f"; differ: {sorted(set(status) ^ sound)[:10]}"))
    check(not bad and not errors, f"{name}: all good, no expert error (bad: {bad[:10]}, errors: {errors[:10]})")


# ---------------------------------------------------------------- frame layout

def locate(frame):
    """(l3, l4, bth, ip_end, version) of an Ethernet RoCEv2 frame."""
    l3 = 14
    ethertype = struct.unpack(">H", frame[12:14])[0]
    if ethertype == 0x8100:
        ethertype = struct.unpack(">H", frame[16:18])[0]
        l3 = 18
    if ethertype == 0x0800:
        l4 = l3 + (frame[l3] & 0xF) * 4
        ip_end = l3 + struct.unpack(">H", frame[l3 + 2:l3 + 4])[0]
        return l3, l4, l4 + 8, ip_end, 4
    l4 = l3 + 40
    return l3, l4, l4 + 8, l4 + struct.unpack(">H", frame[l3 + 4:l3 + 6])[0], 6


def icrc(frame):
    """The RoCEv2 ICRC by zlib, for the frames built here."""
    l3, l4, bth, ip_end, version = locate(frame)
    head = bytearray(frame[l3:bth + 12])
    if version == 4:
        head[1] = head[8] = head[10] = head[11] = 0xFF
    else:
        head[0] |= 0x0F
        head[1:4] = b"\xff\xff\xff"
        head[7] = 0xFF
    u = l4 - l3
    head[u + 6:u + 8] = b"\xff\xff"
    head[bth - l3 + 4] = 0xFF
    return zlib.crc32(bytes(head) + frame[bth + 12:ip_end - 4], zlib.crc32(b"\xff" * 8))


def flip(offset, mask=0xFF):
    def f(frame):
        b = bytearray(frame)
        b[offset] ^= mask
        return bytes(b)
    return f


def mutations(frame):
    """(name, function, expected status) for one frame."""
    l3, l4, bth, ip_end, version = locate(frame)
    m = [("original", lambda fr: fr, "good"),
         ("last byte before the ICRC", flip(ip_end - 5), "bad"),
         ("ICRC first byte", flip(ip_end - 4, 0x01), "bad"),
         ("ICRC last byte", flip(ip_end - 1, 0x80), "bad"),
         ("UDP checksum (masked)", flip(l4 + 6), "good"),
         ("UDP source port", flip(l4 + 1), "bad"),
         ("BTH FECN+BECN (masked)", flip(bth + 4, 0xC0), "good"),
         ("BTH MigReq bit", flip(bth + 1, 0x40), "bad"),
         ("BTH P_Key", flip(bth + 3), "bad"),
         ("BTH destination QP", flip(bth + 7), "bad"),
         ("BTH PSN", flip(bth + 11), "bad")]
    if bth + 12 < ip_end - 5:
        m.append(("first byte after the BTH", flip(bth + 12), "bad"))
    if version == 4:
        m += [("IPv4 TOS (masked)", flip(l3 + 1), "good"),
              ("IPv4 TTL (masked)", flip(l3 + 8), "good"),
              ("IPv4 header checksum (masked)", flip(l3 + 10), "good"),
              ("IPv4 ID", flip(l3 + 5), "bad"),
              ("IPv4 source address", flip(l3 + 15, 0x01), "bad"),
              ("IPv4 destination address", flip(l3 + 19, 0x01), "bad")]
    else:
        m += [("IPv6 traffic class (masked)", flip(l3, 0x0F), "good"),
              ("IPv6 traffic class low nibble, flow label (masked)", flip(l3 + 1), "good"),
              ("IPv6 flow label (masked)", flip(l3 + 3), "good"),
              ("IPv6 hop limit (masked)", flip(l3 + 7), "good"),
              ("IPv6 source address", flip(l3 + 23, 0x01), "bad"),
              ("IPv6 destination address", flip(l3 + 39, 0x01), "bad")]
    return m


def check_corruption(plugin, tmp, bases):
    records, expected = [], []
    for label, frame in bases:
        for name, fn, want in mutations(frame):
            records.append((len(records) * 1000, fn(frame)))
            expected.append((f"{label}: {name}", want))
    path = os.path.join(tmp, "corrupted.pcap")
    pcap_records.write(path, records)
    rows = tshark(plugin, path, ["frame.number", "rnic.icrc.status", "_ws.expert.message",
                                 "_ws.expert.severity"])
    check(len(rows) == len(records), f"corrupted copies: tshark read {len(rows)} of {len(records)} frames")
    # tshark's expert summary, as Wireshark's Expert Information dialog lists it: one "Bad ICRC"
    # error per corrupted copy, in the Checksum group.
    r = subprocess.run(["tshark", "-n", "-X", f"lua_script:{plugin}", "-r", path, "-q", "-z", "expert,error"],
                       capture_output=True, text=True, timeout=300)
    lines = [ln for ln in r.stdout.splitlines() if "Bad ICRC" in ln]
    listed = sum(int(ln.split()[0]) for ln in lines if ln.split()[0].isdigit())
    want_bad = sum(1 for _, want in expected if want == "bad")
    check(listed == want_bad and all("Checksum" in ln and "RNIC" in ln for ln in lines),
          f"tshark -z expert,error lists {listed} Bad ICRC error(s) in group Checksum (expected {want_bad})")
    for row, (what, want) in zip(rows, expected):
        got = row["rnic.icrc.status"]
        flagged = "Bad ICRC" in row["_ws.expert.message"]
        check(got == want and flagged == (want == "bad"),
              f"{what}: {got or '(none)'}{', expert error' if flagged else ''} (expected {want})")


# ---------------------------------------------------------------- decoding

def build_ipv4(opcode, ext, payload=b"", dest_qp=0x12, psn=100):
    pad = (-len(payload)) % 4
    bth = struct.pack(">BBHBBHBBH", opcode, pad << 4, 0xFFFF, 0, 0, dest_qp, 0x80, psn >> 16, psn & 0xFFFF)
    l4_len = 8 + len(bth) + len(ext) + len(payload) + pad + 4
    udp = struct.pack(">HHHH", 0xC123, 4791, l4_len, 0)
    ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + l4_len, 7, 0x4000, 64, 17, 0,
                               bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])))
    s = sum(struct.unpack(">10H", ip))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    ip[10:12] = struct.pack(">H", ~s & 0xFFFF)
    eth = bytes.fromhex("020000000002" "020000000001" "0800")
    frame = eth + bytes(ip) + udp + bth + ext + payload + b"\0" * pad + b"\0\0\0\0"
    return frame[:-4] + struct.pack("<I", icrc(frame))


def check_decode(plugin, tmp, cnp_frame):
    flush = build_ipv4(0x1C, struct.pack(">I", 0x12) + struct.pack(">QII", 0x1122334455667788, 0xABCDEF01, 4096))
    awrite = build_ipv4(0x1D, struct.pack(">QII", 0x0000_7F00_0000_1000, 0x00C0FFEE, 8),
                        payload=bytes.fromhex("0102030405060708"), psn=101)
    path = os.path.join(tmp, "decode.pcap")
    pcap_records.write(path, [(0, cnp_frame), (1000, flush), (2000, awrite)])
    fields = ["frame.number", "rnic.icrc.status", "rnic.opcode", "_ws.col.Info", "rnic.cnp.becn",
              "rnic.cnp.fecn", "rnic.cnp.destqp", "rnic.cnp.reserved", "rnic.feth", "rnic.feth.placement",
              "rnic.feth.level", "rnic.reth.va", "rnic.reth.r_key", "rnic.reth.dmalen", "rnic.atomic_write.data"]
    rows = tshark(plugin, path, fields)
    plain = tshark(None, path, ["infiniband.bth.opcode", "_ws.col.Info"])
    if not check(len(rows) == 3, f"decode: tshark read {len(rows)} of 3 frames"):
        return
    cnp, fl, aw = rows
    for r, name in ((cnp, "CNP"), (fl, "FLUSH"), (aw, "ATOMIC WRITE")):
        check(r["rnic.icrc.status"] == "good", f"{name}: ICRC good ({r['rnic.icrc.status']})")
    # Why the plugin decodes them: if a later Wireshark knows these opcodes this note fails, and
    # the plugin's decoding of them can go.
    check(len(plain) == 3 and all(p["_ws.col.Info"].startswith("Unknown OpCode") for p in plain),
          f"without the plugin tshark shows them as unknown: {[p['_ws.col.Info'] for p in plain]}")
    bth4 = cnp_frame[locate(cnp_frame)[2] + 4]
    want_qp = int.from_bytes(cnp_frame[locate(cnp_frame)[2] + 5:locate(cnp_frame)[2] + 8], "big")
    check(cnp["rnic.opcode"] == "0x81" and cnp["_ws.col.Info"].startswith("CNP QP="),
          f"CNP named: opcode {cnp['rnic.opcode']}, info {cnp['_ws.col.Info']!r}")
    check(cnp["rnic.cnp.becn"] == str(int(bool(bth4 & 0x40))) and cnp["rnic.cnp.fecn"] == str(int(bool(bth4 & 0x80))),
          f"CNP BECN {cnp['rnic.cnp.becn']}, FECN {cnp['rnic.cnp.fecn']} (byte 4 {bth4:#04x})")
    check(int(cnp["rnic.cnp.destqp"], 0) == want_qp, f"CNP destination QP {cnp['rnic.cnp.destqp']} ({want_qp:#x})")
    check(cnp["rnic.cnp.reserved"].replace(":", "") == "00" * 16, f"CNP reserved bytes {cnp['rnic.cnp.reserved']}")
    check(fl["rnic.opcode"] == "0x1c" and fl["_ws.col.Info"].startswith("RC Flush QP=0x000012 PSN=100"),
          f"FLUSH named: {fl['_ws.col.Info']!r}")
    check((int(fl["rnic.feth"], 0), fl["rnic.feth.placement"], fl["rnic.feth.level"]) == (0x12, "2", "1"),
          f"FLUSH FETH {fl['rnic.feth']} placement {fl['rnic.feth.placement']} level {fl['rnic.feth.level']}")
    check((int(fl["rnic.reth.va"], 0), int(fl["rnic.reth.r_key"], 0), int(fl["rnic.reth.dmalen"], 0))
          == (0x1122334455667788, 0xABCDEF01, 4096),
          f"FLUSH RETH va {fl['rnic.reth.va']} r_key {fl['rnic.reth.r_key']} len {fl['rnic.reth.dmalen']}")
    check(aw["rnic.opcode"] == "0x1d" and aw["_ws.col.Info"].startswith("RC Atomic Write QP=0x000012 PSN=101"),
          f"ATOMIC WRITE named: {aw['_ws.col.Info']!r}")
    check((int(aw["rnic.reth.va"], 0), int(aw["rnic.reth.r_key"], 0), int(aw["rnic.reth.dmalen"], 0),
           int(aw["rnic.atomic_write.data"], 0)) == (0x7F0000001000, 0xC0FFEE, 8, 0x0102030405060708),
          f"ATOMIC WRITE RETH va {aw['rnic.reth.va']} r_key {aw['rnic.reth.r_key']} len {aw['rnic.reth.dmalen']}"
          f" data {aw['rnic.atomic_write.data']}")
    # A flipped data byte of the ATOMIC WRITE is caught too.
    bad = flip(len(awrite) - 5)(awrite)
    pcap_records.write(path, [(0, bad)])
    rows = tshark(plugin, path, ["rnic.icrc.status", "_ws.expert.message"])
    check(rows and rows[0]["rnic.icrc.status"] == "bad" and "Bad ICRC" in rows[0]["_ws.expert.message"],
          f"ATOMIC WRITE with a flipped data byte: {rows}")


def first(path, pred):
    for _ts, frame in pcap_records.read(path)[1]:
        if pred(frame):
            return frame
    raise RuntimeError(f"{path}: no frame matches")


def is_roce(frame, opcode=None, vlan=None, min_payload=0):
    try:
        l3, l4, bth, ip_end, _v = locate(frame)
    except struct.error:
        return False
    if len(frame) < bth + 12 or struct.unpack(">H", frame[l4 + 2:l4 + 4])[0] != 4791:
        return False
    if vlan is not None and (l3 == 18) != vlan:
        return False
    if opcode is not None and frame[bth] != opcode:
        return False
    return ip_end - 4 - (bth + 12) >= min_payload


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        sys.exit(2)
    plugin, rnic_pcap, sample, ipv6 = sys.argv[1:5]
    more = sys.argv[5:]
    for path in dict.fromkeys([sample, ipv6] + more):  # each once, in order
        check_sound(plugin, rnic_pcap, path)
    cnp = first(sample, lambda f: is_roce(f, opcode=0x81))
    bases = [("IPv4 RC SEND ONLY", first(sample, lambda f: is_roce(f, opcode=0x04, vlan=False, min_payload=8))),
             ("802.1Q", first(sample, lambda f: is_roce(f, vlan=True, min_payload=8))),
             ("IPv6 (rxe)", first(ipv6, lambda f: is_roce(f, min_payload=8) and locate(f)[4] == 6)),
             ("CNP", cnp)]
    with tempfile.TemporaryDirectory() as tmp:
        check_corruption(plugin, tmp, bases)
        check_decode(plugin, tmp, cnp)
    print(f"{'PASSED' if not failures else 'FAILED'}: {len(failures)} failure(s)")
    for f in failures[:20]:
        print("  " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
