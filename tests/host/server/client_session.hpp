// A session as a client holds it, built with the raw client: a PD, a registered buffer, a CQ on
// a completion channel, and RC QPs whose rings the test writes and reads itself.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "raw_client.hpp"

namespace rnic::host::test {

inline constexpr uint32_t kLocalWrite = 1, kRemoteWrite = 2, kRemoteRead = 4;

struct ClientQp {
    uint32_t qpn = 0;
    abi::CreateQpReply reply{};
    std::unique_ptr<Mapping> rings;
    abi::RingView sq, rq;
    uint32_t sq_produced = 0, rq_produced = 0;
};

struct ClientCq {
    uint32_t handle = 0;
    std::unique_ptr<Mapping> ring_memory;
    abi::RingView ring;
    uint32_t consumed = 0;
    std::vector<abi::Cqe> poll();
};

struct MrKeys {
    uint32_t lkey = 0;
    uint32_t rkey = 0;
};

struct ClientSession {
    Rig& rig;
    RawClient c;
    uint32_t pd = 0;
    SharedBuffer buf{4 * 4096};
    uint32_t lkey = 0, rkey = 0;
    // The descriptors the daemon handed out: the channel's and the async events' sockets (a byte
    // per event) with their peers, the status page memfd and the session's kick eventfd.
    int channel_fd = -1, channel_wake_fd = -1;
    int async_fd = -1, async_wake_fd = -1;
    int status_fd = -1;
    int kick_fd = -1;
    std::unique_ptr<Mapping> async_ring;
    abi::DoorbellBits* doorbells = nullptr;  // in the async ring's memfd
    uint32_t async_size = 0;
    ClientCq cq;

    explicit ClientSession(Rig& r);
    ~ClientSession();
    ClientSession(const ClientSession&) = delete;
    ClientSession& operator=(const ClientSession&) = delete;

    // ShareSegment of `length` bytes of `fd` (kept open by the caller) as `segment_id`, and an
    // MR over all of it named by the address `addr`.
    MrKeys register_file(int fd, uint64_t length, uint32_t segment_id, const void* addr);

    ClientQp create_qp();
    int modify(uint32_t qpn, uint32_t mask, const abi::QpAttr& attr);
    // Moves the QP to INIT (the port's frames so far forgotten) and returns a ModifyQp to RTR
    // with a path to QP 0x99 at `peer` from GID `sgid_index`: the request that resolves a MAC.
    abi::ModifyQpRequest rtr_request(uint32_t qpn, const wire::Gid& peer, uint8_t sgid_index);
    // RESET -> INIT -> RTR -> RTS towards `dest` at `dgid`.
    void connect(uint32_t qpn, uint32_t dest, const wire::Gid& dgid, uint8_t sgid_index = 0);
    // Two QPs of this session connected to each other through `gid` (one of our own: loopback).
    void connect_pair(const ClientQp& a, const ClientQp& b, const wire::Gid& gid, uint8_t sgid_index = 0);

    void post_recv(ClientQp& qp, uint64_t wr_id, uint64_t addr, uint32_t length);
    void post_send(ClientQp& qp, uint64_t wr_id, uint8_t opcode, uint64_t addr, uint32_t length, uint32_t flags,
                   uint64_t remote = 0);
    // One WQE with one SGE, keys given.
    void post(ClientQp& qp, const abi::SendWqe& wqe, const abi::Sge& sge);
    // The doorbell: the QP's bit, as the client library sets it after publishing (post_* ring it).
    void ring(const ClientQp& qp);

    std::vector<abi::Cqe> wait_cqes(size_t n, int max_turns = 500);
    // Bytes queued on a notification socket, read without blocking.
    static long drain(int fd);
    std::vector<abi::AsyncEventEntry> async_events(uint32_t& consumed);
};

inline const wire::Gid kOwnGid = wire::Gid::from_ipv4(port::test::kSelf.ipv4);
inline const wire::Gid kOwnGid6 = wire::Gid::from_ipv6(port::test::kSelfIp6);  // GID 2

}  // namespace rnic::host::test
