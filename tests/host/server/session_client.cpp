#include "session_client.hpp"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>

namespace rnic::host::test {

using abi::Op;

SessionReply::~SessionReply() {
    for (int fd : fds)
        if (fd >= 0) close(fd);
}

SessionReply::SessionReply(SessionReply&& o) noexcept
    : header(o.header), body(std::move(o.body)), fds(std::exchange(o.fds, {})) {}

SessionReply& SessionReply::operator=(SessionReply&& o) noexcept {
    std::swap(header, o.header);
    std::swap(body, o.body);
    std::swap(fds, o.fds);
    return *this;
}

int SessionReply::take_fd(size_t i) {
    if (i >= fds.size()) return -1;
    return std::exchange(fds[i], -1);
}

std::shared_ptr<SharedMapping> SharedMapping::map(int fd, size_t bytes, bool writable) {
    auto m = std::make_shared<SharedMapping>();
    m->fd = fd;
    if (fd < 0 || bytes == 0) return nullptr;
    void* p = mmap(nullptr, bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return nullptr;
    m->data = static_cast<uint8_t*>(p);
    m->size = bytes;
    return m;
}

std::shared_ptr<SharedMapping> SharedMapping::create(size_t bytes, bool sealable) {
    const int fd = memfd_create("session-buffer", MFD_CLOEXEC | (sealable ? MFD_ALLOW_SEALING : 0u));
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
        if (fd >= 0) close(fd);
        return nullptr;
    }
    return map(fd, bytes);
}

SharedMapping::~SharedMapping() {
    if (data) munmap(data, size);
    if (fd >= 0) close(fd);
}

size_t CqRing::poll(std::vector<abi::Cqe>& out) {
    const uint32_t n = ring.ready(consumed);
    if (n == abi::RingView::kCorrupt) return 0;
    for (uint32_t i = 0; i < n; ++i) {
        abi::Cqe c;
        std::memcpy(&c, ring.entry(consumed++), sizeof c);
        out.push_back(c);
    }
    ring.release(consumed);
    return n;
}

SessionClient::SessionClient(ServiceRig& rig) : rig_(rig) {
    const std::string path = rig.host->socket_path();
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), std::min(path.size(), sizeof sa.sun_path - 1));
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        if (fd_ >= 0) close(fd_);
        throw std::runtime_error("cannot connect to " + path);
    }
}

SessionClient::~SessionClient() {
    disconnect();
    for (int fd : {async_fd, kick_fd})
        if (fd >= 0) close(fd);
}

void SessionClient::disconnect() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
}

std::optional<uint32_t> SessionClient::send(Op op, const void* body, size_t length, std::span<const int> fds) {
    std::vector<uint8_t> buf(sizeof(abi::MessageHeader) + length);
    const abi::MessageHeader h{
        abi::kMagic, abi::kAbiVersion, static_cast<uint16_t>(op), seq_++, static_cast<uint32_t>(buf.size()), 0, 0};
    std::memcpy(buf.data(), &h, sizeof h);
    if (length) std::memcpy(buf.data() + sizeof h, body, length);
    if (!send_raw(buf.data(), buf.size(), fds)) return std::nullopt;
    return h.seq;
}

bool SessionClient::send_raw(const void* data, size_t length, std::span<const int> fds) {
    if (fd_ < 0) return false;
    iovec iov{const_cast<void*>(data), length};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)]{};
    if (!fds.empty()) {
        const size_t n = std::min<size_t>(fds.size(), 8);
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * n);
    }
    return sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(length);
}

std::optional<SessionReply> SessionClient::receive() {
    if (fd_ < 0 || eof_) return std::nullopt;
    static thread_local std::vector<uint8_t> buf(abi::kMaxMessage);
    iovec iov{buf.data(), buf.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) eof_ = true;
        return std::nullopt;
    }
    SessionReply r;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            r.fds.push_back(fd);
        }
    if (n == 0) {
        eof_ = true;
        return std::nullopt;
    }
    if (static_cast<size_t>(n) < sizeof r.header) {
        r.header.status = EPROTO;  // never from a sane daemon: the caller sees a failed reply
        return r;
    }
    std::memcpy(&r.header, buf.data(), sizeof r.header);
    r.body.assign(buf.begin() + sizeof r.header, buf.begin() + n);
    return r;
}

std::optional<SessionReply> SessionClient::wait(uint32_t seq, int max_turns) {
    for (int i = 0; i <= max_turns; ++i) {
        while (auto r = receive())
            if (r->header.seq == seq) return r;
        if (!connected() || i == max_turns) break;
        rig_.turn();
    }
    return std::nullopt;
}

std::optional<SessionReply> SessionClient::call(Op op, const void* body, size_t length, std::span<const int> fds,
                                                int max_turns) {
    const auto seq = send(op, body, length, fds);
    if (!seq) return std::nullopt;
    return wait(*seq, max_turns);
}

bool SessionClient::drain() {
    while (receive()) {
    }
    return connected();
}

namespace {

int status_of(const std::optional<SessionReply>& r) {
    return r ? r->status() : kNoReply;
}

}  // namespace

int SessionClient::hello() {
    const abi::HelloRequest req{static_cast<uint32_t>(getpid()), 0};
    auto r = call(Op::Hello, req);
    if (!r || r->status() != 0 || r->fds.size() != 5)
        return r && r->status() != 0 ? r->status() : r ? EPROTO : kNoReply;
    // The async event socket; the daemon's end of it (for re-arming a woken application) is not
    // needed here.
    async_fd = r->take_fd(3);
    const auto h = r->as<abi::HelloReply>();
    session_id = h.session_id;
    status_memory = SharedMapping::map(r->take_fd(0), h.status_page_size, false);
    kick_fd = r->take_fd(1);
    const size_t ring_end = abi::ring_bytes(h.async_ring_size, sizeof(abi::AsyncEventEntry));
    if (!abi::is_power_of_two(h.async_ring_size) || h.doorbell_offset < ring_end || h.doorbell_offset % 64)
        return EPROTO;
    async_memory = SharedMapping::map(r->take_fd(2), h.doorbell_offset + sizeof(abi::DoorbellBits));
    if (!async_memory || !status_memory) return EPROTO;
    async_ring = abi::RingView(async_memory->data, h.async_ring_size, sizeof(abi::AsyncEventEntry));
    doorbells = reinterpret_cast<abi::DoorbellBits*>(async_memory->data + h.doorbell_offset);
    return 0;
}

int SessionClient::alloc_pd(uint32_t& pd) {
    auto r = call(Op::AllocPd, nullptr, 0);
    if (r && r->status() == 0) pd = r->as<abi::HandleReply>().handle;
    return status_of(r);
}

int SessionClient::register_buffer(uint32_t pd, size_t bytes, uint32_t segment_id, uint32_t access, Buffer& out,
                                   bool sealable) {
    out.memory = SharedMapping::create(bytes, sealable);
    if (!out.memory) return ENOMEM;
    out.segment_id = segment_id;
    const int fd = out.memory->fd;
    auto r = call(Op::ShareSegment, abi::ShareSegmentRequest{segment_id, 0, bytes}, std::span<const int>(&fd, 1));
    if (status_of(r) != 0) return status_of(r);
    struct {
        abi::RegMrRequest req;
        abi::SegmentRun run;
    } mr{};
    mr.req = {pd, access, out.iova(), bytes, out.iova(), 0, 1};
    mr.run = {segment_id, 0, 0, bytes};
    r = call(Op::RegMr, mr);
    if (r && r->status() == 0) {
        out.lkey = r->as<abi::RegMrReply>().lkey;
        out.rkey = r->as<abi::RegMrReply>().rkey;
    }
    return status_of(r);
}

int SessionClient::create_channel(uint32_t& handle) {
    // The daemon makes the channel's notification socket and returns both ends; closed here.
    auto r = call(Op::CreateCompChannel, nullptr, 0);
    if (r && r->status() == 0) handle = r->as<abi::HandleReply>().handle;
    return status_of(r);
}

int SessionClient::create_cq(uint32_t cqe, uint32_t channel, CqRing& out) {
    auto r = call(Op::CreateCq, abi::CreateCqRequest{cqe, channel, 0, 0});
    if (status_of(r) != 0) return status_of(r);
    out.reply = r->as<abi::CreateCqReply>();
    out.handle = out.reply.handle;
    if (!abi::is_power_of_two(out.reply.ring_size) ||
        out.reply.ring_bytes < abi::ring_bytes(out.reply.ring_size, sizeof(abi::Cqe)))
        return EPROTO;
    out.memory = SharedMapping::map(r->take_fd(0), out.reply.ring_bytes);
    if (!out.memory) return EPROTO;
    out.ring = abi::RingView(out.memory->data, out.reply.ring_size, sizeof(abi::Cqe));
    out.consumed = 0;
    return 0;
}

int SessionClient::create_qp(const abi::CreateQpRequest& req, QpRings& out) {
    auto r = call(Op::CreateQp, req);
    if (status_of(r) != 0) return status_of(r);
    const auto q = r->as<abi::CreateQpReply>();
    out.reply = q;
    out.qpn = q.qpn;
    out.qp_type = req.qp_type;
    out.sq_produced = out.rq_produced = 0;
    if (!abi::is_power_of_two(q.sq_size) || q.sq_stride < abi::kSendWqeHeader ||
        q.ring_bytes < abi::ring_bytes(q.sq_size, q.sq_stride) ||
        (q.rq_size != 0 && (!abi::is_power_of_two(q.rq_size) || q.rq_stride < sizeof(abi::RecvWqe) ||
                            q.rq_offset < abi::ring_bytes(q.sq_size, q.sq_stride) ||
                            q.ring_bytes < q.rq_offset + abi::ring_bytes(q.rq_size, q.rq_stride))))
        return EPROTO;
    out.memory = SharedMapping::map(r->take_fd(0), q.ring_bytes);
    if (!out.memory) return EPROTO;
    out.sq = abi::RingView(out.memory->data, q.sq_size, q.sq_stride);
    out.rq = q.rq_size ? abi::RingView(out.memory->data + q.rq_offset, q.rq_size, q.rq_stride) : abi::RingView{};
    return 0;
}

int SessionClient::create_srq(const abi::CreateSrqRequest& req, SrqRing& out) {
    auto r = call(Op::CreateSrq, req);
    if (status_of(r) != 0) return status_of(r);
    const auto s = r->as<abi::CreateSrqReply>();
    out.reply = s;
    out.handle = s.handle;
    out.produced = 0;
    if (!abi::is_power_of_two(s.ring_size) || s.ring_stride < sizeof(abi::RecvWqe) ||
        s.ring_bytes < abi::ring_bytes(s.ring_size, s.ring_stride))
        return EPROTO;
    out.memory = SharedMapping::map(r->take_fd(0), s.ring_bytes);
    if (!out.memory) return EPROTO;
    out.ring = abi::RingView(out.memory->data, s.ring_size, s.ring_stride);
    return 0;
}

int SessionClient::create_ah(uint32_t pd, const wire::Gid& dgid, uint8_t sgid_index, uint32_t& ah) {
    abi::CreateAhRequest req{};
    req.pd = pd;
    std::memcpy(req.av.dgid, dgid.raw.data(), 16);
    req.av.sgid_index = sgid_index;
    req.av.is_global = 1;
    req.av.port_num = 1;
    auto r = call(Op::CreateAh, req);
    if (r && r->status() == 0) ah = r->as<abi::HandleReply>().handle;
    return status_of(r);
}

int SessionClient::modify_qp(uint32_t qpn, uint32_t mask, const abi::QpAttr& attr) {
    return status_of(call(Op::ModifyQp, abi::ModifyQpRequest{qpn, mask, attr}));
}

int SessionClient::query_qp_state(uint32_t qpn, uint32_t& state) {
    auto r = call(Op::QueryQp, abi::QueryQpRequest{qpn, 0});
    if (r && r->status() == 0) state = r->as<abi::QueryQpReply>().attr.qp_state;
    return status_of(r);
}

int SessionClient::connect(const QpRings& qp, uint32_t dest, const wire::Gid& dgid, uint8_t sgid_index, uint32_t qkey) {
    // enum ibv_qp_attr_mask
    constexpr uint32_t kState = 1, kAccess = 8, kPkey = 16, kPort = 32, kQkey = 64, kAv = 128, kPathMtu = 256,
                       kTimeout = 512, kRetry = 1024, kRnrRetry = 2048, kRqPsn = 4096, kMaxQpRdAtomic = 8192,
                       kMinRnrTimer = 1u << 15, kSqPsn = 1u << 16, kMaxDestRdAtomic = 1u << 17, kDestQpn = 1u << 20;
    const bool ud = qp.qp_type == 4, rc = qp.qp_type == 2;
    abi::QpAttr a{};
    a.qp_state = 1;
    a.port_num = 1;
    a.qkey = qkey;
    a.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | (rc ? kAccessRemoteAtomic : 0);
    if (int e = modify_qp(qp.qpn, kState | kPkey | kPort | (ud ? kQkey : kAccess), a)) return e;
    a = {};
    a.qp_state = 2;
    uint32_t mask = kState;
    if (!ud) {
        a.path_mtu = 3;  // IBV_MTU_1024
        a.dest_qp_num = dest;
        a.rq_psn = 100;
        std::memcpy(a.ah_attr.dgid, dgid.raw.data(), 16);
        a.ah_attr.sgid_index = sgid_index;
        a.ah_attr.hop_limit = 64;
        a.ah_attr.is_global = 1;
        a.ah_attr.port_num = 1;
        mask |= kAv | kPathMtu | kDestQpn | kRqPsn;
        if (rc) {
            a.max_dest_rd_atomic = 1;
            a.min_rnr_timer = 1;
            mask |= kMaxDestRdAtomic | kMinRnrTimer;
        }
    }
    if (int e = modify_qp(qp.qpn, mask, a)) return e;
    a = {};
    a.qp_state = 3;
    a.sq_psn = 100;
    mask = kState | kSqPsn;
    if (rc) {
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 1;
        mask |= kTimeout | kRetry | kRnrRetry | kMaxQpRdAtomic;
    }
    return modify_qp(qp.qpn, mask, a);
}

int SessionClient::destroy(Op op, uint32_t handle) {
    return status_of(call(op, abi::HandleRequest{handle, 0}));
}

void SessionClient::post_send(QpRings& qp, const abi::SendWqe& wqe, std::span<const abi::Sge> sges) {
    auto* slot = static_cast<uint8_t*>(qp.sq.entry(qp.sq_produced));
    std::memcpy(slot, &wqe, sizeof wqe);
    const size_t room = (qp.sq.entry_size() - abi::kSendWqeHeader) / sizeof(abi::Sge);
    if (!sges.empty())
        std::memcpy(slot + abi::kSendWqeHeader, sges.data(), std::min(room, sges.size()) * sizeof(abi::Sge));
    qp.sq.publish(++qp.sq_produced);
    ring_doorbell(qp.reply.doorbell);
}

namespace {

void write_recv(const abi::RingView& ring, uint32_t index, uint64_t wr_id, std::span<const abi::Sge> sges) {
    auto* slot = static_cast<uint8_t*>(ring.entry(index));
    const size_t room = (ring.entry_size() - sizeof(abi::RecvWqe)) / sizeof(abi::Sge);
    const size_t n = std::min(room, sges.size());
    const abi::RecvWqe w{wr_id, static_cast<uint32_t>(n), 0};
    std::memcpy(slot, &w, sizeof w);
    if (n) std::memcpy(slot + sizeof w, sges.data(), n * sizeof(abi::Sge));
}

}  // namespace

void SessionClient::post_recv(QpRings& qp, uint64_t wr_id, std::span<const abi::Sge> sges) {
    if (!qp.rq.valid()) return;
    write_recv(qp.rq, qp.rq_produced, wr_id, sges);
    qp.rq.publish(++qp.rq_produced);
    ring_doorbell(qp.reply.doorbell);
}

void SessionClient::post_srq_recv(SrqRing& srq, uint64_t wr_id, std::span<const abi::Sge> sges) {
    write_recv(srq.ring, srq.produced, wr_id, sges);
    srq.ring.publish(++srq.produced);
    ring_doorbell(srq.reply.doorbell);
}

void SessionClient::ring_doorbell(uint32_t slot) {
    if (doorbells && slot < abi::kDoorbellSlots) abi::ring_doorbell_slot(*doorbells, slot);
}

std::vector<abi::Cqe> SessionClient::wait_cqes(CqRing& cq, size_t n, int max_turns, uint64_t advance_ns) {
    std::vector<abi::Cqe> all;
    cq.poll(all);
    for (int i = 0; i < max_turns && all.size() < n; ++i) {
        rig_.turn(advance_ns);
        cq.poll(all);
    }
    return all;
}

std::vector<abi::AsyncEventEntry> SessionClient::async_events() {
    std::vector<abi::AsyncEventEntry> out;
    if (!async_ring.valid()) return out;
    const uint32_t n = async_ring.ready(async_consumed);
    if (n == abi::RingView::kCorrupt) return out;
    for (uint32_t i = 0; i < n; ++i) {
        abi::AsyncEventEntry e;
        std::memcpy(&e, async_ring.entry(async_consumed++), sizeof e);
        out.push_back(e);
    }
    async_ring.release(async_consumed);
    return out;
}

}  // namespace rnic::host::test
