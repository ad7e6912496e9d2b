// Direct placement (riomap, riounmap, riowrite): a buffer riomap'ed for writing gets a slot of
// the peer's iomap table and is announced there (an RDMA WRITE WITH IMMEDIATE of its 24-byte
// entry, IOMAP_SGL) before the next send; the peer's riowrite then RDMA-writes into it at an
// offset, with no receive and no notice on our side.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <deque>

#include "export.hpp"
#include "rsocket.hpp"

namespace rnic::rdmacm::rsock {

int send_iomaps(Rsocket& rs, int flags, std::unique_lock<std::mutex>& lock) {
    for (;;) {
        size_t slot = 0;
        WireIomap entry{};
        {
            std::lock_guard maps(rs.map_mu);
            if (rs.iomap_queue.empty()) {
                rs.iomap_pending.store(false);
                return 0;
            }
            slot = rs.iomap_queue.front();
            const IomapSlot& s = rs.iomap_slots[slot];
            entry = {s.offset,
                     {reinterpret_cast<uintptr_t>(s.mr->addr), s.mr->rkey, static_cast<uint32_t>(s.mr->length)}};
        }
        if (!can_send(rs)) {
            // map_mu is not held while asleep: riomap and riounmap go on meanwhile.
            if (wait_for(rs, lock, rs.nonblocking(flags), [&] { return conn_can_send(rs); }) != 0) return -1;
            if (!rs.in(st::writable)) return fail(ECONNRESET);
            continue;
        }
        if (rs.swap_sgl) entry = swap_iomap(entry);
        ++rs.sseq_no;
        --rs.sqe_avail;
        rs.sbuf_bytes_avail -= sizeof entry;
        const iovec v{&entry, sizeof entry};
        Source src{&v, 1};
        const int ret = write_chunk(rs, src, sizeof entry, true, make_imm(Op::IomapSgl, static_cast<uint32_t>(slot)),
                                    rs.remote_iomap.addr + sizeof(WireIomap) * slot, rs.remote_iomap.key);
        {
            std::lock_guard maps(rs.map_mu);
            if (!rs.iomap_queue.empty() && rs.iomap_queue.front() == slot) rs.iomap_queue.pop_front();
        }
        if (ret != 0) return ret;
    }
}

}  // namespace rnic::rdmacm::rsock

using namespace rnic::rdmacm::rsock;

// offset -1 maps the buffer at its own address; any other offset is taken as given (rdma-core
// checks no overlap either).
RNIC_EXPORT off_t riomap(int socket, void* buf, size_t len, int prot, int, off_t offset) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    if (rs->cm_id == nullptr || rs->cm_id->pd == nullptr || (prot & ~(PROT_WRITE | PROT_NONE)) != 0)
        return fail(EINVAL);
    std::lock_guard lock(rs->map_mu);
    const bool writable = (prot & PROT_WRITE) != 0;
    size_t slot = rs->iomap_slots.size();
    if (writable) {
        for (size_t i = 0; i < rs->iomap_slots.size(); ++i) {
            if (rs->iomap_slots[i].mr == nullptr) {
                slot = i;
                break;
            }
        }
        if (slot == rs->iomap_slots.size()) return fail(ENOMEM);  // the peer's table is full (or has none)
    }
    const int access = IBV_ACCESS_LOCAL_WRITE | (writable ? IBV_ACCESS_REMOTE_WRITE : 0);
    ibv_mr* mr = ibv_reg_mr(rs->cm_id->pd, buf, len, access);
    if (mr == nullptr) return -1;
    if (offset == -1) offset = static_cast<off_t>(reinterpret_cast<uintptr_t>(buf));
    if (writable) {
        rs->iomap_slots[slot] = IomapSlot{mr, static_cast<uint64_t>(offset)};
        rs->iomap_queue.push_back(slot);
        rs->iomap_pending.store(true);
    } else {
        rs->local_maps.push_back(mr);
    }
    return offset;
}

// The peer is not told: its entry stays, and a riowrite into it fails its connection, as with
// rdma-core.
RNIC_EXPORT int riounmap(int socket, void* buf, size_t len) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    std::lock_guard lock(rs->map_mu);
    for (size_t i = 0; i < rs->iomap_slots.size(); ++i) {
        IomapSlot& s = rs->iomap_slots[i];
        if (s.mr == nullptr || s.mr->addr != buf || s.mr->length != len) continue;
        ibv_dereg_mr(s.mr);
        s = IomapSlot{};
        std::erase(rs->iomap_queue, i);
        return 0;
    }
    for (auto it = rs->local_maps.begin(); it != rs->local_maps.end(); ++it) {
        if ((*it)->addr != buf || (*it)->length != len) continue;
        ibv_dereg_mr(*it);
        rs->local_maps.erase(it);
        return 0;
    }
    return fail(EINVAL);
}

RNIC_EXPORT size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return static_cast<size_t>(fail(EBADF));
    if (!rs->in(st::connected | st::disconnected | st::error) || rs->cm_id->qp == nullptr)
        return static_cast<size_t>(fail(ENOTCONN));
    std::unique_lock lock(rs->mu);
    int ret = 0;
    if (rs->iomap_pending.load()) ret = send_iomaps(*rs, flags, lock);
    const iovec v{const_cast<void*>(buf), count};
    Source src{&v, 1};
    size_t left = count;
    uint32_t olen = kOlapStartSize;
    bool mapped = true;
    while (ret == 0 && left != 0) {
        // The peer's entry covering `offset`, read once (the peer may rewrite it).
        WireIomap map{};
        mapped = false;
        for (uint16_t i = 0; i < rs->target_iomap_size && !mapped; ++i) {
            volatile WireIomap& e = rs->target_iomap()[i];
            map = {e.offset, {e.sge.addr, e.sge.key, e.sge.length}};
            mapped = static_cast<uint64_t>(offset) >= map.offset &&
                     static_cast<uint64_t>(offset) - map.offset < map.sge.length;
        }
        if (!mapped) break;
        if (!can_send(*rs)) {
            ret = wait_for(*rs, lock, rs->nonblocking(flags), [&] { return conn_can_send(*rs); });
            if (ret != 0) break;
            if (!rs->in(st::writable)) {
                ret = fail(ECONNRESET);
                break;
            }
        }
        uint32_t n = olen < left ? olen : static_cast<uint32_t>(left);
        if (olen < left && olen < kMaxTransfer) olen <<= 1;
        const uint64_t room = map.offset + map.sge.length - static_cast<uint64_t>(offset);
        n = static_cast<uint32_t>(std::min<uint64_t>({n, rs->sbuf_bytes_avail, room}));
        --rs->sqe_avail;
        rs->sbuf_bytes_avail -= n;
        ret = write_chunk(*rs, src, n, false, make_imm(Op::Write, n),
                          map.sge.addr + static_cast<uint64_t>(offset) - map.offset, map.sge.key);
        if (ret == 0) {
            left -= n;
            offset += static_cast<off_t>(n);
        }
    }
    // Nothing written because no iomap of the peer covers the offset: an error (rdma-core
    // returns 0 without one).
    if (!mapped && left == count && ret == 0) ret = fail(EINVAL);
    return ret != 0 && left == count ? static_cast<size_t>(ret) : count - left;
}
