#include "fake_daemon.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace rnic::test {

namespace abi = host::abi;

namespace {

size_t page_round(size_t b) {
    const size_t ps = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (b + ps - 1) / ps * ps;
}

SharedRing make_memory(size_t bytes) {
    SharedRing r;
    r.bytes = page_round(bytes);
    r.fd = memfd_create("fake-rnicd", MFD_CLOEXEC);
    if (r.fd < 0 || ftruncate(r.fd, static_cast<off_t>(r.bytes)) != 0) throw std::runtime_error("memfd");
    r.base = mmap(nullptr, r.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
    if (r.base == MAP_FAILED) throw std::runtime_error("mmap");
    return r;
}

// Like rnicd's notification sockets: the daemon's end and the client's.
std::pair<int, int> socket_pair() {
    int p[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) != 0 || fcntl(p[0], F_SETFL, O_NONBLOCK) != 0)
        throw std::runtime_error("socketpair");
    return {p[0], p[1]};
}

void send_byte(int fd) {
    const char byte = 1;
    (void)!send(fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void init_header(void* base, uint32_t entries, uint32_t entry_size) {
    auto* h = static_cast<abi::RingHeader*>(base);
    h->size = entries;
    h->entry_size = entry_size;
    h->entries_offset = sizeof(abi::RingHeader);
}

}  // namespace

SharedRing make_ring(uint32_t entries, uint32_t entry_size, size_t bytes) {
    SharedRing r = make_memory(bytes != 0 ? bytes : abi::ring_bytes(entries, entry_size));
    init_header(r.base, entries, entry_size);
    return r;
}

FakeDaemon::FakeDaemon(int fd, std::string stats) : stats_json(std::move(stats)), fd_(fd) {
    status = make_memory(sizeof(abi::StatusPage));
    // The async ring, then the doorbell bits at the next page (HelloReply::doorbell_offset).
    async_ring = make_ring(256, sizeof(abi::AsyncEventEntry),
                           page_round(abi::ring_bytes(256, sizeof(abi::AsyncEventEntry))) + sizeof(abi::DoorbellBits));
    thread_ = std::thread([this] { run(); });
}

void FakeDaemon::die() {
    if (fd_ < 0) return;
    shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    close(fd_);
    fd_ = -1;
}

FakeDaemon::~FakeDaemon() {
    die();
    auto drop = [](SharedRing& r) {
        if (r.base != nullptr) munmap(r.base, r.bytes);
        if (r.fd >= 0) close(r.fd);
    };
    for (auto& [k, r] : cqs) drop(r);
    for (auto& [k, r] : qps) drop(r);
    for (auto& [k, r] : srqs) drop(r);
    for (auto& [k, f] : segment_fds) close(f);
    for (auto& [k, f] : channel_fds) close(f);
    drop(status);
    drop(async_ring);
    if (async_notify_fd >= 0) close(async_notify_fd);
    if (kick_fd >= 0) close(kick_fd);
}

void FakeDaemon::run() {
    std::vector<uint8_t> buf(abi::kMaxMessage);
    for (;;) {
        iovec iov{buf.data(), buf.size()};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * abi::kMaxFdsPerMessage)];
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        const ssize_t n = recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
        if (n <= 0) return;
        std::vector<int> fds;
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
            const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < count; ++i) {
                int f;
                std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
                fds.push_back(f);
            }
        }
        abi::MessageHeader h{};
        if (static_cast<size_t>(n) < sizeof h) return;
        std::memcpy(&h, buf.data(), sizeof h);
        if (h.magic != abi::kMagic || h.length != static_cast<size_t>(n)) return;
        std::vector<uint8_t> body(buf.begin() + sizeof h, buf.begin() + n);
        std::lock_guard lock(mutex);
        ops.push_back(h.op);
        answer(h, body, fds);
        for (int f : fds)
            if (f >= 0) close(f);
    }
}

void FakeDaemon::reply(const abi::MessageHeader& req, int st, const void* body, size_t len, std::vector<int> fds) {
    abi::MessageHeader h = req;
    h.status = st;
    if (st != 0) len = 0;
    h.length = static_cast<uint32_t>(sizeof h + len);
    std::vector<uint8_t> out(h.length);
    std::memcpy(out.data(), &h, sizeof h);
    if (len != 0) std::memcpy(out.data() + sizeof h, body, len);
    iovec iov{out.data(), out.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * abi::kMaxFdsPerMessage)] = {};
    if (st == 0 && !fds.empty()) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    (void)!sendmsg(fd_, &msg, MSG_NOSIGNAL);
}

void FakeDaemon::answer(const abi::MessageHeader& h, const std::vector<uint8_t>& body, std::vector<int>& fds) {
    const auto op = static_cast<abi::Op>(h.op);
    if (silent_ops.count(h.op) != 0) return;  // a wedged daemon: the request is never answered
    if (const auto it = fail_ops.find(h.op); it != fail_ops.end()) {
        const int e = it->second;
        fail_ops.erase(it);
        return reply(h, e, nullptr, 0);
    }
    auto take = [&fds] {
        const int f = fds.empty() ? -1 : fds.front();
        if (!fds.empty()) fds.erase(fds.begin());
        return f;
    };
    auto handle_of = [&body] {
        abi::HandleRequest r{};
        std::memcpy(&r, body.data(), std::min(body.size(), sizeof r));
        return r.handle;
    };
    switch (op) {
        case abi::Op::Hello: {
            abi::HelloReply r{};
            std::strcpy(r.device_name, "rnic0");
            r.device.max_qp_wr = 1024;
            r.device.phys_port_cnt = 1;
            r.port.state = 4;
            r.port.active_mtu = 3;
            const uint8_t mac[6] = {2, 0, 0, 0, 0, 1};
            std::memcpy(r.mac, mac, 6);
            r.gid_count = 2;
            r.gids[1][10] = 0xff;
            r.gids[1][11] = 0xff;
            r.gids[1][12] = 10;
            r.gid_types[0] = r.gid_types[1] = abi::kGidTypeRoceV2;
            r.async_ring_size = 256;
            r.status_page_size = static_cast<uint32_t>(status.bytes);
            r.session_id = 7;
            r.doorbell_offset = static_cast<uint32_t>(page_round(abi::ring_bytes(256, sizeof(abi::AsyncEventEntry))));
            const auto [async_daemon, async_client] = socket_pair();
            kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
            async_notify_fd = async_daemon;
            reply(h, 0, &r, sizeof r, {status.fd, kick_fd, async_ring.fd, async_client, async_daemon});
            close(async_client);
            return;
        }
        case abi::Op::AllocPd:
        case abi::Op::CreateAh: {
            const abi::HandleReply r{next_handle_++, 0};
            return reply(h, 0, &r, sizeof r);
        }
        case abi::Op::CreateCompChannel: {
            const abi::HandleReply r{next_handle_++, 0};
            const auto [daemon_end, client_end] = socket_pair();
            channel_fds[r.handle] = daemon_end;
            reply(h, 0, &r, sizeof r, {client_end, daemon_end});
            close(client_end);
            return;
        }
        case abi::Op::ShareSegment: {
            abi::ShareSegmentRequest r{};
            std::memcpy(&r, body.data(), sizeof r);
            segment_fds[r.segment_id] = take();
            segment_lengths[r.segment_id] = r.length;
            return reply(h, 0, nullptr, 0);
        }
        case abi::Op::ReleaseSegment: {
            const uint32_t id = handle_of();
            released_segments.push_back(id);
            if (const auto it = segment_fds.find(id); it != segment_fds.end()) {
                close(it->second);
                segment_fds.erase(it);
            }
            return reply(h, 0, nullptr, 0);
        }
        case abi::Op::RegMr: {
            std::memcpy(&last_reg, body.data(), sizeof last_reg);
            last_runs.resize(last_reg.run_count);
            std::memcpy(last_runs.data(), body.data() + sizeof last_reg, last_runs.size() * sizeof(abi::SegmentRun));
            const abi::RegMrReply r{next_handle_, next_handle_ + 0x100};
            ++next_handle_;
            return reply(h, 0, &r, sizeof r);
        }
        case abi::Op::CreateCq: {
            abi::CreateCqRequest req{};
            std::memcpy(&req, body.data(), sizeof req);
            const uint32_t size = abi::round_up_power_of_two(req.cqe);
            SharedRing ring = make_ring(size, sizeof(abi::Cqe));
            const abi::CreateCqReply r{next_handle_++, req.cqe, size, static_cast<uint32_t>(ring.bytes)};
            cqs[r.handle] = ring;
            return reply(h, 0, &r, sizeof r, {ring.fd});
        }
        case abi::Op::CreateSrq: {
            abi::CreateSrqRequest req{};
            std::memcpy(&req, body.data(), sizeof req);
            const uint32_t size = abi::round_up_power_of_two(req.max_wr);
            const uint32_t stride = abi::recv_stride(req.max_sge);
            SharedRing ring = make_ring(size, stride);
            const abi::CreateSrqReply r{
                next_handle_++,   req.max_wr, req.max_sge, size, stride, static_cast<uint32_t>(ring.bytes),
                next_doorbell_++, 0};
            srqs[r.handle] = ring;
            return reply(h, 0, &r, sizeof r, {ring.fd});
        }
        case abi::Op::CreateQp: {
            abi::CreateQpRequest req{};
            std::memcpy(&req, body.data(), sizeof req);
            abi::CreateQpReply r{};
            r.qpn = next_qpn_++;
            r.cap = req.cap;
            r.cap.max_inline_data = std::max(req.cap.max_inline_data, 64u);  // grant more, as rdma-core may
            r.sq_size = abi::round_up_power_of_two(req.cap.max_send_wr);
            r.sq_stride = abi::send_stride(r.cap.max_send_sge, r.cap.max_inline_data);
            const size_t sq_bytes = page_round(abi::ring_bytes(r.sq_size, r.sq_stride));
            size_t total = sq_bytes;
            if (req.srq == 0) {
                r.rq_size = abi::round_up_power_of_two(req.cap.max_recv_wr);
                r.rq_stride = abi::recv_stride(req.cap.max_recv_sge);
                r.rq_offset = static_cast<uint32_t>(sq_bytes);
                total += page_round(abi::ring_bytes(r.rq_size, r.rq_stride));
            }
            SharedRing ring = make_ring(r.sq_size, r.sq_stride, total);
            if (req.srq == 0) init_header(static_cast<uint8_t*>(ring.base) + r.rq_offset, r.rq_size, r.rq_stride);
            r.ring_bytes = static_cast<uint32_t>(ring.bytes);
            r.doorbell = next_doorbell_++;
            qps[r.qpn] = ring;
            qp_replies[r.qpn] = r;
            return reply(h, 0, &r, sizeof r, {ring.fd});
        }
        case abi::Op::ModifyQp: {
            abi::ModifyQpRequest req{};
            std::memcpy(&req, body.data(), sizeof req);
            if ((req.attr_mask & 1) && req.attr.qp_state == 0) {  // RESET: the rings start over
                const auto& r = qp_replies.at(req.qpn);
                auto* sq = static_cast<abi::RingHeader*>(qps.at(req.qpn).base);
                sq->producer = 0;
                sq->consumer = 0;
                if (r.rq_size != 0) {
                    auto* rq =
                        reinterpret_cast<abi::RingHeader*>(static_cast<uint8_t*>(qps.at(req.qpn).base) + r.rq_offset);
                    rq->producer = 0;
                    rq->consumer = 0;
                }
            }
            return reply(h, 0, nullptr, 0);
        }
        case abi::Op::QueryPort: {
            abi::PortAttr p{};
            p.state = 4;
            p.active_mtu = 3;
            p.max_mtu = 5;
            p.link_layer = 2;
            return reply(h, 0, &p, sizeof p);
        }
        case abi::Op::QuerySrq: {
            const abi::QuerySrqReply r{16, 2, 0, 0};
            return reply(h, 0, &r, sizeof r);
        }
        case abi::Op::QueryQp: {
            abi::QueryQpReply r{};
            r.attr.qp_state = 3;
            return reply(h, 0, &r, sizeof r);
        }
        case abi::Op::Stats:
            return reply(h, 0, stats_json.data(), stats_json.size());
        case abi::Op::SetLogLevel: {
            abi::SetLogLevelRequest req{};
            std::memcpy(&req, body.data(), sizeof req);
            const std::string level(req.level, strnlen(req.level, sizeof req.level));
            if (level != "debug" && level != "info") return reply(h, EINVAL, nullptr, 0);
            log_level = level;
            return reply(h, 0, nullptr, 0);
        }
        default:
            return reply(h, 0, nullptr, 0);  // destroys, dereg, modify SRQ
    }
}

void FakeDaemon::push_cqe(uint32_t cq, const abi::Cqe& cqe) {
    std::lock_guard lock(mutex);
    SharedRing& r = cqs.at(cq);
    auto* h = static_cast<abi::RingHeader*>(r.base);
    abi::RingView view(r.base, h->size, h->entry_size);
    const uint32_t p = h->producer.load();
    std::memcpy(view.entry(p), &cqe, sizeof cqe);
    view.publish(p + 1);
}

void FakeDaemon::raise_cq_event(uint32_t cq) {
    std::lock_guard lock(mutex);
    auto* h = static_cast<abi::RingHeader*>(cqs.at(cq).base);
    h->arm.store(0);
    h->events.fetch_add(1);
    for (auto& [handle, fd] : channel_fds) send_byte(fd);
}

void FakeDaemon::push_async_event(uint32_t type, uint32_t object) {
    std::lock_guard lock(mutex);
    auto* h = static_cast<abi::RingHeader*>(async_ring.base);
    abi::RingView view(async_ring.base, h->size, h->entry_size);
    const uint32_t p = h->producer.load();
    const abi::AsyncEventEntry e{type, object};
    std::memcpy(view.entry(p), &e, sizeof e);
    view.publish(p + 1);
    send_byte(async_notify_fd);
}

long FakeDaemon::take_kicks() {
    uint64_t count = 0;
    return read(kick_fd, &count, sizeof count) == sizeof count ? static_cast<long>(count) : 0;
}

}  // namespace rnic::test
