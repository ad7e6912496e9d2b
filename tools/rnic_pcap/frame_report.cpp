#include "frame_report.hpp"

#include <cinttypes>
#include <cstdio>

#include "rnic/wire/aeth.hpp"

namespace rnic::tools {
namespace {

using wire::AckType;
using wire::AethSyndrome;

std::string hex(uint64_t v, int width = 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%0*" PRIx64, width, v);
    return buf;
}

std::string describe_aeth(const wire::Aeth& aeth) {
    const auto syn = AethSyndrome::decode(aeth.syndrome);
    std::string s = std::string(wire::ack_type_name(syn.type));
    switch (syn.type) {
        case AckType::Ack: {
            const int32_t credits = wire::credits_from_code(syn.value);
            s += credits < 0 ? " credits=unlimited" : " credits=" + std::to_string(credits);
            break;
        }
        case AckType::RnrNak:
            s += " timer=" + std::to_string(syn.value) + " (" +
                 std::to_string(wire::rnr_timer_ns(syn.value) / 1000) + " us)";
            break;
        case AckType::Nak:
            s += " " + std::string(wire::nak_code_name(syn.nak_code()));
            break;
        case AckType::Reserved:
            s += " value=" + std::to_string(syn.value);
            break;
    }
    return s + " msn=" + std::to_string(aeth.msn);
}

nlohmann::json aeth_to_json(const wire::Aeth& aeth) {
    const auto syn = AethSyndrome::decode(aeth.syndrome);
    nlohmann::json j{{"syndrome", aeth.syndrome},
                     {"type", wire::ack_type_name(syn.type)},
                     {"msn", aeth.msn}};
    if (syn.type == AckType::Ack) j["credits"] = wire::credits_from_code(syn.value);
    if (syn.type == AckType::RnrNak) {
        j["rnr_timer"] = syn.value;
        j["rnr_timer_ns"] = wire::rnr_timer_ns(syn.value);
    }
    if (syn.type == AckType::Nak) j["nak"] = wire::nak_code_name(syn.nak_code());
    return j;
}

}  // namespace

std::string format_seconds(uint64_t ns) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%" PRIu64 ".%09" PRIu64, ns / uint64_t{1000000000}, ns % uint64_t{1000000000});
    return buf;
}

std::string describe_frame(const wire::RoceFrame& f) {
    const wire::Bth& b = f.bth;
    const std::string src = f.ip_version == 4 ? f.src_gid.to_ip_string() : "[" + f.src_gid.to_ip_string() + "]";
    std::string s = src + ":" + std::to_string(f.udp.src_port) + " -> " +
                    f.dst_gid.to_ip_string() + " " + std::string(f.info->name) +
                    " qp=" + hex(b.dest_qp, 6) + " psn=" + std::to_string(b.psn);
    if (b.ack_req) s += " A";
    if (b.solicited) s += " SE";
    if (b.fecn) s += " FECN";
    if (b.becn) s += " BECN";
    if (f.ecn() != 0) s += " ecn=" + std::to_string(f.ecn());
    const wire::ExtHeaders& e = f.ext;
    if (e.deth) s += " qkey=" + hex(e.deth->qkey, 8) + " src_qp=" + hex(e.deth->src_qp, 6);
    if (e.feth)
        s += " flush_type=" + std::to_string(e.feth->placement) + " flush_level=" + std::to_string(e.feth->selectivity);
    if (e.reth)
        s += " va=" + hex(e.reth->va) + " rkey=" + hex(e.reth->rkey, 8) + " dlen=" + std::to_string(e.reth->dma_length);
    if (e.atomic_eth)
        s += " va=" + hex(e.atomic_eth->va) + " rkey=" + hex(e.atomic_eth->rkey, 8) +
             " swap_add=" + hex(e.atomic_eth->swap_add) + " compare=" + hex(e.atomic_eth->compare);
    if (e.aeth) s += " " + describe_aeth(*e.aeth);
    if (e.atomic_ack_eth) s += " orig=" + hex(e.atomic_ack_eth->original);
    if (e.immdt) s += " imm=" + hex(e.immdt->value, 8);
    if (e.ieth) s += " inv_rkey=" + hex(e.ieth->rkey, 8);
    if (f.info->has_payload) s += " len=" + std::to_string(f.payload.size());
    if (b.pad_count) s += " pad=" + std::to_string(b.pad_count);
    return s;
}

nlohmann::json frame_to_json(const wire::RoceFrame& f) {
    const wire::Bth& b = f.bth;
    nlohmann::json j{
        {"ip_version", f.ip_version},
        {"src", f.src_gid.to_ip_string()},
        {"dst", f.dst_gid.to_ip_string()},
        {"sport", f.udp.src_port},
        {"dport", f.udp.dst_port},
        {"dscp", f.dscp()},
        {"ecn", f.ecn()},
        {"opcode", b.opcode},
        {"opcode_name", f.info->name},
        {"transport", wire::transport_name(f.info->transport)},
        {"dest_qp", b.dest_qp},
        {"psn", b.psn},
        {"pkey", b.pkey},
        {"ack_req", b.ack_req},
        {"solicited", b.solicited},
        {"fecn", b.fecn},
        {"becn", b.becn},
        {"pad", b.pad_count},
        {"payload_length", f.payload.size()},
        {"icrc", hex(f.icrc, 8)},
    };
    const wire::ExtHeaders& e = f.ext;
    if (e.deth) j["deth"] = {{"qkey", e.deth->qkey}, {"src_qp", e.deth->src_qp}};
    if (e.feth) j["feth"] = {{"placement_type", e.feth->placement}, {"selectivity_level", e.feth->selectivity}};
    if (e.reth) j["reth"] = {{"va", e.reth->va}, {"rkey", e.reth->rkey}, {"dma_length", e.reth->dma_length}};
    if (e.atomic_eth)
        j["atomic_eth"] = {{"va", e.atomic_eth->va},
                           {"rkey", e.atomic_eth->rkey},
                           {"swap_add", e.atomic_eth->swap_add},
                           {"compare", e.atomic_eth->compare}};
    if (e.aeth) j["aeth"] = aeth_to_json(*e.aeth);
    if (e.atomic_ack_eth) j["atomic_ack_eth"] = {{"original", e.atomic_ack_eth->original}};
    if (e.immdt) j["immdt"] = e.immdt->value;
    if (e.ieth) j["ieth"] = {{"rkey", e.ieth->rkey}};
    return j;
}

}  // namespace rnic::tools
