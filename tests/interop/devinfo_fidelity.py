#!/usr/bin/env python3
"""`ibv_devinfo -v` of rnicd against Linux rxe's (Debian 12: kernel 6.1, rdma-core 44), field by
field (docs/fidelity.md). Every field must be equal, or follow a rule below that says why it may
differ (each rule checks what it can: a format, a derivation). run_interop.py captures both
outputs on the same link at boot of every interop run; alone:

  devinfo_fidelity.py RXE_OUTPUT RNICD_OUTPUT [RXE_MAC RNICD_MAC]

prints the side-by-side table (Markdown) and exits 1 on an unexplained difference."""
import re
import sys

FW_FORMAT = r"^\d+\.\d+\.\d+$"


def eui64(mac):
    """The node GUID RoCE drivers derive from a MAC, as ibv_devinfo prints it."""
    b = [int(x, 16) for x in mac.split(":")]
    g = [b[0] ^ 2, b[1], b[2], 0xff, 0xfe, b[3], b[4], b[5]]
    return ":".join(f"{g[i]:02x}{g[i + 1]:02x}" for i in range(0, 8, 2))


def engine_limit(_rxe, ours, _ctx):
    return ours.split()[0].isdigit() or ours.startswith("0x")


# field -> (reason, check(rxe_value, our_value, context) -> bool). None as a value: the field is
# absent on that side.
ALLOWED = {
    "hca_id": ("the device's name: rxe0 is `rdma link add`'s, rnic0 is rnicd's --name",
               lambda a, b, c: bool(a) and bool(b)),
    "fw_ver": ("same format as rxe's (major.minor.sub_minor); rxe's is 0.0.0, rnicd's minor is its host-interface "
               "ABI version", lambda a, b, c: re.match(FW_FORMAT, a or "") and re.match(FW_FORMAT, b or "")),
    "node_guid": ("both the EUI-64 of the port's MAC (different MACs)",
                  lambda a, b, c: not c.get("rxe_mac") or (a == eui64(c["rxe_mac"]) and b == eui64(c["our_mac"]))),
    "sys_image_guid": ("equal to node_guid on both (IBV_DEVICE_SYS_IMAGE_GUID)",
                       lambda a, b, c: a == c["rxe"].get("node_guid") and b == c["ours"].get("node_guid")),
    "board_id": ("rxe has no board_id sysfs file; rnicd's sysfs stand-in names the device RNIC_SW_ROCEV2",
                 lambda a, b, c: a is None and b == "RNIC_SW_ROCEV2"),
    "max_mr_size": ("rnicd's limit (1 TiB, DeviceLimits::max_mr_size; rxe: no limit)", engine_limit),
    "page_size_cap": ("rnicd maps registered memory in 4 KiB pages only (rxe claims 4 KiB-2 GiB)",
                      lambda a, b, c: b == "0x1000"),
    "max_qp": ("rnicd's limit (DeviceLimits, enforced at create)", engine_limit),
    "max_qp_wr": ("rnicd's limit", engine_limit),
    "max_cq": ("rnicd's limit", engine_limit),
    "max_cqe": ("rnicd's limit (mlx5's, so perftest -q 16384 fits; rxe: 32767)", engine_limit),
    "max_mr": ("rnicd's limit", engine_limit),
    "max_pd": ("rnicd's limit", engine_limit),
    "max_res_rd_atom": ("max_qp_rd_atom x max_qp, as rnicd can hold", engine_limit),
    "max_ah": ("rnicd's limit", engine_limit),
    "max_srq": ("rnicd's limit", engine_limit),
    "max_srq_wr": ("rnicd's limit", engine_limit),
    "max_srq_sge": ("rnicd's limit (32, as for QPs; rxe 27, its WQE size)", engine_limit),
    "max_pkeys": ("one P_Key (0xffff), as the port's pkey_tbl_len says on both (rxe's device says 64)",
                  lambda a, b, c: b == "1" and c["ours"].get("pkey_tbl_len") == "1"),
    "device_cap_flags": ("only what rnicd implements (emulator/host/server/src/device_caps.hpp, one line each): "
                         "SYS_IMAGE_GUID, RC_RNR_NAK_GEN, MEM_WINDOW and MEM_WINDOW_TYPE_2B; rxe also claims "
                         "P_Key/Q_Key counters, APM, port change, AV port enforcement, port events, SRQ resize and "
                         "MEM_MGT_EXTENSIONS",
                         lambda a, b, c: int(b, 16) & ~int(a, 16) == 0),
    "device_cap_flags_ex": ("the same flags, plus IBTA 1.5's FLUSH_GLOBAL (bit 38) and ATOMIC_WRITE (bit 40), "
                            "which rxe has from kernel 6.2 on",
                            lambda a, b, c: int(b, 16) & ~int(a, 16) & ~((1 << 38) | (1 << 40)) == 0),
    "Unknown flags": ("ibv_devinfo 44 has no names for bits 38 (FLUSH_GLOBAL) and 40 (ATOMIC_WRITE) of "
                      "device_cap_flags_ex and prints them so; rxe 6.1 has neither",
                      lambda a, b, c: a is None and b == hex((1 << 38) | (1 << 40))),
    "max_mw": ("rnicd's limit (4096 windows per device, DeviceLimits::max_mw; rxe 524287)", engine_limit),
    "max_mcast_grp": ("no multicast (ibv_attach_mcast: EOPNOTSUPP)", lambda a, b, c: b == "0"),
    "max_mcast_qp_attach": ("no multicast", lambda a, b, c: b == "0"),
    "max_total_mcast_qp_attach": ("no multicast", lambda a, b, c: b == "0"),
    "completion timestamp_mask": ("rnicd stamps completions (ibv_create_cq_ex "
                                  "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, CLOCK_MONOTONIC ns); rxe does not",
                                  lambda a, b, c: a is None and b == "0xffffffffffffffff"),
    "completion_timestamp_mask not supported": ("the same: rxe prints this line instead",
                                                lambda a, b, c: b is None),
    "hca_core_clock": ("the same: rnicd's clock is 1 GHz", lambda a, b, c: a is None and b == "1000000kHZ"),
    "core clock not supported": ("the same: rxe prints this line instead", lambda a, b, c: b is None),
    "max_msg_sz": ("rnicd's limit (2 GiB, the IBTA maximum; rxe 8 MiB)", engine_limit),
    "gid_tbl_len": ("rnicd's table holds its addresses, fixed at start (rxe's has room for 1024)",
                    lambda a, b, c: int(b) >= 2),
    "active_speed": ("both follow the kernel's ib_get_eth_speed() of their netdev's speed: the VM's virtio-net "
                     "reports none (2.5 Gbps SDR), rnicd's veth 10 Gb/s (FDR10)", lambda a, b, c: bool(b)),
    "active_width": ("the same derivation", lambda a, b, c: bool(b)),
}
# Every GID line: each side's own addresses, all RoCE v2 (a side with more addresses has more).
GID_RULE = ("each side's own addresses, RoCE v2 all; rnicd puts ::ffff:<IPv4> first, then fe80::, then its "
            "--ip6 addresses; rxe fe80:: first (docs/interop.md)",
            lambda a, b, c: all(v is None or v.endswith("RoCE v2") for v in (a, b)))


def parse(text):
    """The `name: value` lines of ibv_devinfo -v, first occurrence of each name (the port's
    attributes follow the device's; no name repeats between them that matters here)."""
    fields = {}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if ":" in line:
            k, v = line.split(":", 1)
            fields.setdefault(k.strip(), v.strip())
        elif " " in line:  # "core clock not supported" and the like
            fields.setdefault(line, "")
    return fields


def compare(rxe_text, ours_text, rxe_mac=None, our_mac=None):
    """(problems, number of documented differences, rows for the table)."""
    a, b = parse(rxe_text), parse(ours_text)
    ctx = {"rxe": a, "ours": b, "rxe_mac": rxe_mac, "our_mac": our_mac}
    problems, allowed, rows = [], 0, []
    for k in list(a) + [k for k in b if k not in a]:
        va, vb = a.get(k), b.get(k)
        if va == vb:
            rows.append((k, va, vb, ""))
            continue
        rule = GID_RULE if k.startswith("GID[") else ALLOWED.get(k)
        try:
            ok = rule is not None and bool(rule[1](va, vb, ctx))
        except (ValueError, TypeError, AttributeError):
            ok = False
        if ok:
            allowed += 1
            rows.append((k, va, vb, rule[0]))
        else:
            problems.append(f"{k}: rxe {va!r} rnicd {vb!r}" + (f" (rule: {rule[0]})" if rule else ""))
            rows.append((k, va, vb, "**unexplained**"))
    return problems, allowed, rows


def markdown(rows):
    out = ["| field | rxe (kernel 6.1) | rnicd | why they differ |", "| --- | --- | --- | --- |"]
    for k, va, vb, why in rows:
        cell = lambda v: "(absent)" if v is None else (f"`{v}`" if v else "")  # noqa: E731
        out.append(f"| {k} | {cell(va)} | {cell(vb)} | {why} |")
    return "\n".join(out)


def main():
    if len(sys.argv) not in (3, 5):
        print(__doc__)
        return 2
    texts = [open(p).read() for p in sys.argv[1:3]]
    macs = sys.argv[3:5] if len(sys.argv) == 5 else [None, None]
    problems, allowed, rows = compare(*texts, *macs)
    print(markdown(rows))
    print(f"\n{allowed} documented differences, {len(problems)} unexplained")
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
