// One captured frame as rnic-pcap reports it: a text line and a JSON object.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "rnic/wire/parser.hpp"

namespace rnic::tools {

std::string describe_frame(const wire::RoceFrame& frame);  // "10.0.0.1:49441 -> 10.0.0.2 RC_SEND_ONLY ..."
nlohmann::json frame_to_json(const wire::RoceFrame& frame);

std::string format_seconds(uint64_t ns);  // "1.000123456"

}  // namespace rnic::tools
