"""Checks that the frames rnicd put on the wire follow the conventions Linux rxe relies on when it
receives them (drivers/infiniband/sw/rxe: the UDP tunnel socket on port 4791, rxe_rcv's address
checks against the QP's path, the kernel's IPv4 input path):
  - Ethernet type IPv4, IPv4 version 4, IHL 5 (no options), header checksum valid, no fragment
    (DF set, MF clear, offset 0), protocol UDP, TTL 64 and DSCP/ECN 0 as rxe sends them;
  - source IP = the address of our GID ::ffff:<ip> (rxe drops RC/UC frames from any other
    source than the QP's remote GID), destination = the VM's address;
  - UDP destination port 4791, source port in 0xC000-0xFFFF (RoCEv2 annex A17.3.4 range),
    UDP checksum 0 (a non-zero one would be verified by the kernel), UDP length = IP payload.
A CNP (BTH opcode 0x81) carries DSCP 48 (np_cnp_dscp) and is not ECN-capable: TOS 0xc0.
Over IPv6 (link-local GIDs): traffic class 0 (or ECT(0), as IPv4's TOS), flow label 0, hop limit 64, next header UDP, the
same UDP rules, addresses the two link-local ones. Plain stdlib pcap reading."""
import ipaddress
import struct

ROCE_PORT = 4791
CNP_OPCODE = 0x81
CNP_TOS = 48 << 2  # np_cnp_dscp's default, not ECT (docs/congestion.md)


def allowed_tos(bth_opcode):
    """The TOS / traffic class values a frame with this BTH opcode may carry."""
    return (CNP_TOS,) if bth_opcode == CNP_OPCODE else (0x00, 0x02)


def read_pcap(path):
    """Yields (frame_number, bytes) of a classic pcap file (either byte order, us or ns)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        endian = "<"
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        endian = ">"
    else:
        raise ValueError(f"{path}: not a classic pcap file")
    off, n = 24, 0
    while off + 16 <= len(data):
        incl = struct.unpack(endian + "IIII", data[off:off + 16])[2]
        off += 16
        n += 1
        yield n, data[off:off + incl]
        off += incl


def ipv4_checksum_ok(hdr):
    s = sum(struct.unpack("!10H", hdr[:20]))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s == 0xFFFF


def link_local(mac):
    """The fe80:: address Linux and rnicd derive from a MAC (modified EUI-64, RFC 4291 app. A)."""
    b = bytearray(bytes.fromhex(mac.replace(":", "")))
    b[0] ^= 0x02
    iid = bytes(b[:3]) + b"\xff\xfe" + bytes(b[3:])
    return str(ipaddress.IPv6Address(b"\xfe\x80" + bytes(6) + iid))


def udp_problems(udp, ip_payload_length):
    problems = []
    sport, dport, ulen, csum = struct.unpack("!HHHH", udp)
    if dport != ROCE_PORT:
        problems.append(f"UDP destination port {dport}")
    if sport < 0xC000:
        problems.append(f"UDP source port 0x{sport:04x} outside 0xC000-0xFFFF")
    if csum != 0:
        problems.append(f"UDP checksum 0x{csum:04x} (rxe sends 0)")
    if ulen != ip_payload_length:
        problems.append(f"UDP length {ulen}, IP payload {ip_payload_length}")
    return problems


def check_frame6(frame, src_ip, dst_ip):
    """IPv6: traffic class 0 (ECT(0) allowed: DCQCN), flow label 0, hop limit 64, next header UDP, as rxe
    sends them."""
    ip = frame[14:]
    problems = []
    first = struct.unpack("!I", ip[:4])[0]
    if first >> 28 != 6:
        problems.append(f"IP version {first >> 28}")
    if (first >> 20) & 0xFF not in allowed_tos(ip[48] if len(ip) > 48 else None):  # as IPv4's TOS
        problems.append(f"traffic class 0x{(first >> 20) & 0xFF:02x} (want DSCP 0 and ECN not-ECT or ECT(0))")
    if first & 0xFFFFF:
        problems.append(f"flow label 0x{first & 0xFFFFF:05x} (rxe sends 0)")
    plen, nh, hlim = struct.unpack("!HBB", ip[4:8])
    if nh != 17:
        problems.append(f"next header {nh}")
    if hlim != 64:
        problems.append(f"hop limit {hlim} (rxe: 64)")
    src, dst = str(ipaddress.IPv6Address(ip[8:24])), str(ipaddress.IPv6Address(ip[24:40]))
    if src != src_ip:
        problems.append(f"source {src}, our GID is {src_ip}")
    if dst != dst_ip:
        problems.append(f"destination {dst}, peer is {dst_ip}")
    return problems + udp_problems(ip[40:48], plen)


def check_frame(frame, src_ip, dst_ip, src_ip6=None, dst_ip6=None):
    """Problems of one RoCEv2 frame sent by us, as a list of strings (empty: conforming)."""
    problems = []
    if len(frame) < 14 + 20 + 8 + 12 + 4:
        return ["frame too short"]
    eth_type = struct.unpack("!H", frame[12:14])[0]
    if eth_type == 0x86DD and len(frame) >= 14 + 40 + 8 + 12 + 4:
        return check_frame6(frame, src_ip6, dst_ip6)
    if eth_type != 0x0800:
        return [f"ethertype 0x{eth_type:04x}"]
    ip = frame[14:]
    ver, ihl = ip[0] >> 4, ip[0] & 0xF
    if ver != 4 or ihl != 5:
        problems.append(f"IPv4 version {ver} IHL {ihl}")
    # rxe sends TOS 0; rnicd DSCP 0 too, with ECT(0) on a QP's frames (DCQCN on by default, as on
    # RoCE NICs: docs/congestion.md) and not ECN-capable on the CM's (QP 1); CNPs DSCP 48.
    if ip[1] not in allowed_tos(ip[28] if len(ip) > 28 else None):
        problems.append(f"TOS 0x{ip[1]:02x} (want DSCP 0 and ECN not-ECT or ECT(0); a CNP DSCP 48, not ECT)")
    total = struct.unpack("!H", ip[2:4])[0]
    flags_frag = struct.unpack("!H", ip[6:8])[0]
    if flags_frag != 0x4000:
        problems.append(f"flags/fragment 0x{flags_frag:04x} (want DF only)")
    if ip[8] != 64:
        problems.append(f"TTL {ip[8]} (rxe: 64)")
    if ip[9] != 17:
        problems.append(f"IP protocol {ip[9]}")
    if not ipv4_checksum_ok(ip[:20]):
        problems.append("IPv4 header checksum wrong")
    src, dst = ".".join(map(str, ip[12:16])), ".".join(map(str, ip[16:20]))
    if src != src_ip:
        problems.append(f"source IP {src}, our GID is ::ffff:{src_ip}")
    if dst != dst_ip:
        problems.append(f"destination IP {dst}, peer is {dst_ip}")
    if 14 + total > len(frame):
        problems.append(f"IP total length {total} beyond the frame")
        return problems
    return problems + udp_problems(ip[20:28], total - 20)


def is_roce(frame):
    """'4' or '6' for a RoCEv2 frame (UDP to port 4791 over IPv4 or IPv6), else None."""
    if len(frame) >= 42 and frame[12:14] == b"\x08\x00" and frame[23] == 17:
        return "4" if struct.unpack("!H", frame[36:38])[0] == ROCE_PORT else None
    if len(frame) >= 62 and frame[12:14] == b"\x86\xdd" and frame[20] == 17:
        return "6" if struct.unpack("!H", frame[56:58])[0] == ROCE_PORT else None
    return None


def check_capture(path, our_mac, src_ip, dst_ip, peer_mac=None):
    """(frames of ours checked, [problem lines]) for the RoCEv2 frames `our_mac` sent in `path`;
    over IPv6 the addresses are both sides' link-local ones (from the MACs)."""
    mac = bytes.fromhex(our_mac.replace(":", ""))
    src6, dst6 = link_local(our_mac), link_local(peer_mac) if peer_mac else None
    checked, problems = 0, []
    for n, frame in read_pcap(path):
        if frame[6:12] != mac or not is_roce(frame):
            continue
        checked += 1
        for p in check_frame(frame, src_ip, dst_ip, src6, dst6):
            if len(problems) < 20:
                problems.append(f"{path} frame {n}: {p}")
    return checked, problems


# BTH opcodes that carry a PSN of their sender's own sequence: RC/UC requests and RC read
# responses. ACKs (0x11, 0x12) repeat a PSN by design and are left out.
ACK_OPCODES = (0x11, 0x12)
AETH_OPCODES = (0x0D, 0x0F, 0x10, 0x11, 0x12)


def flow_stats(path, mac):
    """What `mac` sent in `path`: RoCEv2 frames, frames repeating an earlier (QP, PSN, opcode)
    (retransmissions), and NAKs by AETH syndrome class."""
    src = bytes.fromhex(mac.replace(":", ""))
    seen, out = set(), {"frames": 0, "retransmitted": 0, "nak_psn_seq": 0, "rnr_nak": 0, "nak_other": 0}
    for _, f in read_pcap(path):
        if f[6:12] != src or len(f) < 58 or f[12:14] != b"\x08\x00" or f[23] != 17:
            continue
        if struct.unpack("!H", f[36:38])[0] != ROCE_PORT:
            continue
        out["frames"] += 1
        opcode, dest_qp = f[42], int.from_bytes(f[47:50], "big")
        psn = int.from_bytes(f[51:54], "big")
        if opcode in AETH_OPCODES:
            syndrome = f[54]
            if syndrome >> 5 == 1:
                out["rnr_nak"] += 1
            elif syndrome == 0x60:
                out["nak_psn_seq"] += 1
            elif syndrome >> 5 == 3:
                out["nak_other"] += 1
        if opcode in ACK_OPCODES or opcode >= 0x20:  # only RC (0x00-0x1F) is ever resent
            continue
        key = (dest_qp, psn, opcode)
        if key in seen:
            out["retransmitted"] += 1
        seen.add(key)
    return out
