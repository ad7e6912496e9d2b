#!/usr/bin/python3
"""Writes what the golden rxe captures' CM MADs contain, field by field, for test_golden_cm.cpp.

Every value comes from outside this project's C++ code:
  tshark  Wireshark's InfiniBand dissector (the MAD header, REQ, REP, RTU, DREQ, DREP and the
          rdma_cm IP header it shows inside REQ private data);
  raw     this script's own reading of tshark's "MAD Data Payload" bytes at the IBTA vol. 1
          table 106/119/120 positions, for what tshark 4.0 does not dissect (SIDR_REQ, SIDR_REP)
          or dissects wrongly: it reads the REQ path's flow label and packet rate from a 2-byte
          and a 1-byte item at the wrong offsets (0x0060c and 0x20 where the MAD carries the
          flow label 0x60c79 and rate 0), and it skips the ECE vendor ID and SAP bits.

Usage: gen_golden_cm_expectations.py GOLDEN_DIR > golden_cm_expectations.tsv
"""
import ipaddress
import json
import subprocess
import sys

FILES = [
    "rxe_rping_rdmacm_c5_s64.pcap",
    "rxe_ucmatose_rdmacm_c2.pcap",
    "rxe_send_imm_ud_udaddy_c2.pcap",
    "rxe_write_imm_rstream_mtu1024_s4000.pcap",
]

MAD = {
    "mad.base_version": "infiniband.mad.baseversion",
    "mad.mgmt_class": "infiniband.mad.mgmtclass",
    "mad.class_version": "infiniband.mad.classversion",
    "mad.method": "infiniband.mad.method",
    "mad.status": "infiniband.mad.status",
    "mad.class_specific": "infiniband.mad.classspecific",
    "mad.transaction_id": "infiniband.mad.transactionid",
    "mad.attribute_id": "infiniband.mad.attributeid",
    "mad.attribute_modifier": "infiniband.mad.attributemodifier",
}

REQ = {
    "req.local_comm_id": "infiniband.cm.req",
    "req.service_id": "infiniband.cm.req.serviceid",
    "req.local_ca_guid": "infiniband.cm.req.localcaguid",
    "req.local_qkey": "infiniband.cm.req.localqkey",
    "req.local_qpn": "infiniband.cm.req.localqpn",
    "req.responder_resources": "infiniband.cm.req.responderres",
    "req.local_eecn": "infiniband.cm.req.localeecn",
    "req.initiator_depth": "infiniband.cm.req.initdepth",
    "req.remote_eecn": "infiniband.cm.req.remoteeecn",
    "req.remote_cm_response_timeout": "infiniband.cm.req.remoteresptout",
    "req.transport": "infiniband.cm.req.transpsvctype",
    "req.end_to_end_flow_control": "infiniband.cm.req.e2eflowctrl",
    "req.starting_psn": "infiniband.cm.req.startpsn",
    "req.local_cm_response_timeout": "infiniband.cm.req.localresptout",
    "req.retry_count": "infiniband.cm.req.retrcount",
    "req.pkey": "infiniband.cm.req.pkey",
    "req.path_mtu": "infiniband.cm.req.pppmtu",
    "req.rdc_exists": "infiniband.cm.req.rdcexist",
    "req.rnr_retry_count": "infiniband.cm.req.rnrretrcount",
    "req.max_cm_retries": "infiniband.cm.req.maxcmretr",
    "req.srq": "infiniband.cm.req.srq",
    "req.extended_transport": "infiniband.cm.req.ext_transport",
    "req.primary.local_lid": "infiniband.cm.req.prim_locallid",
    "req.primary.remote_lid": "infiniband.cm.req.prim_remotelid",
    "req.primary.traffic_class": "infiniband.cm.req.prim_tfcclass",
    "req.primary.hop_limit": "infiniband.cm.req.prim_hoplim",
    "req.primary.sl": "infiniband.cm.req.prim_sl",
    "req.primary.subnet_local": "infiniband.cm.req.prim_subnetlocal",
    "req.primary.local_ack_timeout": "infiniband.cm.req.prim_localacktout",
    "req.alternate.local_lid": "infiniband.cm.req.alt_locallid",
    "req.alternate.remote_lid": "infiniband.cm.req.alt_remotelid",
    "req.alternate.traffic_class": "infiniband.cm.req.alt_tfcclass",
    "req.alternate.hop_limit": "infiniband.cm.req.alt_hoplim",
    "req.alternate.sl": "infiniband.cm.req.alt_sl",
    "req.alternate.subnet_local": "infiniband.cm.req.alt_subnetlocal",
    "req.alternate.local_ack_timeout": "infiniband.cm.req.alt_localacktout",
    "rdma_cm.ip_version": "infiniband.cm.req.ip_cm.ipv",
    "rdma_cm.src_port": "infiniband.cm.req.ip_cm.sport",
    "rdma_cm.user_data": "infiniband.cm.req.ip_cm.private",
}
REQ_GIDS = {  # IPv4-mapped primary GIDs appear under prim_*gid_ipv4; alternate GIDs as bare bytes
    "req.primary.local_gid": "infiniband.cm.req.prim_localgid",
    "req.primary.remote_gid": "infiniband.cm.req.prim_remotegid",
    "req.alternate.local_gid": "infiniband.cm.req.alt_localgid",
    "req.alternate.remote_gid": "infiniband.cm.req.alt_remotegid",
}

REP = {
    "rep.local_comm_id": "infiniband.cm.rep",
    "rep.remote_comm_id": "infiniband.cm.rep.remotecommid",
    "rep.local_qkey": "infiniband.cm.rep.localqkey",
    "rep.local_qpn": "infiniband.cm.rep.localqpn",
    "rep.local_eecn": "infiniband.cm.rep.localeecn",
    "rep.starting_psn": "infiniband.cm.rep.startpsn",
    "rep.responder_resources": "infiniband.cm.rep.respres",
    "rep.initiator_depth": "infiniband.cm.rep.initdepth",
    "rep.target_ack_delay": "infiniband.cm.rep.tgtackdelay",
    "rep.failover_accepted": "infiniband.cm.rep.failoveracc",
    "rep.end_to_end_flow_control": "infiniband.cm.rep.e2eflowctrl",
    "rep.rnr_retry_count": "infiniband.cm.rep.rnrretrcount",
    "rep.srq": "infiniband.cm.rep.srq",
    "rep.local_ca_guid": "infiniband.cm.rep.localcaguid",
    "rep.private_data": "infiniband.cm.rep.private",
}
RTU = {
    "rtu.local_comm_id": "infiniband.cm.rtu.localcommid",
    "rtu.remote_comm_id": "infiniband.cm.rtu.remotecommid",
    "rtu.private_data": "infiniband.cm.rtu.private",
}
DREQ = {
    "dreq.local_comm_id": "infiniband.cm.dreq.localcommid",
    "dreq.remote_comm_id": "infiniband.cm.dreq.remotecommid",
    "dreq.remote_qpn_eecn": "infiniband.cm.req.remoteqpneecn",  # Wireshark files it under req
    "dreq.private_data": "infiniband.cm.dreq.private",
}
DREP = {
    "drep.local_comm_id": "infiniband.cm.drsp.localcommid",
    "drep.remote_comm_id": "infiniband.cm.drsp.remotecommid",
    "drep.private_data": "infiniband.cm.drsp.private",
}
BY_ATTR = {0x10: REQ, 0x13: REP, 0x14: RTU, 0x15: DREQ, 0x16: DREP}

BYTE_FIELDS = ("private_data", "user_data", "info", "data")


def tshark_packets(path, fields):
    cmd = ["tshark", "-r", path, "-Y", "infiniband.bth.destqp == 1", "-T", "json", "-e", "frame.number",
           "-e", "infiniband.mad.data"]
    for f in sorted(fields):
        cmd += ["-e", f]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [p["_source"]["layers"] for p in json.loads(out)]


def gid_hex(text):
    if ":" not in text and "." in text:  # tshark's IPv4 form of an IPv4-mapped GID
        return ipaddress.IPv6Address("::ffff:" + text).packed.hex()
    if ":" in text:
        return ipaddress.IPv6Address(text).packed.hex()
    return text.lower()  # bare bytes


def cma_addr_hex(text):  # the cma_hdr's IPv4 form, normalised to the IPv4-mapped GID
    return gid_hex(text)


def be(data, off, n):
    return int.from_bytes(data[off:off + n], "big")


def bits(byte, bit, width):  # IBTA Byte[Bit]: bit 0 is the most significant
    return (byte >> (8 - bit - width)) & ((1 << width) - 1)


def raw_rdma_cm(rows, priv):
    ipv = priv[1] >> 4
    rows["rdma_cm.version"] = priv[0]
    rows["rdma_cm.ip_version"] = ipv
    rows["rdma_cm.src_port"] = be(priv, 2, 2)
    for name, off in (("rdma_cm.src_addr", 4), ("rdma_cm.dst_addr", 20)):
        addr = priv[off:off + 16]
        rows[name] = ("00" * 10 + "ffff" + addr[12:].hex()) if ipv == 4 else addr.hex()
    rows["rdma_cm.user_data"] = priv[36:].hex()


def raw_fields(attr, data):
    """Fields read straight from the 232 data bytes (IBTA vol. 1 tables 106, 119, 120)."""
    rows = {}
    if attr == 0x10:
        rows["req.vendor_id"] = be(data, 5, 3)
        for path, base in (("primary", 52), ("alternate", 96)):
            rows[f"req.{path}.flow_label"] = be(data, base + 36, 4) >> 12
            rows[f"req.{path}.packet_rate"] = bits(data[base + 39], 2, 6)
        rows["req.sap_supported"] = bits(data[139], 5, 1)
        rows["req.private_data"] = data[140:232].hex()
    elif attr == 0x13:
        rows["rep.vendor_id"] = (data[15] << 16) | (data[19] << 8) | data[23]
    elif attr == 0x17:
        rows["sidr_req.request_id"] = be(data, 0, 4)
        rows["sidr_req.pkey"] = be(data, 4, 2)
        rows["sidr_req.service_id"] = be(data, 8, 8)
        rows["sidr_req.private_data"] = data[16:232].hex()
        raw_rdma_cm(rows, data[16:232])
    elif attr == 0x18:
        rows["sidr_rep.request_id"] = be(data, 0, 4)
        rows["sidr_rep.status"] = data[4]
        rows["sidr_rep.info_length"] = data[5]
        rows["sidr_rep.vendor_id"] = (be(data, 6, 2) << 8) | data[11]
        rows["sidr_rep.qpn"] = be(data, 8, 3)
        rows["sidr_rep.service_id"] = be(data, 12, 8)
        rows["sidr_rep.qkey"] = be(data, 20, 4)
        rows["sidr_rep.info"] = data[24:96].hex()
        rows["sidr_rep.private_data"] = data[96:232].hex()
    return rows


def value_text(field, value):
    if isinstance(value, int):
        return str(value)
    if field.endswith(BYTE_FIELDS) or field.endswith("gid") or field.endswith("addr"):
        return value.replace(":", "").lower()
    return str(int(value, 0))


def main():
    golden = sys.argv[1]
    every = set(MAD) | set(REQ) | set(REP) | set(RTU) | set(DREQ) | set(DREP)
    ts_fields = {MAD.get(k) or REQ.get(k) or REP.get(k) or RTU.get(k) or DREQ.get(k) or DREP.get(k) for k in every}
    ts_fields |= set(REQ_GIDS.values()) | {"infiniband.cm.req.prim_localgid_ipv4", "infiniband.cm.req.prim_remotegid_ipv4"}
    ts_fields |= {"infiniband.cm.req.ip_cm.majv", "infiniband.cm.req.ip_cm.minv",
                  "infiniband.cm.req.ip_cm.sip4", "infiniband.cm.req.ip_cm.dip4",
                  "infiniband.cm.req.ip_cm.sip6", "infiniband.cm.req.ip_cm.dip6"}
    print("# file\tframe\tfield\tvalue\tsource   (generated by gen_golden_cm_expectations.py; do not edit)")
    for name in FILES:
        for layers in tshark_packets(f"{golden}/{name}", ts_fields):
            frame = layers["frame.number"][0]
            rows = []

            def ts(field, tsf):
                vals = layers.get(tsf)
                if vals:
                    rows.append((field, value_text(field, vals[0]), "tshark"))

            for field, tsf in MAD.items():
                ts(field, tsf)
            data = bytes.fromhex(layers["infiniband.mad.data"][0].replace(":", ""))
            rows.append(("mad.data", data.hex(), "tshark"))
            attr = int(layers["infiniband.mad.attributeid"][0], 0)
            for field, tsf in BY_ATTR.get(attr, {}).items():
                ts(field, tsf)
            if attr == 0x10:
                for field, tsf in REQ_GIDS.items():
                    v = layers.get(tsf + "_ipv4") or layers.get(tsf)
                    rows.append((field, gid_hex(v[0]), "tshark"))
                major = int(layers["infiniband.cm.req.ip_cm.majv"][0], 0)
                minor = int(layers["infiniband.cm.req.ip_cm.minv"][0], 0)
                rows.append(("rdma_cm.version", str(major << 4 | minor), "tshark"))
                for field, key in (("rdma_cm.src_addr", "sip"), ("rdma_cm.dst_addr", "dip")):
                    v = layers.get(f"infiniband.cm.req.ip_cm.{key}4") or layers.get(f"infiniband.cm.req.ip_cm.{key}6")
                    rows.append((field, cma_addr_hex(v[0]), "tshark"))
            for field, value in raw_fields(attr, data).items():
                rows.append((field, value_text(field, value), "raw"))
            for field, value, source in rows:
                print(f"{name}\t{frame}\t{field}\t{value}\t{source}")


if __name__ == "__main__":
    main()
