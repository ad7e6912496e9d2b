// A deterministic set of GSI frames built by the wire library: every CM message the library
// decodes, filled as Linux's CM and rdma_cm fill them (an RC connection set up, MRAed and torn
// down, the three REJs Linux sends, SIDR resolution and its "no listener" answer, an IPv6
// connection), and a Get(ClassPortInfo) with Linux's unmatched-method answer. For tshark to check.
#pragma once

#include <cstdint>
#include <vector>

namespace rnic::tools {

std::vector<std::vector<uint8_t>> build_sample_cm_frames();

}  // namespace rnic::tools
