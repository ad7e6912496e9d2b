// CM message layouts against IBA vol. 1 tables 106-120 (the positions Linux's ibta_vol1_c12.h
// gives): each field, set alone to all ones, must light exactly its own bits of the 232-byte data
// area, no more (values wider than the field are cut) and no fewer. Then random round trips of
// every message through a whole MAD, and the errors decode_cm gives.
#include <catch2/catch.hpp>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "rnic/wire/cm_messages.hpp"

using namespace rnic::wire;

namespace {

struct Bits {
    size_t offset;
    uint8_t mask;
};
std::vector<Bits> bytes(size_t from, size_t to) {  // [from, to), whole bytes
    std::vector<Bits> v;
    for (size_t i = from; i < to; ++i) v.push_back({i, 0xFF});
    return v;
}

template <class T>
struct FieldCase {
    std::string name;
    std::function<void(T&)> set_all_ones;
    std::vector<Bits> bits;
};

template <class T>
T zero_message() {
    T m{};
    if constexpr (requires { m.pkey; }) m.pkey = 0;
    if constexpr (requires { m.reason; }) m.reason = static_cast<CmRejReason>(0);
    return m;
}

template <class T>
void check_layout(const std::vector<FieldCase<T>>& cases) {
    std::array<uint8_t, kMadDataSize> data;
    data.fill(0xA5);  // write() must clear whatever was there
    zero_message<T>().write(data.data());
    const std::array<uint8_t, kMadDataSize> zeros{};
    REQUIRE(data == zeros);
    for (const auto& c : cases) {
        INFO(c.name);
        T m = zero_message<T>();
        c.set_all_ones(m);
        data.fill(0x5A);
        m.write(data.data());
        std::array<uint8_t, kMadDataSize> expected{};
        for (const Bits& b : c.bits) expected[b.offset] |= b.mask;
        for (size_t i = 0; i < kMadDataSize; ++i) {
            INFO("byte " << i);
            CHECK(int{data[i]} == int{expected[i]});
        }
    }
}

template <class T>
std::function<void(T&)> ones(auto T::*field) {
    return [field](T& m) {
        using F = std::remove_reference_t<decltype(m.*field)>;
        if constexpr (std::is_same_v<F, bool>) {
            m.*field = true;
        } else if constexpr (std::is_enum_v<F>) {
            m.*field = static_cast<F>(~std::underlying_type_t<F>{0});
        } else if constexpr (std::is_same_v<F, Gid>) {
            (m.*field).raw.fill(0xFF);
        } else if constexpr (requires { (m.*field).fill(0); }) {
            (m.*field).fill(0xFF);
        } else {
            m.*field = static_cast<F>(~F{0});
        }
    };
}

std::vector<FieldCase<CmReq>> path_cases(size_t base, CmPath CmReq::*path, const std::string& name) {
    auto on = [path](auto CmPath::*field) {
        return std::function<void(CmReq&)>([path, field](CmReq& m) { ones<CmPath>(field)(m.*path); });
    };
    return {
        {name + ".local_lid", on(&CmPath::local_lid), bytes(base, base + 2)},
        {name + ".remote_lid", on(&CmPath::remote_lid), bytes(base + 2, base + 4)},
        {name + ".local_gid", on(&CmPath::local_gid), bytes(base + 4, base + 20)},
        {name + ".remote_gid", on(&CmPath::remote_gid), bytes(base + 20, base + 36)},
        {name + ".flow_label", on(&CmPath::flow_label), {{base + 36, 0xFF}, {base + 37, 0xFF}, {base + 38, 0xF0}}},
        {name + ".packet_rate", on(&CmPath::packet_rate), {{base + 39, 0x3F}}},
        {name + ".traffic_class", on(&CmPath::traffic_class), {{base + 40, 0xFF}}},
        {name + ".hop_limit", on(&CmPath::hop_limit), {{base + 41, 0xFF}}},
        {name + ".sl", on(&CmPath::sl), {{base + 42, 0xF0}}},
        {name + ".subnet_local", on(&CmPath::subnet_local), {{base + 42, 0x08}}},
        {name + ".local_ack_timeout", on(&CmPath::local_ack_timeout), {{base + 43, 0xF8}}},
    };
}

// Random values that fit their fields.
struct Random {
    std::mt19937_64 rng{0xC0FFEE};
    uint64_t bits(unsigned n) { return n >= 64 ? rng() : rng() & ((uint64_t{1} << n) - 1); }
    bool flag() { return rng() & 1; }
    template <size_t N>
    std::array<uint8_t, N> array() {
        std::array<uint8_t, N> a;
        for (auto& b : a) b = static_cast<uint8_t>(rng());
        return a;
    }
    Gid gid() { return Gid{array<16>()}; }
    CmPath path() {
        CmPath p;
        p.local_lid = static_cast<uint16_t>(bits(16));
        p.remote_lid = static_cast<uint16_t>(bits(16));
        p.local_gid = gid();
        p.remote_gid = gid();
        p.flow_label = static_cast<uint32_t>(bits(20));
        p.packet_rate = static_cast<uint8_t>(bits(6));
        p.traffic_class = static_cast<uint8_t>(bits(8));
        p.hop_limit = static_cast<uint8_t>(bits(8));
        p.sl = static_cast<uint8_t>(bits(4));
        p.subnet_local = flag();
        p.local_ack_timeout = static_cast<uint8_t>(bits(5));
        return p;
    }
};

CmMessage random_req(Random& r) {
    CmReq m;
    m.local_comm_id = static_cast<uint32_t>(r.bits(32));
    m.vendor_id = static_cast<uint32_t>(r.bits(24));
    m.service_id = r.bits(64);
    m.local_ca_guid = r.bits(64);
    m.local_qkey = static_cast<uint32_t>(r.bits(32));
    m.local_qpn = static_cast<uint32_t>(r.bits(24));
    m.responder_resources = static_cast<uint8_t>(r.bits(8));
    m.local_eecn = static_cast<uint32_t>(r.bits(24));
    m.initiator_depth = static_cast<uint8_t>(r.bits(8));
    m.remote_eecn = static_cast<uint32_t>(r.bits(24));
    m.remote_cm_response_timeout = static_cast<uint8_t>(r.bits(5));
    m.transport = static_cast<CmTransport>(r.bits(2));
    m.end_to_end_flow_control = r.flag();
    m.starting_psn = static_cast<uint32_t>(r.bits(24));
    m.local_cm_response_timeout = static_cast<uint8_t>(r.bits(5));
    m.retry_count = static_cast<uint8_t>(r.bits(3));
    m.pkey = static_cast<uint16_t>(r.bits(16));
    m.path_mtu = static_cast<uint8_t>(r.bits(4));
    m.rdc_exists = r.flag();
    m.rnr_retry_count = static_cast<uint8_t>(r.bits(3));
    m.max_cm_retries = static_cast<uint8_t>(r.bits(4));
    m.srq = r.flag();
    m.extended_transport = static_cast<uint8_t>(r.bits(3));
    m.primary_path = r.path();
    m.alternate_path = r.path();
    m.sap_supported = r.flag();
    m.private_data = r.array<kCmReqPrivateDataSize>();
    return m;
}

CmMessage random_mra(Random& r) {
    CmMra m;
    m.local_comm_id = static_cast<uint32_t>(r.bits(32));
    m.remote_comm_id = static_cast<uint32_t>(r.bits(32));
    m.message_mraed = static_cast<CmMsgResponse>(r.bits(2));
    m.service_timeout = static_cast<uint8_t>(r.bits(5));
    m.private_data = r.array<kCmMraPrivateDataSize>();
    return m;
}

CmMessage random_rej(Random& r) {
    CmRej m;
    m.local_comm_id = static_cast<uint32_t>(r.bits(32));
    m.remote_comm_id = static_cast<uint32_t>(r.bits(32));
    m.message_rejected = static_cast<CmMsgResponse>(r.bits(2));
    m.ari_length = static_cast<uint8_t>(r.bits(8) % (kCmRejAriSize + 1));
    m.reason = static_cast<CmRejReason>(r.bits(16));
    m.ari = r.array<kCmRejAriSize>();
    m.private_data = r.array<kCmRejPrivateDataSize>();
    return m;
}

CmMessage random_rep(Random& r) {
    CmRep m;
    m.local_comm_id = static_cast<uint32_t>(r.bits(32));
    m.remote_comm_id = static_cast<uint32_t>(r.bits(32));
    m.local_qkey = static_cast<uint32_t>(r.bits(32));
    m.local_qpn = static_cast<uint32_t>(r.bits(24));
    m.vendor_id = static_cast<uint32_t>(r.bits(24));
    m.local_eecn = static_cast<uint32_t>(r.bits(24));
    m.starting_psn = static_cast<uint32_t>(r.bits(24));
    m.responder_resources = static_cast<uint8_t>(r.bits(8));
    m.initiator_depth = static_cast<uint8_t>(r.bits(8));
    m.target_ack_delay = static_cast<uint8_t>(r.bits(5));
    m.failover_accepted = static_cast<uint8_t>(r.bits(2));
    m.end_to_end_flow_control = r.flag();
    m.rnr_retry_count = static_cast<uint8_t>(r.bits(3));
    m.srq = r.flag();
    m.local_ca_guid = r.bits(64);
    m.private_data = r.array<kCmRepPrivateDataSize>();
    return m;
}

CmMessage random_rtu(Random& r) {
    CmRtu m;
    m.local_comm_id = static_cast<uint32_t>(r.bits(32));
    m.remote_comm_id = static_cast<uint32_t>(r.bits(32));
    m.private_data = r.array<kCmRtuPrivateDataSize>();
    return m;
}

CmMessage random_dreq(Random& r) {
    CmDreq m;
    m.local_comm_id = static_cast<uint32_t>(r.bits(32));
    m.remote_comm_id = static_cast<uint32_t>(r.bits(32));
    m.remote_qpn_eecn = static_cast<uint32_t>(r.bits(24));
    m.private_data = r.array<kCmDreqPrivateDataSize>();
    return m;
}

CmMessage random_drep(Random& r) {
    CmDrep m;
    m.local_comm_id = static_cast<uint32_t>(r.bits(32));
    m.remote_comm_id = static_cast<uint32_t>(r.bits(32));
    m.private_data = r.array<kCmDrepPrivateDataSize>();
    return m;
}

CmMessage random_sidr_req(Random& r) {
    CmSidrReq m;
    m.request_id = static_cast<uint32_t>(r.bits(32));
    m.pkey = static_cast<uint16_t>(r.bits(16));
    m.service_id = r.bits(64);
    m.private_data = r.array<kCmSidrReqPrivateDataSize>();
    return m;
}

CmMessage random_sidr_rep(Random& r) {
    CmSidrRep m;
    m.request_id = static_cast<uint32_t>(r.bits(32));
    m.status = static_cast<CmSidrStatus>(r.bits(8));
    m.info_length = static_cast<uint8_t>(r.bits(8) % (kCmSidrRepInfoSize + 1));
    m.vendor_id = static_cast<uint32_t>(r.bits(24));
    m.qpn = static_cast<uint32_t>(r.bits(24));
    m.service_id = r.bits(64);
    m.qkey = static_cast<uint32_t>(r.bits(32));
    m.info = r.array<kCmSidrRepInfoSize>();
    m.private_data = r.array<kCmSidrRepPrivateDataSize>();
    return m;
}

Mad encoded(const CmMessage& m) {
    return encode_cm(m, 0x0000000286E66A32, 0);
}

}  // namespace

TEST_CASE("CM REQ: IBA table 106 bit positions", "[cm]") {
    std::vector<FieldCase<CmReq>> cases = {
        {"local_comm_id", ones(&CmReq::local_comm_id), bytes(0, 4)},
        {"vendor_id", ones(&CmReq::vendor_id), bytes(5, 8)},
        {"service_id", ones(&CmReq::service_id), bytes(8, 16)},
        {"local_ca_guid", ones(&CmReq::local_ca_guid), bytes(16, 24)},
        {"local_qkey", ones(&CmReq::local_qkey), bytes(28, 32)},
        {"local_qpn", ones(&CmReq::local_qpn), bytes(32, 35)},
        {"responder_resources", ones(&CmReq::responder_resources), bytes(35, 36)},
        {"local_eecn", ones(&CmReq::local_eecn), bytes(36, 39)},
        {"initiator_depth", ones(&CmReq::initiator_depth), bytes(39, 40)},
        {"remote_eecn", ones(&CmReq::remote_eecn), bytes(40, 43)},
        {"remote_cm_response_timeout", ones(&CmReq::remote_cm_response_timeout), {{43, 0xF8}}},
        {"transport", ones(&CmReq::transport), {{43, 0x06}}},
        {"end_to_end_flow_control", ones(&CmReq::end_to_end_flow_control), {{43, 0x01}}},
        {"starting_psn", ones(&CmReq::starting_psn), bytes(44, 47)},
        {"local_cm_response_timeout", ones(&CmReq::local_cm_response_timeout), {{47, 0xF8}}},
        {"retry_count", ones(&CmReq::retry_count), {{47, 0x07}}},
        {"pkey", ones(&CmReq::pkey), bytes(48, 50)},
        {"path_mtu", ones(&CmReq::path_mtu), {{50, 0xF0}}},
        {"rdc_exists", ones(&CmReq::rdc_exists), {{50, 0x08}}},
        {"rnr_retry_count", ones(&CmReq::rnr_retry_count), {{50, 0x07}}},
        {"max_cm_retries", ones(&CmReq::max_cm_retries), {{51, 0xF0}}},
        {"srq", ones(&CmReq::srq), {{51, 0x08}}},
        {"extended_transport", ones(&CmReq::extended_transport), {{51, 0x07}}},
        {"sap_supported", ones(&CmReq::sap_supported), {{139, 0x04}}},
        {"private_data", ones(&CmReq::private_data), bytes(140, 232)},
    };
    for (auto& c : path_cases(52, &CmReq::primary_path, "primary")) cases.push_back(c);
    for (auto& c : path_cases(96, &CmReq::alternate_path, "alternate")) cases.push_back(c);
    check_layout(cases);
}

TEST_CASE("CM MRA, REJ, RTU, DREQ, DREP: IBA tables 107, 108, 111-113 bit positions", "[cm]") {
    check_layout<CmMra>({
        {"local_comm_id", ones(&CmMra::local_comm_id), bytes(0, 4)},
        {"remote_comm_id", ones(&CmMra::remote_comm_id), bytes(4, 8)},
        {"message_mraed", ones(&CmMra::message_mraed), {{8, 0xC0}}},
        {"service_timeout", ones(&CmMra::service_timeout), {{9, 0xF8}}},
        {"private_data", ones(&CmMra::private_data), bytes(10, 232)},
    });
    check_layout<CmRej>({
        {"local_comm_id", ones(&CmRej::local_comm_id), bytes(0, 4)},
        {"remote_comm_id", ones(&CmRej::remote_comm_id), bytes(4, 8)},
        {"message_rejected", ones(&CmRej::message_rejected), {{8, 0xC0}}},
        {"ari_length", ones(&CmRej::ari_length), {{9, 0xFE}}},
        {"reason", ones(&CmRej::reason), bytes(10, 12)},
        {"ari", ones(&CmRej::ari), bytes(12, 84)},
        {"private_data", ones(&CmRej::private_data), bytes(84, 232)},
    });
    check_layout<CmRtu>({
        {"local_comm_id", ones(&CmRtu::local_comm_id), bytes(0, 4)},
        {"remote_comm_id", ones(&CmRtu::remote_comm_id), bytes(4, 8)},
        {"private_data", ones(&CmRtu::private_data), bytes(8, 232)},
    });
    check_layout<CmDreq>({
        {"local_comm_id", ones(&CmDreq::local_comm_id), bytes(0, 4)},
        {"remote_comm_id", ones(&CmDreq::remote_comm_id), bytes(4, 8)},
        {"remote_qpn_eecn", ones(&CmDreq::remote_qpn_eecn), bytes(8, 11)},
        {"private_data", ones(&CmDreq::private_data), bytes(12, 232)},
    });
    check_layout<CmDrep>({
        {"local_comm_id", ones(&CmDrep::local_comm_id), bytes(0, 4)},
        {"remote_comm_id", ones(&CmDrep::remote_comm_id), bytes(4, 8)},
        {"private_data", ones(&CmDrep::private_data), bytes(8, 232)},
    });
}

TEST_CASE("CM REP, SIDR_REQ, SIDR_REP: IBA tables 110, 119, 120 bit positions", "[cm]") {
    check_layout<CmRep>({
        {"local_comm_id", ones(&CmRep::local_comm_id), bytes(0, 4)},
        {"remote_comm_id", ones(&CmRep::remote_comm_id), bytes(4, 8)},
        {"local_qkey", ones(&CmRep::local_qkey), bytes(8, 12)},
        {"local_qpn", ones(&CmRep::local_qpn), bytes(12, 15)},
        {"vendor_id", ones(&CmRep::vendor_id), {{15, 0xFF}, {19, 0xFF}, {23, 0xFF}}},
        {"local_eecn", ones(&CmRep::local_eecn), bytes(16, 19)},
        {"starting_psn", ones(&CmRep::starting_psn), bytes(20, 23)},
        {"responder_resources", ones(&CmRep::responder_resources), bytes(24, 25)},
        {"initiator_depth", ones(&CmRep::initiator_depth), bytes(25, 26)},
        {"target_ack_delay", ones(&CmRep::target_ack_delay), {{26, 0xF8}}},
        {"failover_accepted", ones(&CmRep::failover_accepted), {{26, 0x06}}},
        {"end_to_end_flow_control", ones(&CmRep::end_to_end_flow_control), {{26, 0x01}}},
        {"rnr_retry_count", ones(&CmRep::rnr_retry_count), {{27, 0xE0}}},
        {"srq", ones(&CmRep::srq), {{27, 0x10}}},
        {"local_ca_guid", ones(&CmRep::local_ca_guid), bytes(28, 36)},
        {"private_data", ones(&CmRep::private_data), bytes(36, 232)},
    });
    check_layout<CmSidrReq>({
        {"request_id", ones(&CmSidrReq::request_id), bytes(0, 4)},
        {"pkey", ones(&CmSidrReq::pkey), bytes(4, 6)},
        {"service_id", ones(&CmSidrReq::service_id), bytes(8, 16)},
        {"private_data", ones(&CmSidrReq::private_data), bytes(16, 232)},
    });
    check_layout<CmSidrRep>({
        {"request_id", ones(&CmSidrRep::request_id), bytes(0, 4)},
        {"status", ones(&CmSidrRep::status), bytes(4, 5)},
        {"info_length", ones(&CmSidrRep::info_length), bytes(5, 6)},
        {"vendor_id", ones(&CmSidrRep::vendor_id), {{6, 0xFF}, {7, 0xFF}, {11, 0xFF}}},
        {"qpn", ones(&CmSidrRep::qpn), bytes(8, 11)},
        {"service_id", ones(&CmSidrRep::service_id), bytes(12, 20)},
        {"qkey", ones(&CmSidrRep::qkey), bytes(20, 24)},
        {"info", ones(&CmSidrRep::info), bytes(24, 96)},
        {"private_data", ones(&CmSidrRep::private_data), bytes(96, 232)},
    });
}

TEST_CASE("CM: every message type survives encode -> 256 bytes -> parse -> decode", "[cm]") {
    Random r;
    const std::pair<CmMessage (*)(Random&), CmAttr> makers[] = {
        {random_req, CmAttr::Req},   {random_mra, CmAttr::Mra},          {random_rej, CmAttr::Rej},
        {random_rep, CmAttr::Rep},   {random_rtu, CmAttr::Rtu},          {random_dreq, CmAttr::Dreq},
        {random_drep, CmAttr::Drep}, {random_sidr_req, CmAttr::SidrReq}, {random_sidr_rep, CmAttr::SidrRep},
    };
    for (const auto& [make, attr] : makers) {
        for (int i = 0; i < 200; ++i) {
            const CmMessage m = make(r);
            INFO(cm_attr_name(static_cast<uint16_t>(attr)) << " #" << i);
            REQUIRE(cm_attr_of(m) == attr);
            const uint64_t tid = r.bits(64);
            const uint32_t attr_mod = static_cast<uint32_t>(r.bits(32));
            const Mad mad = encode_cm(m, tid, attr_mod);
            CHECK(mad.header.base_version == 1);
            CHECK(mad.header.mgmt_class == kMgmtClassCm);
            CHECK(mad.header.class_version == kCmClassVersion);
            CHECK(mad.header.method == MadMethod::Send);
            CHECK(mad.header.status == 0);
            CHECK(mad.header.attribute_id == static_cast<uint16_t>(attr));
            CHECK(mad.header.attribute_modifier == attr_mod);
            CHECK(mad.header.transaction_id == tid);
            const auto wire = mad.bytes();
            auto parsed = parse_mad(wire);
            REQUIRE(parsed);
            auto back = decode_cm(*parsed);
            if (!back) FAIL(parse_errc_name(back.error().code));
            CHECK(*back == m);
            CHECK(encode_cm(*back, tid, attr_mod).bytes() == wire);
        }
    }
}

TEST_CASE("CM: communication IDs of each message", "[cm]") {
    CmReq req;
    req.local_comm_id = 11;
    CHECK(cm_comm_ids(req).local == 11);
    CHECK(cm_comm_ids(req).remote == 0);
    CmRep rep;
    rep.local_comm_id = 21;
    rep.remote_comm_id = 11;
    CHECK(cm_comm_ids(rep).local == 21);
    CHECK(cm_comm_ids(rep).remote == 11);
    CmSidrReq sreq;
    sreq.request_id = 7;
    CHECK(cm_comm_ids(sreq).local == 7);
    CmSidrRep srep;
    srep.request_id = 7;
    CHECK(cm_comm_ids(srep).remote == 7);
    CHECK(cm_comm_ids(srep).local == 0);
    CmDreq dreq;
    dreq.local_comm_id = 1;
    dreq.remote_comm_id = 2;
    CHECK(cm_comm_ids(dreq).remote == 2);
}

TEST_CASE("CM: names of attributes and REJ reasons", "[cm]") {
    CHECK(cm_attr_name(0x0010) == "REQ");
    CHECK(cm_attr_name(0x0018) == "SIDR_REP");
    CHECK(cm_attr_name(0x0001) == "ClassPortInfo");
    CHECK(cm_attr_name(0x0019) == "LAP");
    CHECK(cm_attr_name(0x0020) == "unknown");
    CHECK(static_cast<int>(CmRejReason::InvalidServiceId) == 8);
    CHECK(static_cast<int>(CmRejReason::Timeout) == 4);
    CHECK(static_cast<int>(CmRejReason::StaleConn) == 10);
    CHECK(static_cast<int>(CmRejReason::ConsumerDefined) == 28);
    CHECK(cm_rej_reason_name(CmRejReason::InvalidServiceId) == "invalid service ID");
    CHECK(cm_rej_reason_name(CmRejReason::ConsumerDefined) == "consumer defined");
    CHECK(cm_rej_reason_name(static_cast<CmRejReason>(34)) == "unrecognized reason");
}

TEST_CASE("CM: MADs that are not CM messages are refused with the rule they break", "[cm][malformed]") {
    const Mad good = encoded(CmRtu{});
    REQUIRE(decode_cm(good));

    auto error_of = [](const Mad& m) {
        auto r = decode_cm(m);
        REQUIRE_FALSE(r);
        return r.error();
    };
    Mad m = good;
    m.header.mgmt_class = 0x03;  // subnet administration
    CHECK(error_of(m).code == ParseErrc::WrongMgmtClass);
    CHECK(error_of(m).offset == 1);
    m = good;
    m.header.class_version = 1;
    CHECK(error_of(m).code == ParseErrc::BadClassVersion);
    CHECK(error_of(m).offset == 2);
    for (MadMethod method : {MadMethod::Get, MadMethod::Set, MadMethod::GetResp}) {
        m = good;
        m.header.method = method;
        CHECK(error_of(m).code == ParseErrc::BadCmMethod);
    }
    for (uint16_t attr :
         {uint16_t{0x0001}, uint16_t{0x0019}, uint16_t{0x001A}, uint16_t{0x000F}, uint16_t{0x0020}, uint16_t{0xFFFF}}) {
        m = good;
        m.header.attribute_id = attr;
        CHECK(error_of(m).code == ParseErrc::UnknownCmAttribute);
        CHECK(error_of(m).offset == 16);
    }

    CmRej rej;
    rej.ari_length = 72;
    REQUIRE(decode_cm(encoded(rej)));
    rej.ari_length = 73;  // fits the 7-bit field, not the 72-byte ARI
    CHECK(error_of(encoded(rej)).code == ParseErrc::BadCmLength);
    CHECK(error_of(encoded(rej)).offset == 24 + 9);
    rej.ari_length = 127;
    CHECK(error_of(encoded(rej)).code == ParseErrc::BadCmLength);

    CmSidrRep srep;
    srep.info_length = 72;
    REQUIRE(decode_cm(encoded(srep)));
    srep.info_length = 73;
    CHECK(error_of(encoded(srep)).code == ParseErrc::BadCmLength);
    CHECK(error_of(encoded(srep)).offset == 24 + 5);
}

TEST_CASE("CM: ARI and SIDR info spans stay inside their fields", "[cm]") {
    CmRej rej;
    rej.ari_length = 8;
    CHECK(rej.ari_bytes().size() == 8);
    rej.ari_length = 127;
    CHECK(rej.ari_bytes().size() == kCmRejAriSize);
    CmSidrRep rep;
    rep.info_length = 200;
    CHECK(rep.info_bytes().size() == kCmSidrRepInfoSize);
}

TEST_CASE("ClassPortInfo: IBA 13.4.8.1 layout and round trip", "[cm]") {
    ClassPortInfo c;
    c.base_version = 1;
    c.class_version = 2;
    c.capability_mask = 0x1234;
    c.capability_mask2 = 0x7FFFFFF;
    c.resp_time_value = 0x13;
    c.redirect_gid = *Gid::parse("fe80::1");
    c.redirect_tc = 0xAB;
    c.redirect_sl = 0xC;
    c.redirect_fl = 0xDEF01;
    c.redirect_lid = 0x1111;
    c.redirect_pkey = 0xFFFF;
    c.redirect_qp = 0x123456;
    c.redirect_qkey = 0x80010000;
    c.trap_gid = *Gid::parse("10.0.0.1");
    c.trap_tc = 0x01;
    c.trap_sl = 0x2;
    c.trap_fl = 0x34567;
    c.trap_lid = 0x2222;
    c.trap_pkey = 0x7FFF;
    c.trap_hop_limit = 0x40;
    c.trap_qp = 0x000001;
    c.trap_qkey = 0x12345678;
    std::array<uint8_t, ClassPortInfo::kSize> b;
    c.write(b.data());
    CHECK(b[0] == 1);
    CHECK(b[1] == 2);
    CHECK(b[2] == 0x12);
    CHECK(b[3] == 0x34);
    CHECK(b[4] == 0xFF);  // capability mask 2 in the upper 27 bits
    CHECK(b[7] == (0xE0 | 0x13));
    CHECK(b[24] == 0xAB);
    CHECK(b[25] == 0xCD);  // SL 0xC, flow label's top nibble 0xD
    CHECK(b[32] == 0);     // reserved byte before the redirect QP
    CHECK(b[33] == 0x12);
    CHECK(b[64] == 0x40);
    CHECK(b[71] == 0x78);
    CHECK(ClassPortInfo::read(b.data()) == c);
}
