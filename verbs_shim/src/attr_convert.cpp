// rdma-core's attribute structs <-> the host interface's. The host interface carries rdma-core's
// enumerated values unchanged, so this is field-by-field copying; what the ABI does not carry
// (alternate paths, rate limits, LIDs beyond 0) comes back as zero, which is what a RoCE port
// reports for them.
#include <endian.h>

#include <cstring>

#include "shim_objects.hpp"
#include "verbs_ops.hpp"

namespace rnic::shim {

void to_ibv(const abi::DeviceAttr& in, ibv_device_attr& out) {
    out = {};
    static_assert(sizeof out.fw_ver <= sizeof in.fw_ver);
    std::memcpy(out.fw_ver, in.fw_ver, sizeof out.fw_ver);
    out.fw_ver[sizeof out.fw_ver - 1] = '\0';
    // The daemon sends GUIDs as numbers; verbs carries them in network byte order.
    out.node_guid = htobe64(in.node_guid);
    out.sys_image_guid = htobe64(in.sys_image_guid);
    out.max_mr_size = in.max_mr_size;
    out.page_size_cap = in.page_size_cap;
    out.vendor_id = in.vendor_id;
    out.vendor_part_id = in.vendor_part_id;
    out.hw_ver = in.hw_ver;
    out.max_qp = static_cast<int>(in.max_qp);
    out.max_qp_wr = static_cast<int>(in.max_qp_wr);
    out.device_cap_flags = in.device_cap_flags;
    out.max_sge = static_cast<int>(in.max_sge);
    out.max_sge_rd = static_cast<int>(in.max_sge_rd);
    out.max_cq = static_cast<int>(in.max_cq);
    out.max_cqe = static_cast<int>(in.max_cqe);
    out.max_mr = static_cast<int>(in.max_mr);
    out.max_mw = static_cast<int>(in.max_mw);
    out.max_pd = static_cast<int>(in.max_pd);
    out.max_qp_rd_atom = static_cast<int>(in.max_qp_rd_atom);
    out.max_ee_rd_atom = 0;
    out.max_res_rd_atom = static_cast<int>(in.max_res_rd_atom);
    out.max_qp_init_rd_atom = static_cast<int>(in.max_qp_init_rd_atom);
    out.max_ee_init_rd_atom = 0;
    out.atomic_cap = static_cast<ibv_atomic_cap>(in.atomic_cap);
    out.max_srq = static_cast<int>(in.max_srq);
    out.max_srq_wr = static_cast<int>(in.max_srq_wr);
    out.max_srq_sge = static_cast<int>(in.max_srq_sge);
    out.max_ah = static_cast<int>(in.max_ah);
    out.max_pkeys = in.max_pkeys;
    out.local_ca_ack_delay = in.local_ca_ack_delay;
    out.phys_port_cnt = in.phys_port_cnt;
}

void to_ibv(const abi::PortAttr& in, ibv_port_attr& out) {
    out = {};
    out.state = static_cast<ibv_port_state>(in.state);
    out.max_mtu = static_cast<ibv_mtu>(in.max_mtu);
    out.active_mtu = static_cast<ibv_mtu>(in.active_mtu);
    out.gid_tbl_len = static_cast<int>(in.gid_tbl_len);
    out.port_cap_flags = in.port_cap_flags;
    out.max_msg_sz = in.max_msg_sz;
    out.pkey_tbl_len = in.pkey_tbl_len;
    out.max_vl_num = 1;  // IBV 1: VL0 only (RoCE has no VLs; rxe says the same)
    out.active_width = in.active_width;
    out.active_speed = in.active_speed;
    out.phys_state = in.phys_state;
    out.link_layer = in.link_layer;
}

abi::AddressVector to_abi(const ibv_ah_attr& in) {
    abi::AddressVector av{};
    std::memcpy(av.dgid, in.grh.dgid.raw, sizeof av.dgid);
    av.flow_label = in.grh.flow_label;
    av.sgid_index = in.grh.sgid_index;
    av.hop_limit = in.grh.hop_limit;
    av.traffic_class = in.grh.traffic_class;
    av.sl = in.sl;
    av.is_global = in.is_global;
    av.port_num = in.port_num;
    av.static_rate = in.static_rate;
    av.src_path_bits = in.src_path_bits;
    av.dlid = in.dlid;
    return av;
}

void to_ibv(const abi::AddressVector& in, ibv_ah_attr& out) {
    out = {};
    std::memcpy(out.grh.dgid.raw, in.dgid, sizeof in.dgid);
    out.grh.flow_label = in.flow_label;
    out.grh.sgid_index = in.sgid_index;
    out.grh.hop_limit = in.hop_limit;
    out.grh.traffic_class = in.traffic_class;
    out.sl = in.sl;
    out.is_global = in.is_global;
    out.port_num = in.port_num;
    out.static_rate = in.static_rate;
    out.src_path_bits = in.src_path_bits;
    out.dlid = in.dlid;
}

abi::QpAttr to_abi(const ibv_qp_attr& in) {
    abi::QpAttr a{};
    a.qp_state = in.qp_state;
    a.cur_qp_state = in.cur_qp_state;
    a.path_mtu = in.path_mtu;
    a.qkey = in.qkey;
    a.rq_psn = in.rq_psn;
    a.sq_psn = in.sq_psn;
    a.dest_qp_num = in.dest_qp_num;
    a.qp_access_flags = in.qp_access_flags;
    a.cap = {in.cap.max_send_wr, in.cap.max_recv_wr, in.cap.max_send_sge, in.cap.max_recv_sge, in.cap.max_inline_data};
    a.ah_attr = to_abi(in.ah_attr);
    a.pkey_index = in.pkey_index;
    a.en_sqd_async_notify = in.en_sqd_async_notify;
    a.sq_draining = in.sq_draining;
    a.max_rd_atomic = in.max_rd_atomic;
    a.max_dest_rd_atomic = in.max_dest_rd_atomic;
    a.min_rnr_timer = in.min_rnr_timer;
    a.port_num = in.port_num;
    a.timeout = in.timeout;
    a.retry_cnt = in.retry_cnt;
    a.rnr_retry = in.rnr_retry;
    return a;
}

void to_ibv(const abi::QpAttr& in, ibv_qp_attr& out) {
    out = {};
    out.qp_state = static_cast<ibv_qp_state>(in.qp_state);
    out.cur_qp_state = static_cast<ibv_qp_state>(in.cur_qp_state);
    out.path_mtu = static_cast<ibv_mtu>(in.path_mtu);
    out.path_mig_state = IBV_MIG_MIGRATED;  // no alternate path: always "migrated"
    out.qkey = in.qkey;
    out.rq_psn = in.rq_psn;
    out.sq_psn = in.sq_psn;
    out.dest_qp_num = in.dest_qp_num;
    out.qp_access_flags = in.qp_access_flags;
    out.cap = {in.cap.max_send_wr, in.cap.max_recv_wr, in.cap.max_send_sge, in.cap.max_recv_sge,
               in.cap.max_inline_data};
    to_ibv(in.ah_attr, out.ah_attr);
    out.pkey_index = in.pkey_index;
    out.en_sqd_async_notify = in.en_sqd_async_notify;
    out.sq_draining = in.sq_draining;
    out.max_rd_atomic = in.max_rd_atomic;
    out.max_dest_rd_atomic = in.max_dest_rd_atomic;
    out.min_rnr_timer = in.min_rnr_timer;
    out.port_num = in.port_num;
    out.timeout = in.timeout;
    out.retry_cnt = in.retry_cnt;
    out.rnr_retry = in.rnr_retry;
}

void to_ibv(const abi::Cqe& in, ibv_wc& out) {
    out.wr_id = in.wr_id;
    out.status = static_cast<ibv_wc_status>(in.status);
    out.opcode = static_cast<ibv_wc_opcode>(in.opcode);
    out.vendor_err = in.vendor_err;
    out.byte_len = in.byte_len;
    out.imm_data = in.imm_data;  // the same bits as invalidated_rkey (a union)
    out.qp_num = in.qp_num;
    out.src_qp = in.src_qp;
    out.wc_flags = in.wc_flags;
    out.pkey_index = in.pkey_index;
    out.slid = in.slid;
    out.sl = in.sl;
    out.dlid_path_bits = in.dlid_path_bits;
}

}  // namespace rnic::shim
