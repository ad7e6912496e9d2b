// Every CM MAD Linux rxe sent in the golden rdma_cm captures (shared/pcaps-rxe: rping, ucmatose,
// udaddy, rstream; the UD SEND ONLY frames to QP 1) parses as a GSI frame, decodes to the values
// tshark's InfiniBand dissector shows (golden_cm_expectations.tsv, written from tshark by
// gen_golden_cm_expectations.py; fields tshark does not dissect come from the raw MAD bytes there),
// re-encodes to the same 256 bytes, and rebuilds to the same frame, ICRC included.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "pcap_file.hpp"
#include "rnic/wire/cm_messages.hpp"
#include "rnic/wire/gsi_frame.hpp"
#include "rnic/wire/rdma_cm_header.hpp"

namespace fs = std::filesystem;
using namespace rnic::wire;

namespace {

using Value = std::variant<uint64_t, std::string>;  // numbers, or bytes as lower-case hex
using Fields = std::map<std::string, Value>;

const char* const kCaptures[] = {
    "rxe_rping_rdmacm_c5_s64.pcap",
    "rxe_ucmatose_rdmacm_c2.pcap",
    "rxe_send_imm_ud_udaddy_c2.pcap",
    "rxe_write_imm_rstream_mtu1024_s4000.pcap",
};

fs::path golden_dir() {
    const char* env = std::getenv("RNIC_GOLDEN_DIR");
    return env ? env : RNIC_GOLDEN_DIR;
}

std::string hex(std::span<const uint8_t> bytes) {
    static const char digits[] = "0123456789abcdef";
    std::string s;
    for (uint8_t b : bytes) {
        s += digits[b >> 4];
        s += digits[b & 0xF];
    }
    return s;
}
std::string hex(const Gid& g) {
    return hex(g.raw);
}

void add_path(Fields& f, const std::string& prefix, const CmPath& p) {
    f[prefix + ".local_lid"] = p.local_lid;
    f[prefix + ".remote_lid"] = p.remote_lid;
    f[prefix + ".local_gid"] = hex(p.local_gid);
    f[prefix + ".remote_gid"] = hex(p.remote_gid);
    f[prefix + ".flow_label"] = p.flow_label;
    f[prefix + ".packet_rate"] = p.packet_rate;
    f[prefix + ".traffic_class"] = p.traffic_class;
    f[prefix + ".hop_limit"] = p.hop_limit;
    f[prefix + ".sl"] = p.sl;
    f[prefix + ".subnet_local"] = p.subnet_local;
    f[prefix + ".local_ack_timeout"] = p.local_ack_timeout;
}

void add_rdma_cm(Fields& f, std::span<const uint8_t> private_data) {
    auto h = parse_rdma_cm_ip_header(private_data);
    REQUIRE(h);
    f["rdma_cm.version"] = h->version;
    f["rdma_cm.ip_version"] = h->ip_version;
    f["rdma_cm.src_port"] = h->src_port;
    f["rdma_cm.src_addr"] = hex(h->src_addr);
    f["rdma_cm.dst_addr"] = hex(h->dst_addr);
    f["rdma_cm.user_data"] = hex(rdma_cm_user_data(private_data));
}

// Our decode under the names the expectations file uses.
Fields fields_of(const Mad& mad, const CmMessage& msg) {
    Fields f;
    const MadHeader& h = mad.header;
    f["mad.base_version"] = h.base_version;
    f["mad.mgmt_class"] = h.mgmt_class;
    f["mad.class_version"] = h.class_version;
    f["mad.method"] = static_cast<uint8_t>(h.method);
    f["mad.status"] = h.status;
    f["mad.class_specific"] = h.class_specific;
    f["mad.transaction_id"] = h.transaction_id;
    f["mad.attribute_id"] = h.attribute_id;
    f["mad.attribute_modifier"] = h.attribute_modifier;
    f["mad.data"] = hex(encode_cm(msg, h.transaction_id, h.attribute_modifier).data);
    if (const auto* req = std::get_if<CmReq>(&msg)) {
        f["req.local_comm_id"] = req->local_comm_id;
        f["req.vendor_id"] = req->vendor_id;
        f["req.service_id"] = req->service_id;
        f["req.local_ca_guid"] = req->local_ca_guid;
        f["req.local_qkey"] = req->local_qkey;
        f["req.local_qpn"] = req->local_qpn;
        f["req.responder_resources"] = req->responder_resources;
        f["req.local_eecn"] = req->local_eecn;
        f["req.initiator_depth"] = req->initiator_depth;
        f["req.remote_eecn"] = req->remote_eecn;
        f["req.remote_cm_response_timeout"] = req->remote_cm_response_timeout;
        f["req.transport"] = static_cast<uint8_t>(req->transport);
        f["req.end_to_end_flow_control"] = req->end_to_end_flow_control;
        f["req.starting_psn"] = req->starting_psn;
        f["req.local_cm_response_timeout"] = req->local_cm_response_timeout;
        f["req.retry_count"] = req->retry_count;
        f["req.pkey"] = req->pkey;
        f["req.path_mtu"] = req->path_mtu;
        f["req.rdc_exists"] = req->rdc_exists;
        f["req.rnr_retry_count"] = req->rnr_retry_count;
        f["req.max_cm_retries"] = req->max_cm_retries;
        f["req.srq"] = req->srq;
        f["req.extended_transport"] = req->extended_transport;
        add_path(f, "req.primary", req->primary_path);
        add_path(f, "req.alternate", req->alternate_path);
        f["req.sap_supported"] = req->sap_supported;
        f["req.private_data"] = hex(req->private_data);
        add_rdma_cm(f, req->private_data);
    } else if (const auto* rep = std::get_if<CmRep>(&msg)) {
        f["rep.local_comm_id"] = rep->local_comm_id;
        f["rep.remote_comm_id"] = rep->remote_comm_id;
        f["rep.local_qkey"] = rep->local_qkey;
        f["rep.local_qpn"] = rep->local_qpn;
        f["rep.vendor_id"] = rep->vendor_id;
        f["rep.local_eecn"] = rep->local_eecn;
        f["rep.starting_psn"] = rep->starting_psn;
        f["rep.responder_resources"] = rep->responder_resources;
        f["rep.initiator_depth"] = rep->initiator_depth;
        f["rep.target_ack_delay"] = rep->target_ack_delay;
        f["rep.failover_accepted"] = rep->failover_accepted;
        f["rep.end_to_end_flow_control"] = rep->end_to_end_flow_control;
        f["rep.rnr_retry_count"] = rep->rnr_retry_count;
        f["rep.srq"] = rep->srq;
        f["rep.local_ca_guid"] = rep->local_ca_guid;
        f["rep.private_data"] = hex(rep->private_data);
    } else if (const auto* rtu = std::get_if<CmRtu>(&msg)) {
        f["rtu.local_comm_id"] = rtu->local_comm_id;
        f["rtu.remote_comm_id"] = rtu->remote_comm_id;
        f["rtu.private_data"] = hex(rtu->private_data);
    } else if (const auto* dreq = std::get_if<CmDreq>(&msg)) {
        f["dreq.local_comm_id"] = dreq->local_comm_id;
        f["dreq.remote_comm_id"] = dreq->remote_comm_id;
        f["dreq.remote_qpn_eecn"] = dreq->remote_qpn_eecn;
        f["dreq.private_data"] = hex(dreq->private_data);
    } else if (const auto* drep = std::get_if<CmDrep>(&msg)) {
        f["drep.local_comm_id"] = drep->local_comm_id;
        f["drep.remote_comm_id"] = drep->remote_comm_id;
        f["drep.private_data"] = hex(drep->private_data);
    } else if (const auto* sreq = std::get_if<CmSidrReq>(&msg)) {
        f["sidr_req.request_id"] = sreq->request_id;
        f["sidr_req.pkey"] = sreq->pkey;
        f["sidr_req.service_id"] = sreq->service_id;
        f["sidr_req.private_data"] = hex(sreq->private_data);
        add_rdma_cm(f, sreq->private_data);
    } else if (const auto* srep = std::get_if<CmSidrRep>(&msg)) {
        f["sidr_rep.request_id"] = srep->request_id;
        f["sidr_rep.status"] = static_cast<uint8_t>(srep->status);
        f["sidr_rep.info_length"] = srep->info_length;
        f["sidr_rep.vendor_id"] = srep->vendor_id;
        f["sidr_rep.qpn"] = srep->qpn;
        f["sidr_rep.service_id"] = srep->service_id;
        f["sidr_rep.qkey"] = srep->qkey;
        f["sidr_rep.info"] = hex(srep->info);
        f["sidr_rep.private_data"] = hex(srep->private_data);
    }
    return f;
}

struct Expectation {
    std::string field;
    std::string value;
    std::string source;
};

// (file, frame) -> expected fields.
std::map<std::pair<std::string, uint64_t>, std::vector<Expectation>> load_expectations() {
    std::ifstream in(RNIC_CM_EXPECTATIONS);
    REQUIRE(in);
    std::map<std::pair<std::string, uint64_t>, std::vector<Expectation>> out;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream row(line);
        std::string file, frame;
        Expectation e;
        std::getline(row, file, '\t');
        std::getline(row, frame, '\t');
        std::getline(row, e.field, '\t');
        std::getline(row, e.value, '\t');
        std::getline(row, e.source, '\t');
        out[{file, std::stoull(frame)}].push_back(e);
    }
    return out;
}

bool matches(const Value& ours, const std::string& expected) {
    if (const auto* n = std::get_if<uint64_t>(&ours)) return *n == std::stoull(expected);
    return std::get<std::string>(ours) == expected;
}

std::string text(const Value& v) {
    if (const auto* n = std::get_if<uint64_t>(&v)) return std::to_string(*n);
    return std::get<std::string>(v);
}

}  // namespace

TEST_CASE("golden rdma_cm captures: every CM MAD decodes to what tshark shows and re-encodes bit for bit",
          "[golden][cm]") {
    const auto expectations = load_expectations();
    std::map<std::string, size_t> per_attr;
    std::set<std::pair<std::string, uint64_t>> seen;
    size_t fields_checked = 0;

    for (const char* name : kCaptures) {
        const fs::path path = golden_dir() / name;
        INFO(path.string());
        REQUIRE(fs::exists(path));
        for (const auto& fr : rnic::tools::read_all_frames(path.string())) {
            auto roce = parse_frame(fr.bytes);
            REQUIRE(roce);
            if (roce->bth.dest_qp != kGsiQpn) continue;
            INFO(name << " frame " << fr.index);

            auto gsi = parse_gsi_frame(fr.bytes);
            if (!gsi) FAIL(parse_errc_name(gsi.error().code) << " at " << gsi.error().offset);
            auto msg = decode_cm(gsi->mad);
            if (!msg) FAIL(parse_errc_name(msg.error().code) << " at " << msg.error().offset);

            // The 256 MAD bytes, from the decoded message alone.
            const Mad again = encode_cm(*msg, gsi->mad.header.transaction_id, gsi->mad.header.attribute_modifier);
            CHECK(again.bytes() == gsi->mad.bytes());
            CHECK(std::equal(gsi->frame.payload.begin(), gsi->frame.payload.end(), again.bytes().begin()));

            // The whole frame, ICRC included, from the GSI builder.
            std::vector<uint8_t> rebuilt(fr.bytes.size() + 64);
            auto n = build_gsi_frame(gsi_spec_from_frame(gsi->frame), again, rebuilt);
            REQUIRE(n);
            rebuilt.resize(*n);
            CHECK(rebuilt == fr.bytes);

            // Field by field against the expectations written from tshark.
            const auto it = expectations.find({name, fr.index});
            REQUIRE(it != expectations.end());
            seen.insert(it->first);
            const Fields ours = fields_of(gsi->mad, *msg);
            for (const Expectation& e : it->second) {
                INFO(e.field << " (" << e.source << ")");
                const auto f = ours.find(e.field);
                REQUIRE(f != ours.end());
                CHECK(text(f->second) == e.value);
                CHECK(matches(f->second, e.value));
                ++fields_checked;
            }
            ++per_attr[std::string(cm_attr_name(gsi->mad.header.attribute_id))];
        }
    }
    CHECK(seen.size() == expectations.size());  // no expectation left without its frame
    CHECK(per_attr["REQ"] == 4);
    CHECK(per_attr["REP"] == 4);
    CHECK(per_attr["RTU"] == 4);
    CHECK(per_attr["DREQ"] == 4);
    CHECK(per_attr["DREP"] == 4);
    CHECK(per_attr["SIDR_REQ"] == 2);
    CHECK(per_attr["SIDR_REP"] == 2);
    CHECK(fields_checked > 500);
}

// What Linux fills, read from the same frames: the conventions the daemon's CM must follow to look
// like rxe on the wire.
TEST_CASE("golden rdma_cm captures: the values Linux chooses for RoCE", "[golden][cm]") {
    for (const char* name : kCaptures) {
        for (const auto& fr : rnic::tools::read_all_frames((golden_dir() / name).string())) {
            auto gsi = parse_gsi_frame(fr.bytes);
            if (!gsi) continue;  // frames to other QPs
            INFO(name << " frame " << fr.index);
            const GsiFrameSpec spec = gsi_spec_from_frame(gsi->frame);
            CHECK(spec.src_port == kGsiSourcePort);
            CHECK(spec.pkey == kDefaultPkey);
            CHECK(spec.ack_req);
            CHECK(spec.src_qp == kGsiQpn);
            CHECK(spec.hop_limit == 64);
            CHECK(spec.dscp == 0);
            auto msg = decode_cm(gsi->mad);
            REQUIRE(msg);
            // Linux's TID: the MAD agent's hi_tid above the local comm ID, which cm_form_tid adds
            // as a big-endian value read on a little-endian host: byte-swapped.
            const uint64_t tid = gsi->mad.header.transaction_id;
            if (const auto* req = std::get_if<CmReq>(&*msg)) {
                CHECK(static_cast<uint32_t>(tid) == __builtin_bswap32(req->local_comm_id));
                // rdma_cm on RoCE: TCP port space, the flow label cma_get_roce_udp_flow_label
                // makes from the ports (sport * 31 + dport), permissive LIDs, 2 s ACK timeout.
                const auto svc = parse_rdma_cm_service_id(req->service_id);
                REQUIRE(svc);
                CHECK(svc->port_space == RdmaPortSpace::Tcp);
                const auto hdr = parse_rdma_cm_ip_header(req->private_data);
                REQUIRE(hdr);
                CHECK(req->primary_path.flow_label == ((uint32_t{hdr->src_port} * 31 + svc->port) & 0xFFFFF));
                CHECK(req->primary_path.local_lid == 0xFFFF);
                CHECK(req->primary_path.remote_lid == 0xFFFF);
                CHECK_FALSE(req->primary_path.subnet_local);
                CHECK(req->primary_path.local_gid == gsi->frame.src_gid);
                CHECK(req->primary_path.remote_gid == gsi->frame.dst_gid);
                CHECK(hdr->src_addr == gsi->frame.src_gid);
                CHECK(hdr->dst_addr == gsi->frame.dst_gid);
                CHECK_FALSE(req->has_alternate_path());
                CHECK(req->max_cm_retries == 15);
                CHECK(req->remote_cm_response_timeout == 20);
                CHECK(req->local_cm_response_timeout == 20);
            }
            if (const auto* sreq = std::get_if<CmSidrReq>(&*msg)) {
                CHECK(static_cast<uint32_t>(tid) == __builtin_bswap32(sreq->request_id));
                const auto svc = parse_rdma_cm_service_id(sreq->service_id);
                REQUIRE(svc);
                CHECK(svc->port_space == RdmaPortSpace::Udp);
            }
            if (const auto* srep = std::get_if<CmSidrRep>(&*msg)) {
                CHECK(srep->status == CmSidrStatus::Success);
                CHECK(srep->qkey == 0x01234567);  // rdma_cm's RDMA_UDP_QKEY
            }
        }
    }
}
