// The stream's data path: RDMA WRITE WITH IMMEDIATE into the peer's receive ring (the target
// SGE the peer announced), the completions that say what arrived, credits (receives the peer
// may use, halves of our ring it may fill) given back as the application reads, and the wait
// for any of it; rsend/rrecv and their variants.
#include <endian.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

#include "export.hpp"
#include "rsocket.hpp"

namespace rnic::rdmacm::rsock {

namespace {

// Where received bytes go: the application's iovecs, in order.
struct Sink {
    const iovec* iov = nullptr;
    size_t count = 0;
    size_t index = 0;
    size_t offset = 0;
    void put(const uint8_t* p, size_t n) {
        while (n != 0 && index < count) {
            const size_t room = iov[index].iov_len - offset;
            const size_t k = std::min(room, n);
            if (k != 0) std::memcpy(static_cast<uint8_t*>(iov[index].iov_base) + offset, p, k);
            p += k;
            n -= k;
            offset += k;
            if (offset == iov[index].iov_len) {
                ++index;
                offset = 0;
            }
        }
    }
};

int post(Rsocket& rs, ibv_wr_opcode opcode, ibv_sge* sgl, int nsge, uint32_t msg, unsigned flags, uint64_t addr,
         uint32_t rkey) {
    ibv_send_wr wr{};
    wr.wr_id = msg;
    wr.sg_list = sgl;
    wr.num_sge = nsge;
    wr.opcode = opcode;
    wr.send_flags = flags;
    if (opcode == IBV_WR_RDMA_WRITE_WITH_IMM) wr.imm_data = htobe32(msg);
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(rs.cm_id->qp, &wr, &bad);
    return rc == 0 ? 0 : fail(rc);
}

void failed(Rsocket& rs, int error) {
    if (rs.in(st::connected)) {
        rs.set_state(st::error);
        rs.err.store(error);
    }
}

// A new half of our ring for the peer (or just more receives): WRITE WITH IMMEDIATE of the SGE
// into the peer's target list, the immediate carrying the sequence number it may send up to.
void send_credits(Rsocket& rs) {
    ++rs.ctrl_seqno;
    rs.rseq_comp = static_cast<uint16_t>(rs.rseq_no + (rs.rq_size >> 1));
    const uint32_t msg = make_imm(Op::Sgl, static_cast<uint32_t>(rs.rseq_no) + rs.rq_size);
    const uint32_t half = rs.rbuf_size >> 1;
    int rc = 0;
    if (rs.rbuf_bytes_avail >= half) {
        WireSge sge{reinterpret_cast<uintptr_t>(rs.rbuf.data + rs.rbuf_free_offset), rs.rmr->rkey, half};
        if (rs.swap_sgl) sge = swap_sge(sge);
        ibv_sge local{reinterpret_cast<uintptr_t>(&sge), sizeof sge, 0};
        unsigned flags = IBV_SEND_INLINE;
        if (rs.sq_inline < sizeof sge) {
            // One slot per control message in flight, after the send buffer.
            uint8_t* slot = rs.sbuf.data + rs.sbuf_size + kMaxCtrlMsg * (rs.ctrl_seqno & (kQpCtrlSize - 1));
            std::memcpy(slot, &sge, sizeof sge);
            local = {reinterpret_cast<uintptr_t>(slot), sizeof sge, rs.smr->lkey};
            flags = 0;
        }
        rc = post(rs, IBV_WR_RDMA_WRITE_WITH_IMM, &local, 1, msg, flags,
                  rs.remote_sgl.addr + sizeof(WireSge) * rs.remote_sge, rs.remote_sgl.key);
        rs.rbuf_bytes_avail -= half;
        rs.rbuf_free_offset += half;
        if (rs.rbuf_free_offset >= rs.rbuf_size) rs.rbuf_free_offset = 0;
        if (++rs.remote_sge == rs.remote_sgl.length) rs.remote_sge = 0;
    } else {
        rc = post_ctrl(rs, msg);
    }
    if (rc != 0) failed(rs, errno);
}

bool give_credits(const Rsocket& rs) {
    return (rs.rbuf_bytes_avail >= (rs.rbuf_size >> 1) || seq_reached(rs.rseq_no, rs.rseq_comp)) && ctrl_avail(rs) &&
           rs.in(st::connected);
}

void received(Rsocket& rs, uint32_t msg) {
    const uint32_t arg = imm_arg(msg);
    switch (imm_op(msg)) {
        case Op::Sgl:
            rs.sseq_comp = static_cast<uint16_t>(arg);
            break;
        case Op::IomapSgl:
            // Its receive is free again at once: counted as consumed (rdma-core never counts
            // it, and so gives one credit less per iomap; the peer cannot tell).
            ++rs.rseq_no;
            break;
        case Op::Ctrl:
            if (arg == static_cast<uint32_t>(Ctrl::Disconnect)) {
                rs.set_state(st::disconnected);
            } else if (arg == static_cast<uint32_t>(Ctrl::Shutdown)) {
                if (rs.in(st::writable))
                    rs.clear_state(st::readable);
                else
                    rs.set_state(st::disconnected);
            }
            break;
        case Op::Data: {
            const size_t next = (rs.rmsg_tail + 1) % rs.rmsg.size();
            // More than the credits allow, or more than a half ring: a peer that does not keep
            // the protocol loses its connection, never our memory.
            if (next == rs.rmsg_head || arg > (rs.rbuf_size >> 1)) {
                failed(rs, EPROTO);
                break;
            }
            rs.rmsg[rs.rmsg_tail] = arg;
            rs.rmsg_tail = next;
            break;
        }
        default:  // plain writes never reach the receive queue; reserved ops are not sent
            break;
    }
}

void sent(Rsocket& rs, uint32_t msg, ibv_wc_status status) {
    switch (imm_op(msg)) {
        case Op::Sgl:
            ++rs.ctrl_max_seqno;
            break;
        case Op::Ctrl:
            ++rs.ctrl_max_seqno;
            if (imm_arg(msg) == static_cast<uint32_t>(Ctrl::Disconnect)) rs.set_state(st::disconnected);
            break;
        case Op::IomapSgl:
            ++rs.sqe_avail;
            rs.sbuf_bytes_avail += sizeof(WireIomap);
            break;
        default:
            ++rs.sqe_avail;
            rs.sbuf_bytes_avail += imm_arg(msg);
            break;
    }
    if (status != IBV_WC_SUCCESS) failed(rs, EIO);
}

// Copies `n` bytes of the ring from rbuf_offset on (wrapping), freeing them.
void copy_out(Rsocket& rs, Sink& sink, uint32_t n) {
    while (n != 0) {
        const uint32_t k = std::min(n, rs.rbuf_size - rs.rbuf_offset);
        sink.put(rs.rbuf.data + rs.rbuf_offset, k);
        rs.rbuf_offset += k;
        if (rs.rbuf_offset == rs.rbuf_size) rs.rbuf_offset = 0;
        rs.rbuf_bytes_avail += k;
        n -= k;
    }
}

size_t peek(const Rsocket& rs, Sink& sink, size_t want) {
    size_t head = rs.rmsg_head;
    uint32_t offset = rs.rbuf_offset;
    size_t done = 0;
    while (done < want && head != rs.rmsg_tail) {
        uint32_t n = static_cast<uint32_t>(std::min<size_t>(want - done, rs.rmsg[head]));
        done += n;
        head = (head + 1) % rs.rmsg.size();
        while (n != 0) {
            const uint32_t k = std::min(n, rs.rbuf_size - offset);
            sink.put(rs.rbuf.data + offset, k);
            offset = (offset + k) % rs.rbuf_size;
            n -= k;
        }
    }
    return done;
}

bool has_endpoint(const Rsocket& rs) {
    return rs.cm_id != nullptr && rs.cm_id->qp != nullptr && rs.in(st::connected | st::disconnected | st::error);
}

// Sends one data message of `length` bytes into the current target SGE. The SGE is advanced
// before the write goes out: once the data lands, the peer may reuse the entry at once.
int write_data(Rsocket& rs, Source& src, uint32_t length) {
    ++rs.sseq_no;
    --rs.sqe_avail;
    rs.sbuf_bytes_avail -= length;
    volatile WireSge& target = rs.target_sgl()[rs.target_sge];
    const uint64_t addr = target.addr;
    const uint32_t rkey = target.key;
    target.addr = addr + length;
    target.length = target.length - length;
    if (target.length == 0 && ++rs.target_sge == kTargetSgeCount) rs.target_sge = 0;
    return write_chunk(rs, src, length, true, make_imm(Op::Data, length), addr, rkey);
}

// The next chunk of a send: small at first so the wire starts early, then larger.
uint32_t next_chunk(size_t left, uint32_t& olen) {
    if (olen >= left) return static_cast<uint32_t>(left);
    const uint32_t n = olen;
    if (olen < kMaxTransfer) olen <<= 1;
    return n;
}

bool total_length(const iovec* iov, size_t count, size_t* total) {
    size_t sum = 0;
    for (size_t i = 0; i < count; ++i) {
        if (iov[i].iov_len > static_cast<size_t>(SSIZE_MAX) - sum) return false;
        sum += iov[i].iov_len;
    }
    *total = sum;
    return true;
}

ssize_t send_stream(const RsocketPtr& rs, const iovec* iov, size_t count, int flags) {
    const bool nonblock = rs->nonblocking(flags);
    if (rs->in(st::opening) && finish_opening(rs, nonblock) != 0) return -1;
    if (!has_endpoint(*rs)) return fail(ENOTCONN);
    // Shut down for writing here (rdma-core sends on while credits last): EPIPE, as send(2)
    // says, without the signal; the peer gone: ECONNRESET, as rdma-core says.
    if (!rs->in(st::writable)) return fail(rs->in(st::connected) ? EPIPE : ECONNRESET);
    size_t total = 0;
    if ((count != 0 && iov == nullptr) || !total_length(iov, count, &total)) return fail(EINVAL);
    std::unique_lock lock(rs->mu);
    int ret = 0;
    if (rs->iomap_pending.load()) ret = send_iomaps(*rs, flags, lock);
    Source src{iov, count};
    size_t left = total;
    uint32_t olen = kOlapStartSize;
    while (ret == 0 && left != 0) {
        if (!can_send(*rs)) {
            ret = wait_for(*rs, lock, nonblock, [&] { return conn_can_send(*rs); });
            if (ret != 0) break;
            if (!rs->in(st::writable)) {
                ret = fail(ECONNRESET);
                break;
            }
        }
        uint32_t n = next_chunk(left, olen);
        n = std::min({n, rs->sbuf_bytes_avail, static_cast<uint32_t>(rs->target_sgl()[rs->target_sge].length)});
        ret = write_data(*rs, src, n);
        if (ret == 0) left -= n;
    }
    return ret != 0 && left == total ? ret : static_cast<ssize_t>(total - left);
}

ssize_t recv_stream(const RsocketPtr& rs, const iovec* iov, size_t count, int flags) {
    const bool nonblock = rs->nonblocking(flags);
    if (rs->in(st::opening) && finish_opening(rs, nonblock) != 0) return -1;
    if (!has_endpoint(*rs)) return fail(ENOTCONN);
    size_t total = 0;
    if ((count != 0 && iov == nullptr) || !total_length(iov, count, &total)) return fail(EINVAL);
    std::unique_lock lock(rs->mu);
    Sink sink{iov, count};
    size_t left = total;
    int ret = 0;
    do {
        if (!have_rdata(*rs)) {
            ret = wait_for(*rs, lock, nonblock, [&] { return conn_have_rdata(*rs); });
            if (ret != 0) break;
        }
        if ((flags & MSG_PEEK) != 0) {
            left -= peek(*rs, sink, left);
            break;
        }
        while (left != 0 && have_rdata(*rs)) {
            uint32_t& pending = rs->rmsg[rs->rmsg_head];
            const uint32_t n = static_cast<uint32_t>(std::min<size_t>(left, pending));
            copy_out(*rs, sink, n);
            left -= n;
            if (n == pending) {
                ++rs->rseq_no;
                rs->rmsg_head = (rs->rmsg_head + 1) % rs->rmsg.size();
            } else {
                pending -= n;
            }
        }
    } while (left != 0 && (flags & MSG_WAITALL) != 0 && rs->in(st::readable));
    // Room read is room the peer may have again now, not only when we next wait.
    update_credits(*rs);
    return ret != 0 && left == total ? ret : static_cast<ssize_t>(total - left);
}

}  // namespace

const uint8_t* Source::contiguous(size_t n) {
    while (index < count && offset == iov[index].iov_len) {
        ++index;
        offset = 0;
    }
    if (index == count || iov[index].iov_len - offset < n) return nullptr;
    return static_cast<const uint8_t*>(iov[index].iov_base) + offset;
}

void Source::copy(uint8_t* dst, size_t n) {
    while (n != 0 && index < count) {
        const size_t k = std::min(iov[index].iov_len - offset, n);
        if (k != 0) std::memcpy(dst, static_cast<const uint8_t*>(iov[index].iov_base) + offset, k);
        dst += k;
        n -= k;
        offset += k;
        if (offset == iov[index].iov_len) {
            ++index;
            offset = 0;
        }
    }
}

int write_chunk(Rsocket& rs, Source& src, uint32_t length, bool with_imm, uint32_t msg, uint64_t addr, uint32_t rkey) {
    const ibv_wr_opcode opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    ibv_sge sge[2];
    if (length <= rs.sq_inline) {
        if (const uint8_t* p = src.contiguous(length)) {
            sge[0] = {reinterpret_cast<uintptr_t>(p), length, 0};
            src.offset += length;
            return post(rs, opcode, sge, 1, msg, IBV_SEND_INLINE, addr, rkey);
        }
    }
    const uint32_t to_end = rs.sbuf_size - rs.sbuf_head;
    uint8_t* at = rs.sbuf.data + rs.sbuf_head;
    int nsge = 1;
    if (length <= to_end) {
        src.copy(at, length);
        sge[0] = {reinterpret_cast<uintptr_t>(at), length, rs.smr->lkey};
        rs.sbuf_head = length == to_end ? 0 : rs.sbuf_head + length;
    } else {
        src.copy(at, to_end);
        src.copy(rs.sbuf.data, length - to_end);
        sge[0] = {reinterpret_cast<uintptr_t>(at), to_end, rs.smr->lkey};
        sge[1] = {reinterpret_cast<uintptr_t>(rs.sbuf.data), length - to_end, rs.smr->lkey};
        nsge = 2;
        rs.sbuf_head = length - to_end;
    }
    return post(rs, opcode, sge, nsge, msg, length <= rs.sq_inline ? IBV_SEND_INLINE : 0, addr, rkey);
}

int post_ctrl(Rsocket& rs, uint32_t msg) {
    return post(rs, IBV_WR_RDMA_WRITE_WITH_IMM, nullptr, 0, msg, 0, 0, 0);
}

// A zero-length RDMA WRITE: the peer sees nothing, but a peer that is gone makes it fail
// (after the transport's retries), which ends the connection.
int post_keepalive(Rsocket& rs) {
    return post(rs, IBV_WR_RDMA_WRITE, nullptr, 0, make_imm(Op::Ctrl, static_cast<uint32_t>(Ctrl::Keepalive)), 0, 0, 0);
}

int post_recv(Rsocket& rs) {
    ibv_recv_wr wr{};
    wr.wr_id = kRecvWrId;
    ibv_recv_wr* bad = nullptr;
    const int rc = ibv_post_recv(rs.cm_id->qp, &wr, &bad);
    return rc == 0 ? 0 : fail(rc);
}

bool can_send(const Rsocket& rs) {
    auto& self = const_cast<Rsocket&>(rs);
    return rs.sqe_avail > 0 && rs.sbuf_bytes_avail >= kSndLowat && rs.sseq_no != rs.sseq_comp &&
           self.target_sgl()[rs.target_sge].length != 0;
}

bool have_rdata(const Rsocket& rs) {
    return rs.rmsg_head != rs.rmsg_tail;
}

bool conn_have_rdata(const Rsocket& rs) {
    return have_rdata(rs) || !rs.in(st::readable);
}

bool conn_can_send(const Rsocket& rs) {
    return can_send(rs) || !rs.in(st::writable);
}

bool ctrl_avail(const Rsocket& rs) {
    return rs.ctrl_seqno != rs.ctrl_max_seqno;
}

bool all_sends_done(const Rsocket& rs) {
    return static_cast<int>(rs.ctrl_max_seqno - rs.ctrl_seqno) + rs.sqe_avail == rs.sq_size || !rs.in(st::connected);
}

void update_credits(Rsocket& rs) {
    if (give_credits(rs)) send_credits(rs);
}

int poll_cq(Rsocket& rs) {
    ibv_wc wc[16];
    int receives = 0;
    bool progressed = false;
    int n = 0;
    while ((n = ibv_poll_cq(rs.cm_id->recv_cq, 16, wc)) > 0) {
        progressed = true;
        for (int i = 0; i < n; ++i) {
            const ibv_wc& w = wc[i];
            if ((w.wr_id & kRecvWrId) == 0) {
                sent(rs, static_cast<uint32_t>(w.wr_id), w.status);
                continue;
            }
            if (w.status != IBV_WC_SUCCESS) continue;
            ++receives;
            // A message without immediate data (an iWARP peer's SEND) is nothing we speak.
            if ((w.wc_flags & IBV_WC_WITH_IMM) != 0) received(rs, be32toh(w.imm_data));
        }
    }
    if (n < 0) failed(rs, EIO);
    int ret = 0;
    if (rs.in(st::connected)) {
        while (ret == 0 && receives-- > 0) ret = post_recv(rs);
        if (ret != 0) failed(rs, errno);
    }
    if (progressed) wake_waiters(rs);
    return ret;
}

void take_cq_event(Rsocket& rs) {
    if (!rs.cq_armed) return;
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (ibv_get_cq_event(rs.cm_id->recv_cq_channel, &cq, &context) == 0) {
        rs.cq_armed = false;
        if (++rs.unack_cqe >= static_cast<uint32_t>(rs.sq_size + rs.rq_size)) {
            ibv_ack_cq_events(cq, rs.unack_cqe);
            rs.unack_cqe = 0;
        }
    } else if (errno != EAGAIN && errno != EINTR) {
        failed(rs, errno);
    }
}

void wake_waiters(Rsocket& rs) {
    if (rs.leader) {
        const uint64_t one = 1;
        (void)!write(rs.wake_fd, &one, sizeof one);
    }
    if (rs.followers != 0) rs.progress.notify_all();
}

int wait_for(Rsocket& rs, std::unique_lock<std::mutex>& lock, bool nonblock, const std::function<bool()>& test) {
    using Clock = std::chrono::steady_clock;
    const auto spin_end = Clock::now() + std::chrono::microseconds(config().polling_time_us);
    for (;;) {
        update_credits(rs);
        const int ret = poll_cq(rs);
        if (test()) return 0;
        if (ret != 0) return ret;
        if (nonblock) return fail(EWOULDBLOCK);
        if (Clock::now() < spin_end) continue;
        if (!rs.cq_armed) {
            // Armed, then polled once more: a completion that came in between is not missed.
            ibv_req_notify_cq(rs.cm_id->recv_cq, 0);
            rs.cq_armed = true;
            continue;
        }
        if (rs.leader) {
            ++rs.followers;
            rs.progress.wait(lock);
            --rs.followers;
            continue;
        }
        rs.leader = true;
        const int channel_fd = rs.cm_id->recv_cq_channel->fd;
        lock.unlock();
        pollfd p[2] = {{channel_fd, POLLIN, 0}, {rs.wake_fd, POLLIN, 0}};
        const int n = poll(p, 2, -1);
        const int poll_errno = errno;
        uint64_t drained = 0;
        (void)!read(rs.wake_fd, &drained, sizeof drained);
        lock.lock();
        rs.leader = false;
        take_cq_event(rs);
        if (rs.followers != 0) rs.progress.notify_all();
        // A signal ends the wait with EINTR, as it ends rdma-core's read of the channel.
        if (n < 0 && poll_errno == EINTR) return fail(EINTR);
    }
}

}  // namespace rnic::rdmacm::rsock

using namespace rnic::rdmacm::rsock;

RNIC_EXPORT ssize_t rsend(int socket, const void* buf, size_t len, int flags) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    const iovec iov{const_cast<void*>(buf), len};
    return send_stream(rs, &iov, 1, flags);
}

RNIC_EXPORT ssize_t rsendto(int socket, const void* buf, size_t len, int flags, const sockaddr* dest_addr,
                            socklen_t addrlen) {
    if (dest_addr != nullptr || addrlen != 0) {
        if (find(socket) == nullptr) return fail(EBADF);
        return fail(EISCONN);
    }
    return rsend(socket, buf, len, flags);
}

RNIC_EXPORT ssize_t rsendmsg(int socket, const msghdr* msg, int flags) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    if (msg == nullptr) return fail(EFAULT);
    if (msg->msg_control != nullptr && msg->msg_controllen != 0) return fail(ENOTSUP);
    return send_stream(rs, msg->msg_iov, msg->msg_iovlen, flags);
}

RNIC_EXPORT ssize_t rwrite(int socket, const void* buf, size_t count) {
    return rsend(socket, buf, count, 0);
}

RNIC_EXPORT ssize_t rwritev(int socket, const iovec* iov, int iovcnt) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    if (iovcnt < 0) return fail(EINVAL);
    return send_stream(rs, iov, static_cast<size_t>(iovcnt), 0);
}

RNIC_EXPORT ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    const iovec iov{buf, len};
    return recv_stream(rs, &iov, 1, flags);
}

RNIC_EXPORT ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, sockaddr* src_addr, socklen_t* addrlen) {
    const ssize_t ret = rrecv(socket, buf, len, flags);
    if (ret > 0 && src_addr != nullptr && addrlen != nullptr) rgetpeername(socket, src_addr, addrlen);
    return ret;
}

// rdma-core passes msg_flags (not `flags`) to the receive; we take the caller's flags, as
// recvmsg(2) does.
RNIC_EXPORT ssize_t rrecvmsg(int socket, msghdr* msg, int flags) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    if (msg == nullptr) return fail(EFAULT);
    if (msg->msg_control != nullptr && msg->msg_controllen != 0) return fail(ENOTSUP);
    return recv_stream(rs, msg->msg_iov, msg->msg_iovlen, flags);
}

RNIC_EXPORT ssize_t rread(int socket, void* buf, size_t count) {
    return rrecv(socket, buf, count, 0);
}

RNIC_EXPORT ssize_t rreadv(int socket, const iovec* iov, int iovcnt) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    if (iovcnt < 0) return fail(EINVAL);
    return recv_stream(rs, iov, static_cast<size_t>(iovcnt), 0);
}
