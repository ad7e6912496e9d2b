// CmOps over the CM session (daemon_calls.hpp). The CM's op numbers continue abi::Op's, so they
// travel through the same Connection::call.
#include "daemon_calls.hpp"

#include <unistd.h>

#include <cstring>
#include <span>

namespace rnic::rdmacm::calls {

namespace {

template <class T>
std::span<const uint8_t> bytes_of(const T& body) {
    return {reinterpret_cast<const uint8_t*>(&body), sizeof body};
}

int call(CmDevice& dev, abi::CmOp op, std::span<const uint8_t> body, void* reply, size_t reply_size,
         std::vector<int>* fds = nullptr) try {
    if (dev.conn == nullptr) return ENODEV;
    std::vector<uint8_t> out;
    const int rc = dev.conn->call(static_cast<abi::Op>(static_cast<uint16_t>(op)), body, {},
                                  reply != nullptr ? &out : nullptr, fds);
    if (rc != 0) return rc;
    if (reply != nullptr) {
        if (out.size() != reply_size) {
            if (fds != nullptr)
                for (int fd : *fds) close(fd);
            return EPROTO;
        }
        std::memcpy(reply, out.data(), reply_size);
    }
    return 0;
} catch (...) {  // allocation failure
    return ENOMEM;
}

int handle_call(CmDevice& dev, abi::CmOp op, uint32_t handle) {
    const abi::HandleRequest req{handle, 0};
    return call(dev, op, bytes_of(req), nullptr, 0);
}

}  // namespace

int create_channel(CmDevice& dev, uint32_t* handle, int* fd) try {
    abi::HandleReply reply{};
    std::vector<int> fds;
    const int rc = call(dev, abi::CmOp::CreateChannel, {}, &reply, sizeof reply, &fds);
    if (rc != 0) return rc;
    if (fds.size() != 2) {
        for (int f : fds) close(f);
        return EPROTO;
    }
    close(fds[1]);
    *handle = reply.handle;
    *fd = fds[0];
    return 0;
} catch (...) {
    return ENOMEM;
}

int destroy_channel(CmDevice& dev, uint32_t handle) {
    return handle_call(dev, abi::CmOp::DestroyChannel, handle);
}

int create_id(CmDevice& dev, uint32_t channel, uint32_t port_space, uint32_t qp_type, uint32_t* handle) {
    const abi::CmCreateIdRequest req{channel, port_space, qp_type, 0};
    abi::HandleReply reply{};
    const int rc = call(dev, abi::CmOp::CreateId, bytes_of(req), &reply, sizeof reply);
    if (rc == 0) *handle = reply.handle;
    return rc;
}

int destroy_id(CmDevice& dev, uint32_t handle) {
    const abi::HandleRequest req{handle, 0};
    abi::CmDestroyIdReply reply{};
    return call(dev, abi::CmOp::DestroyId, bytes_of(req), &reply, sizeof reply);
}

int migrate_id(CmDevice& dev, uint32_t handle, uint32_t channel) {
    const abi::CmMigrateIdRequest req{handle, channel};
    abi::CmDestroyIdReply reply{};
    return call(dev, abi::CmOp::MigrateId, bytes_of(req), &reply, sizeof reply);
}

int bind_addr(CmDevice& dev, uint32_t handle, const abi::CmAddress& addr, abi::CmQueryReply* reply) {
    const abi::CmAddrRequest req{handle, 0, addr};
    return call(dev, abi::CmOp::BindAddr, bytes_of(req), reply, sizeof *reply);
}

int resolve_addr(CmDevice& dev, uint32_t handle, const abi::CmAddress& src, const abi::CmAddress& dst,
                 uint32_t timeout_ms) {
    const abi::CmResolveAddrRequest req{handle, timeout_ms, src, dst};
    return call(dev, abi::CmOp::ResolveAddr, bytes_of(req), nullptr, 0);
}

int resolve_route(CmDevice& dev, uint32_t handle, uint32_t timeout_ms) {
    const abi::CmTimeoutRequest req{handle, timeout_ms};
    return call(dev, abi::CmOp::ResolveRoute, bytes_of(req), nullptr, 0);
}

int query(CmDevice& dev, uint32_t handle, abi::CmQueryReply* reply) {
    const abi::HandleRequest req{handle, 0};
    return call(dev, abi::CmOp::Query, bytes_of(req), reply, sizeof *reply);
}

int listen(CmDevice& dev, uint32_t handle, uint32_t backlog) {
    const abi::CmListenRequest req{handle, backlog};
    return call(dev, abi::CmOp::Listen, bytes_of(req), nullptr, 0);
}

int connect(CmDevice& dev, uint32_t handle, const abi::CmConnParam& param) {
    const abi::CmConnectRequest req{handle, 0, param};
    return call(dev, abi::CmOp::Connect, bytes_of(req), nullptr, 0);
}

int accept(CmDevice& dev, uint32_t handle, const abi::CmConnParam& param) {
    const abi::CmConnectRequest req{handle, 0, param};
    return call(dev, abi::CmOp::Accept, bytes_of(req), nullptr, 0);
}

int reject(CmDevice& dev, uint32_t handle, uint32_t reason, const void* private_data, uint32_t length) {
    abi::CmRejectRequest req{};
    if (length > sizeof req.private_data) return EINVAL;
    req.id = handle;
    req.reason = reason;
    req.private_data_len = length;
    if (length != 0) std::memcpy(req.private_data, private_data, length);
    return call(dev, abi::CmOp::Reject, bytes_of(req), nullptr, 0);
}

int disconnect(CmDevice& dev, uint32_t handle) {
    return handle_call(dev, abi::CmOp::Disconnect, handle);
}

int init_qp_attr(CmDevice& dev, uint32_t handle, uint32_t qp_state, abi::CmInitQpAttrReply* reply) {
    const abi::CmInitQpAttrRequest req{handle, qp_state};
    return call(dev, abi::CmOp::InitQpAttr, bytes_of(req), reply, sizeof *reply);
}

int notify(CmDevice& dev, uint32_t handle, uint32_t event) {
    const abi::CmNotifyRequest req{handle, event};
    return call(dev, abi::CmOp::Notify, bytes_of(req), nullptr, 0);
}

int set_option(CmDevice& dev, uint32_t handle, uint32_t level, uint32_t optname, uint32_t value) {
    const abi::CmSetOptionRequest req{handle, level, optname, value};
    return call(dev, abi::CmOp::SetOption, bytes_of(req), nullptr, 0);
}

int get_event(CmDevice& dev, uint32_t channel, abi::CmEvent* event) {
    const abi::HandleRequest req{channel, 0};
    return call(dev, abi::CmOp::GetEvent, bytes_of(req), event, sizeof *event);
}

int join_multicast(CmDevice& dev, uint32_t handle, uint32_t join_flags, const abi::CmAddress& group,
                   uint32_t* mc_handle) {
    const abi::CmJoinRequest req{handle, join_flags, group};
    abi::HandleReply reply{};
    const int rc = call(dev, abi::CmOp::JoinMulticast, bytes_of(req), &reply, sizeof reply);
    if (rc == 0) *mc_handle = reply.handle;
    return rc;
}

int leave_multicast(CmDevice& dev, uint32_t handle, const abi::CmAddress& group) {
    const abi::CmLeaveRequest req{handle, 0, group};
    return call(dev, abi::CmOp::LeaveMulticast, bytes_of(req), nullptr, 0);
}

int establish(CmDevice& dev, uint32_t handle) {
    return handle_call(dev, abi::CmOp::Establish, handle);
}

}  // namespace rnic::rdmacm::calls
