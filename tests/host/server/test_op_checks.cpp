// Every op's request is checked before its handler runs: a body of another size, other
// descriptors, or the op on the wrong side of Hello are refused with the errno the protocol has
// always given, in its order (op, body size, Hello, descriptors). The ops' shapes are written out
// here from control.hpp, apart from the daemon's table, so a row that drifts from the protocol
// fails here.
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <vector>

#include "raw_client.hpp"
#include "rnic/host/abi/cm.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;
using abi::Op;

namespace {

struct Shape {
    Op op;
    size_t body;  // bytes; with `tail`, the least (RegMr's runs follow its struct)
    bool tail = false;
    size_t fds = 0;
    bool unassigned = false;  // a number held for another branch's op: unknown here
};

constexpr Op cm(abi::CmOp op) {
    return static_cast<Op>(op);
}

// Every op of the protocol, in Op order from 1 (the CM's from abi/cm.hpp after the verbs ops).
const Shape kShapes[] = {
    {Op::Hello, sizeof(abi::HelloRequest)},
    {Op::AllocPd, 0},
    {Op::DeallocPd, sizeof(abi::HandleRequest)},
    {Op::ShareSegment, sizeof(abi::ShareSegmentRequest), false, 1},
    {Op::ReleaseSegment, sizeof(abi::HandleRequest)},
    {Op::RegMr, sizeof(abi::RegMrRequest), true},
    {Op::DeregMr, sizeof(abi::HandleRequest)},
    {Op::CreateCompChannel, 0},
    {Op::DestroyCompChannel, sizeof(abi::HandleRequest)},
    {Op::CreateCq, sizeof(abi::CreateCqRequest)},
    {Op::DestroyCq, sizeof(abi::HandleRequest)},
    {Op::CreateSrq, sizeof(abi::CreateSrqRequest)},
    {Op::ModifySrq, sizeof(abi::ModifySrqRequest)},
    {Op::QuerySrq, sizeof(abi::HandleRequest)},
    {Op::DestroySrq, sizeof(abi::HandleRequest)},
    {Op::CreateQp, sizeof(abi::CreateQpRequest)},
    {Op::ModifyQp, sizeof(abi::ModifyQpRequest)},
    {Op::QueryQp, sizeof(abi::QueryQpRequest)},
    {Op::DestroyQp, sizeof(abi::HandleRequest)},
    {Op::CreateAh, sizeof(abi::CreateAhRequest)},
    {Op::DestroyAh, sizeof(abi::HandleRequest)},
    {Op::QueryPort, 0},
    {Op::Stats, sizeof(abi::StatsRequest)},
    {Op::SetLogLevel, sizeof(abi::SetLogLevelRequest)},
    {cm(abi::CmOp::CreateChannel), 0},
    {cm(abi::CmOp::DestroyChannel), sizeof(abi::HandleRequest)},
    {cm(abi::CmOp::CreateId), sizeof(abi::CmCreateIdRequest)},
    {cm(abi::CmOp::DestroyId), sizeof(abi::HandleRequest)},
    {cm(abi::CmOp::MigrateId), sizeof(abi::CmMigrateIdRequest)},
    {cm(abi::CmOp::BindAddr), sizeof(abi::CmAddrRequest)},
    {cm(abi::CmOp::ResolveAddr), sizeof(abi::CmResolveAddrRequest)},
    {cm(abi::CmOp::ResolveRoute), sizeof(abi::CmTimeoutRequest)},
    {cm(abi::CmOp::Query), sizeof(abi::HandleRequest)},
    {cm(abi::CmOp::Listen), sizeof(abi::CmListenRequest)},
    {cm(abi::CmOp::Connect), sizeof(abi::CmConnectRequest)},
    {cm(abi::CmOp::Accept), sizeof(abi::CmConnectRequest)},
    {cm(abi::CmOp::Reject), sizeof(abi::CmRejectRequest)},
    {cm(abi::CmOp::Disconnect), sizeof(abi::HandleRequest)},
    {cm(abi::CmOp::InitQpAttr), sizeof(abi::CmInitQpAttrRequest)},
    {cm(abi::CmOp::Notify), sizeof(abi::CmNotifyRequest)},
    {cm(abi::CmOp::SetOption), sizeof(abi::CmSetOptionRequest)},
    {cm(abi::CmOp::GetEvent), sizeof(abi::HandleRequest)},
    {cm(abi::CmOp::JoinMulticast), sizeof(abi::CmJoinRequest)},
    {cm(abi::CmOp::LeaveMulticast), sizeof(abi::CmLeaveRequest)},
    {cm(abi::CmOp::Establish), sizeof(abi::HandleRequest)},
    {Op::AllocMw, sizeof(abi::AllocMwRequest)},
    {Op::DeallocMw, sizeof(abi::HandleRequest)},
    {Op::ResizeCq, sizeof(abi::ResizeCqRequest)},
    {Op::ReregMr, sizeof(abi::ReregMrRequest), true},
    {Op::SetCongestionParam, sizeof(abi::SetCongestionParamRequest)},
};
constexpr uint16_t kFirstUnknown = std::size(kShapes) + 1;

size_t open_descriptors() {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

uint64_t control_errors(Rig& rig) {
    return nlohmann::json::parse(rig.host->stats_json())["counters"]["host_control_errors"].get<uint64_t>();
}

// What a client hands over: memfds of a page, as ShareSegment takes.
std::vector<int> memfds(size_t n) {
    std::vector<int> fds;
    for (size_t i = 0; i < n; ++i) {
        const int fd = memfd_create("op-check", MFD_CLOEXEC);
        REQUIRE(fd >= 0);
        REQUIRE(ftruncate(fd, 4096) == 0);
        fds.push_back(fd);
    }
    return fds;
}

// One message of `op` with a zeroed body of `body_bytes` and `fds` descriptors on a new session
// (after Hello when `after_hello`), which must be refused: its reply echoes op and seq with no
// body and no descriptor, then the session ends; one more malformed message is counted, and every
// descriptor the session and the message brought into the daemon is closed again. Returns the
// reply's status.
int refused(Rig& rig, bool after_hello, uint16_t op, size_t body_bytes, size_t fds) {
    const uint64_t errors = control_errors(rig);
    const size_t before = open_descriptors();
    int status = -1;
    {
        RawClient c(rig.host->socket_path());
        if (after_hello) REQUIRE(rig.hello(c).header.status == 0);
        const std::vector<uint8_t> body(body_bytes);
        const std::vector<int> sent = memfds(fds);
        const uint32_t seq = c.send(static_cast<Op>(op), body.data(), body.size(), sent);
        for (int fd : sent) close(fd);
        const Reply r = rig.wait_reply(c);
        REQUIRE_FALSE(r.eof);
        CHECK(r.header.op == op);
        CHECK(r.header.seq == seq);
        CHECK(r.body.empty());
        CHECK(r.fds.empty());
        status = r.header.status;
        CHECK(rig.wait_reply(c).eof);
    }
    CHECK(control_errors(rig) == errors + 1);
    CHECK(open_descriptors() == before);
    return status;
}

// A message that meets its op's row reaches the handler, whatever the handler makes of a zeroed
// request (mostly EINVAL: handle 0 is nobody's): answered, and the session goes on.
void answered(Rig& rig, RawClient& c, const Shape& op) {
    const uint64_t errors = control_errors(rig);
    const std::vector<uint8_t> body(op.body);
    const std::vector<int> sent = memfds(op.fds);
    const Reply r = rig.call(c, op.op, body.data(), body.size(), sent);
    for (int fd : sent) close(fd);
    REQUIRE_FALSE(r.eof);
    CHECK(rig.call(c, Op::QueryPort, nullptr, 0).header.status == 0);
    CHECK(control_errors(rig) == errors);
}

}  // namespace

TEST_CASE("every op: another body size, other descriptors or the wrong side of Hello are refused as always") {
    Rig rig;
    RawClient other(rig.host->socket_path());
    REQUIRE(rig.hello(other).header.status == 0);
    for (size_t i = 0; i < std::size(kShapes); ++i) {
        const Shape& op = kShapes[i];
        const uint16_t code = static_cast<uint16_t>(op.op);
        INFO("op " << code);
        REQUIRE(code == i + 1);
        if (op.unassigned) {
            for (bool after_hello : {false, true}) CHECK(refused(rig, after_hello, code, 0, 0) == EINVAL);
            continue;
        }
        // Hello only as the first message, every other op only after it.
        const bool hello = op.op == Op::Hello;
        if (!hello) answered(rig, other, op);

        CHECK(refused(rig, !hello, code, op.body + 1, op.fds) == EINVAL);  // RegMr: its handler's run check
        if (op.body > 0) CHECK(refused(rig, !hello, code, op.body - 1, op.fds) == EINVAL);
        if (op.tail) CHECK(refused(rig, !hello, code, op.body + sizeof(abi::SegmentRun), op.fds) == EINVAL);
        CHECK(refused(rig, !hello, code, op.body, op.fds + 1) == EINVAL);
        if (op.fds > 0) CHECK(refused(rig, !hello, code, op.body, op.fds - 1) == EINVAL);

        CHECK(refused(rig, hello, code, op.body, op.fds) == EPROTO);
        const size_t wrong = op.tail ? op.body - 1 : op.body + 1;
        CHECK(refused(rig, hello, code, wrong, op.fds) == EINVAL);        // the size is checked first
        CHECK(refused(rig, hello, code, op.body, op.fds + 1) == EPROTO);  // then Hello, then descriptors
    }
    for (uint16_t code : {uint16_t{0}, kFirstUnknown, uint16_t(kFirstUnknown + 1), uint16_t{0xffff}}) {
        INFO("op " << code);
        for (bool after_hello : {false, true}) {
            CHECK(refused(rig, after_hello, code, 0, 0) == EINVAL);
            CHECK(refused(rig, after_hello, code, sizeof(abi::HandleRequest), 1) == EINVAL);
        }
    }
    // The daemon serves the session that behaved throughout, and it alone.
    CHECK(rig.call(other, Op::QueryPort, nullptr, 0).header.status == 0);
    CHECK(rig.host->session_count() == 1);
}
