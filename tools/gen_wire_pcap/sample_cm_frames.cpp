#include "sample_cm_frames.hpp"

#include <stdexcept>
#include <string_view>

#include "rnic/wire/cm_messages.hpp"
#include "rnic/wire/gsi_frame.hpp"
#include "rnic/wire/rdma_cm_header.hpp"

namespace rnic::tools {
namespace {

using namespace rnic::wire;

constexpr MacAddr kMacClient{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
constexpr MacAddr kMacServer{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
constexpr uint64_t kGuidClient = 0x0200000000000001;  // EUI-64 of the MACs above, as rxe derives it
constexpr uint64_t kGuidServer = 0x0200000000000002;
constexpr uint16_t kServerPort = 7174;  // rping's and udaddy's default
constexpr uint16_t kClientPort = 46381;
constexpr uint32_t kHiTid = 2;  // the MAD agent's hi_tid, as in the golden captures

// One side's GSI: its addresses, and the PSN and IP ID counters a real sender advances.
struct Side {
    MacAddr mac;
    Gid gid;
    uint32_t psn = 0;
    uint16_t ip_id = 0;
};

// Linux's TID: hi_tid above the local ID as a little-endian host reads its big-endian bytes.
uint64_t linux_tid(uint32_t local_id) {
    return (uint64_t{kHiTid} << 32) | __builtin_bswap32(local_id);
}

template <size_t N>
std::array<uint8_t, N> text(std::string_view s) {
    std::array<uint8_t, N> a{};
    for (size_t i = 0; i < s.size() && i < N; ++i) a[i] = static_cast<uint8_t>(s[i]);
    return a;
}

class Exchange {
public:
    Exchange(Side client, Side server) : client_(client), server_(server) {}

    void send(bool from_client, const Mad& mad) {
        Side& src = from_client ? client_ : server_;
        const Side& dst = from_client ? server_ : client_;
        GsiFrameSpec spec;
        spec.src_mac = src.mac;
        spec.dst_mac = dst.mac;
        spec.src_gid = src.gid;
        spec.dst_gid = dst.gid;
        spec.psn = src.psn++;
        spec.ip_id = src.ip_id++;
        std::vector<uint8_t> frame(kGsiFrameSizeIpv6);
        auto n = build_gsi_frame(spec, mad, frame);
        if (!n) throw std::runtime_error("sample CM frame: " + std::string(build_errc_name(n.error())));
        frame.resize(*n);
        frames_.push_back(std::move(frame));
    }

    // REQ as rdma_cm sends it for an RC id (cma_connect_ib): TCP port space, the rdma_cm header
    // then the user's data, the path from address resolution, Linux's timeouts and retry counts.
    CmReq req(uint32_t comm_id, uint32_t qpn, std::string_view user_data) const {
        CmReq r;
        r.local_comm_id = comm_id;
        r.service_id = rdma_cm_service_id(RdmaPortSpace::Tcp, kServerPort);
        r.local_ca_guid = kGuidClient;
        r.local_qpn = qpn;
        r.responder_resources = 1;
        r.initiator_depth = 1;
        r.remote_cm_response_timeout = 20;
        r.starting_psn = 0x6B8489;
        r.local_cm_response_timeout = 20;
        r.retry_count = 7;
        r.path_mtu = 3;  // 1024
        r.rnr_retry_count = 7;
        r.max_cm_retries = 15;
        r.primary_path.local_lid = 0xFFFF;
        r.primary_path.remote_lid = 0xFFFF;
        r.primary_path.local_gid = client_.gid;
        r.primary_path.remote_gid = server_.gid;
        r.primary_path.flow_label = (uint32_t{kClientPort} * 31 + kServerPort) & 0xFFFFF;
        r.primary_path.hop_limit = 64;
        r.primary_path.local_ack_timeout = 19;
        const auto hdr = RdmaCmIpHeader::make(client_.gid, server_.gid, kClientPort);
        std::vector<uint8_t> user(user_data.begin(), user_data.end());
        if (!put_rdma_cm_private_data(hdr, user, r.private_data)) throw std::runtime_error("REQ user data");
        return r;
    }

    const Side& client() const { return client_; }
    const Side& server() const { return server_; }
    std::vector<std::vector<uint8_t>> take() { return std::move(frames_); }

private:
    Side client_;
    Side server_;
    std::vector<std::vector<uint8_t>> frames_;
};

void connect_and_disconnect(Exchange& x, uint32_t client_id, uint32_t server_id, bool with_mra) {
    const uint64_t tid = linux_tid(client_id);
    x.send(true, encode_cm(x.req(client_id, 0x11, "client hello"), tid));
    if (with_mra) {
        CmMra mra;
        mra.local_comm_id = server_id;
        mra.remote_comm_id = client_id;
        mra.message_mraed = CmMsgResponse::Req;
        mra.service_timeout = 24;  // rdma_cm's CMA_CM_MRA_SETTING
        x.send(false, encode_cm(mra, tid));
    }
    CmRep rep;
    rep.local_comm_id = server_id;
    rep.remote_comm_id = client_id;
    rep.local_qpn = 0x12;
    rep.starting_psn = 0x67D221;
    rep.responder_resources = 1;
    rep.initiator_depth = 1;
    rep.target_ack_delay = 15;
    rep.rnr_retry_count = 7;
    rep.local_ca_guid = kGuidServer;
    rep.private_data = text<kCmRepPrivateDataSize>("server accepts");
    x.send(false, encode_cm(rep, tid));
    CmRtu rtu;
    rtu.local_comm_id = client_id;
    rtu.remote_comm_id = server_id;
    x.send(true, encode_cm(rtu, tid));
    const uint64_t dreq_tid = linux_tid(client_id);  // cm_form_tid again: the same as the REQ's
    CmDreq dreq;
    dreq.local_comm_id = client_id;
    dreq.remote_comm_id = server_id;
    dreq.remote_qpn_eecn = 0x12;
    x.send(true, encode_cm(dreq, dreq_tid));
    CmDrep drep;
    drep.local_comm_id = server_id;
    drep.remote_comm_id = client_id;
    x.send(false, encode_cm(drep, dreq_tid));
}

void rejects(Exchange& x) {
    // No listener: cm_issue_rej answers with the REQ's IDs swapped and no local ID of its own.
    uint32_t id = 0x51000001;
    x.send(true, encode_cm(x.req(id, 0x13, ""), linux_tid(id)));
    CmRej no_listener;
    no_listener.local_comm_id = 0;
    no_listener.remote_comm_id = id;
    no_listener.message_rejected = CmMsgResponse::Req;
    no_listener.reason = CmRejReason::InvalidServiceId;
    x.send(false, encode_cm(no_listener, linux_tid(id)));

    // rdma_reject() with private data, from the REQ_RCVD state.
    id = 0x51000002;
    x.send(true, encode_cm(x.req(id, 0x14, "may I"), linux_tid(id)));
    CmRej consumer;
    consumer.remote_comm_id = id;
    consumer.reason = CmRejReason::ConsumerDefined;
    consumer.private_data = text<kCmRejPrivateDataSize>("no thanks");
    x.send(false, encode_cm(consumer, linux_tid(id)));

    // The client gave up waiting (cm_destroy_id in REQ_SENT): timeout, its CA GUID as ARI.
    id = 0x51000003;
    x.send(true, encode_cm(x.req(id, 0x15, ""), linux_tid(id)));
    CmRej timeout;
    timeout.local_comm_id = id;
    timeout.message_rejected = CmMsgResponse::Other;
    timeout.reason = CmRejReason::Timeout;
    timeout.ari_length = 8;
    for (int i = 0; i < 8; ++i) timeout.ari[i] = static_cast<uint8_t>(kGuidClient >> (56 - 8 * i));
    x.send(true, encode_cm(timeout, linux_tid(id)));
}

void sidr(Exchange& x) {
    for (const bool listening : {true, false}) {
        const uint32_t id = listening ? 0x73644E94 : 0x73644E95;
        const uint16_t port = listening ? kServerPort : kServerPort + 1;
        CmSidrReq req;
        req.request_id = id;
        req.service_id = rdma_cm_service_id(RdmaPortSpace::Udp, port);
        const auto hdr = RdmaCmIpHeader::make(x.client().gid, x.server().gid, 39561);
        if (!put_rdma_cm_private_data(hdr, {}, req.private_data)) throw std::runtime_error("SIDR_REQ");
        x.send(true, encode_cm(req, linux_tid(id)));
        CmSidrRep rep;
        rep.request_id = id;
        rep.service_id = req.service_id;
        if (listening) {
            rep.qpn = 0x16;
            rep.qkey = 0x01234567;  // RDMA_UDP_QKEY
        } else {
            rep.status = CmSidrStatus::Unsupported;
        }
        x.send(false, encode_cm(rep, linux_tid(id)));
    }
}

void class_port_info(Exchange& x) {
    Mad get;
    get.header.mgmt_class = kMgmtClassCm;
    get.header.class_version = kCmClassVersion;
    get.header.method = MadMethod::Get;
    get.header.transaction_id = 0x0000000900000001;
    get.header.attribute_id = static_cast<uint16_t>(CmAttr::ClassPortInfo);
    x.send(true, get);
    x.send(false, *unmatched_method_response(get));
}

}  // namespace

std::vector<std::vector<uint8_t>> build_sample_cm_frames() {
    Exchange v4(Side{kMacClient, Gid::from_ipv4(0x0A000002)}, Side{kMacServer, Gid::from_ipv4(0x0A000001)});
    connect_and_disconnect(v4, 0x326AE686, 0x038892CF, true);
    rejects(v4);
    sidr(v4);
    class_port_info(v4);
    auto frames = v4.take();

    Exchange v6(Side{kMacClient, *Gid::parse("fe80::1")}, Side{kMacServer, *Gid::parse("fe80::2")});
    connect_and_disconnect(v6, 0x61000001, 0x62000001, false);
    for (auto& f : v6.take()) frames.push_back(std::move(f));
    return frames;
}

}  // namespace rnic::tools
