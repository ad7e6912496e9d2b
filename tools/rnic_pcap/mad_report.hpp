// The management datagram of a frame to QP 1 as rnic-pcap checks and reports it: the MAD header,
// and for the CM messages (REQ ... SIDR_REP) their communication IDs, service ID, and the rdma_cm
// addresses of REQ and SIDR_REQ private data.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "rnic/wire/cm_messages.hpp"
#include "rnic/wire/gsi_frame.hpp"

namespace rnic::tools {

struct GsiReport {
    wire::Mad mad;
    std::optional<wire::CmMessage> cm;  // for the CM class's decoded attributes
};

// A frame to QP 1 must carry a valid MAD (gsi_mad's rules); a CM MAD whose attribute is one of the
// messages decoded here must decode. Error offsets are frame offsets.
wire::Expected<GsiReport, wire::ParseError> check_gsi(const wire::RoceFrame& frame);

std::string describe_gsi(const GsiReport& report);  // "CM REQ tid=0x... comm=0x326ae686->0x00000000 ..."
nlohmann::json gsi_to_json(const GsiReport& report);
std::string gsi_histogram_key(const GsiReport& report);  // "CM REQ", "MAD class 0x03 attr 0x0012"

}  // namespace rnic::tools
