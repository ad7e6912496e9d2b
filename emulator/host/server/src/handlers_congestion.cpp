// SetCongestionParam (rnicctl cc set): DCQCN and ECN knobs of a running daemon, by their mlx5
// names. The knobs are the device's, shared by every user's QPs, so like the log level they are
// the host's to change: the daemon's owner or root. All or nothing: one bad entry changes
// nothing, and the reason goes to the log (the reply carries only EINVAL; rnicctl checks the
// same table first and prints the reason itself).
#include <spdlog/spdlog.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include "control_request.hpp"
#include "rnic/congestion/dcqcn_params.hpp"

namespace rnic::host::server {

using namespace rnic::host::abi;

void HostService::Impl::on_set_congestion_param(Request& rq, const SetCongestionParamRequest& req) {
    const Session& s = rq.s;
    if (!administers(s)) {
        spdlog::info("session {} (pid {}): uid {} may not change congestion control: EPERM", s.id, s.pid, s.uid);
        return rq.fail(EPERM);
    }
    if (req.count == 0 || req.count > kMaxCongestionParams || req.reserved != 0) return rq.fail(EINVAL);
    std::array<cc::ParamAssignment, kMaxCongestionParams> assignments;
    std::string text;
    for (uint32_t i = 0; i < req.count; ++i) {
        const CongestionParamAssignment& p = req.params[i];
        const size_t len = strnlen(p.name, sizeof p.name);
        if (len == 0 || len == sizeof p.name || p.reserved != 0 || p.reserved2 != 0) return rq.fail(EINVAL);
        // `req` is the handler's own copy of the body: the views stay valid for the call.
        assignments[i] = {std::string_view(p.name, len), p.value};
        text += ' ' + std::string(p.name, len) + '=' + std::to_string(p.value);
    }
    if (auto error = engine.set_congestion_params(std::span(assignments.data(), req.count))) {
        spdlog::info("session {} (pid {}): congestion control unchanged: {}", s.id, s.pid, *error);
        return rq.fail(EINVAL);
    }
    spdlog::info("congestion control set by session {} (pid {}):{}", s.id, s.pid, text);
    rq.fail(0);
}

}  // namespace rnic::host::server
