// libFuzzer target: hostile clients against rnicd's host service, in process and through the real
// ABI. Each input is a program (host_program.hpp) run against a fresh daemon (service_rig.hpp:
// HostService over a real Engine, rnicd's Datapath over FakePort, the Unix socket in a temporary
// run directory): sessions that send well-formed requests with fuzzed fields and raw bytes with
// descriptors of any kind, write WQEs, indices, arm words and garbage into the memory they map,
// set doorbell bits for real queues, for nothing or all at once, kick, disconnect with their
// memory still mapped and open again, while the daemon takes turns (whole or in parts) with its
// clock moving from microseconds to seconds.
//
// After the program, whatever it did: a fresh session says Hello and sends a SEND between two of
// its QPs, checked byte for byte; once every session is closed the daemon holds no session and
// the engine no object; the engine caught no exception at its boundary (internal_errors); and
// the process holds no descriptor the run did not close. Any failure aborts, so libFuzzer keeps
// the input.
//
// RNIC_FUZZ_TRACE=1 prints each action and what it got (for reading a crash or a seed).
#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "cm_actions.hpp"
#include "host_program.hpp"
#include "invariant.hpp"
#include "rnic/port/arp.hpp"
#include "rnic/wire/builder.hpp"
#include "rnic/wire/opcode.hpp"
#include "session_client.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;
using namespace rnic::host::fuzz;
using abi::Op;

namespace {

constexpr size_t kMaxSessions = 8;
constexpr size_t kMaxObjects = 48;  // remembered per kind and session (the daemon may hold more)
constexpr int kReplyTurns = 8;

const wire::Gid kOwnGid4 = wire::Gid::from_ipv4(port::test::kSelf.ipv4);
const wire::Gid kOwnGid6 = wire::Gid::from_ipv6(port::test::kSelfIp6);

struct Mr {
    uint32_t lkey = 0, rkey = 0;
    uint64_t iova = 0;
    uint64_t length = 0;
};

struct Segment {
    uint32_t id = 0;
    std::shared_ptr<SharedMapping> memory;
};

// One hostile session and everything it was told about. Nothing is forgotten when the daemon
// destroys it: stale handles and the memory of destroyed objects stay in play.
struct Hostile {
    std::unique_ptr<SessionClient> c;
    std::vector<uint32_t> pds, ahs, channels;
    std::vector<abi::AllocMwReply> mws;  // handle and the rkey it was allocated with
    std::vector<Mr> mrs;
    std::vector<Segment> segments;
    std::vector<CqRing> cqs;
    std::vector<QpRings> qps;
    std::vector<SrqRing> srqs;
    std::vector<Buffer> buffers;  // from Setup: keep their memory alive
    uint32_t next_segment = 1000;
    CmHeld cm;  // its CM channels (both ends of their sockets) and ids
};

template <class T>
void keep(std::vector<T>& v, T x) {
    if (v.size() < kMaxObjects) v.push_back(std::move(x));
}

// Programs longer than this are cut: it bounds what one iteration can create, and the device's
// limits below leave room for the well-behaved client after the longest program (no action
// creates more than two objects of a kind in fewer than four bytes).
constexpr size_t kMaxProgram = 2048;

// The device's limits, smaller than rnicd's (the engine's tables are sized from them when it is
// made, for every input) but out of a program's reach: a hostile client exhausting the device is
// another matter (per-user caps), not what this target checks.
transport::EngineConfig small_engine() {
    transport::EngineConfig c = rig_engine_config();
    transport::DeviceLimits& l = c.limits;
    l.max_qp = 2 * kMaxProgram;
    l.max_cq = l.max_pd = l.max_mr = l.max_srq = l.max_ah = kMaxProgram;
    l.max_qp_wr = 1024;
    l.max_srq_wr = 1024;
    l.max_cqe = 4096;
    return c;
}

class World final : public CmSessions {
public:
    explicit World(ProgramReader& p) : rig({}, small_engine()), p_(p), cm_(p, rig, *this) {}
    ServiceRig rig;

    size_t count() const override { return sessions_.size(); }
    CmParty party(size_t i) override {
        Hostile& h = sessions_[i];
        return {h.c.get(), &h.cm, h.qps};
    }

    void run() {
        while (!p_.done()) step();
    }
    void check_and_close();

private:
    void step();
    void open_session();
    void control();
    void raw_message();
    void setup();
    void qp_pair();
    void post_send();
    void post_recv();
    void set_index();
    void cq_write();
    void doorbell();
    void kick();
    void turns();
    void partial_turn();
    void garbage();
    void poll_cq();
    void shrink();
    void inject();

    Hostile* session() {
        const uint8_t b = p_.u8();
        return sessions_.empty() ? nullptr : &sessions_[b % sessions_.size()];
    }
    // A handle through the selector of host_program.hpp; `get` maps an object to its handle.
    template <class T, class Get>
    uint32_t pick(Hostile* s, std::vector<T> Hostile::*list, Get get) {
        const uint8_t b = p_.u8();
        if (b >= kPickRaw) return p_.u32();
        if (b >= kPickOther) {
            const uint8_t si = p_.u8(), oi = p_.u8();
            if (sessions_.empty()) return 0;
            const auto& l = sessions_[si % sessions_.size()].*list;
            return l.empty() ? 0 : get(l[oi % l.size()]);
        }
        if (!s || (s->*list).empty()) return 0;
        return get((s->*list)[b % (s->*list).size()]);
    }
    uint32_t pick_pd(Hostile* s) {
        return pick(s, &Hostile::pds, [](uint32_t h) { return h; });
    }
    uint32_t pick_cq(Hostile* s) {
        return pick(s, &Hostile::cqs, [](const CqRing& c) { return c.handle; });
    }
    uint32_t pick_qpn(Hostile* s) {
        return pick(s, &Hostile::qps, [](const QpRings& q) { return q.qpn; });
    }
    uint32_t pick_srq(Hostile* s) {
        return pick(s, &Hostile::srqs, [](const SrqRing& q) { return q.handle; });
    }
    uint32_t pick_ah(Hostile* s) {
        return pick(s, &Hostile::ahs, [](uint32_t h) { return h; });
    }
    uint32_t pick_channel(Hostile* s) {
        return pick(s, &Hostile::channels, [](uint32_t h) { return h; });
    }
    // An object of the acting session (or of any, through kPickOther) for its memory.
    template <class T>
    T* pick_object(Hostile* s, std::vector<T> Hostile::*list) {
        const uint8_t b = p_.u8();
        Hostile* owner = s;
        if (b >= kPickOther) {
            const uint8_t other = p_.u8();
            owner = sessions_.empty() ? nullptr : &sessions_[other % sessions_.size()];
        }
        if (!owner || (owner->*list).empty()) return nullptr;
        return &(owner->*list)[b % (owner->*list).size()];
    }
    const Mr* pick_mr(Hostile* s) { return pick_object(s, &Hostile::mrs); }
    uint32_t size() {
        const uint8_t b = p_.u8();
        if (b == kSizeRaw) return p_.u32();
        if (b >= kSizeShift) return uint32_t{1} << std::min(b - kSizeShift, 31);
        return b;
    }
    wire::Gid gid(uint8_t& sgid_index);
    // Reads its arguments even when there is no ring, so a program's layout does not depend on
    // what earlier actions created.
    void publish(abi::RingView* ring, uint32_t* produced, uint32_t doorbell, Hostile* s);
    void track(Hostile* s, Op op, const void* body, SessionReply& r);

    ProgramReader& p_;
    std::vector<Hostile> sessions_;
    CmFuzzer cm_;
};

void World::step() {
    const auto a = static_cast<Action>(p_.u8() % static_cast<uint8_t>(Action::Count));
    switch (a) {
        case Action::OpenSession:
            return open_session();
        case Action::Control:
            return control();
        case Action::RawMessage:
            return raw_message();
        case Action::Setup:
            return setup();
        case Action::QpPair:
            return qp_pair();
        case Action::PostSend:
            return post_send();
        case Action::PostRecv:
            return post_recv();
        case Action::SetIndex:
            return set_index();
        case Action::CqWrite:
            return cq_write();
        case Action::Doorbell:
            return doorbell();
        case Action::Kick:
            return kick();
        case Action::Turns:
            return turns();
        case Action::PartialTurn:
            return partial_turn();
        case Action::Disconnect:
            if (Hostile* s = session()) {
                TRACE("disconnect session %u\n", s->c->session_id);
                s->c->disconnect();
            }
            return;
        case Action::Garbage:
            return garbage();
        case Action::PollCq:
            return poll_cq();
        case Action::Inject:
            return inject();
        case Action::Shrink:
            return shrink();
        case Action::CmControl:
            return cm_.control();
        case Action::CmListen:
            return cm_.listen();
        case Action::CmConnect:
            return cm_.connect();
        case Action::CmRespond:
            return cm_.respond();
        case Action::CmMad:
            return cm_.mad();
        case Action::CmTime:
            return cm_.time();
        case Action::CmChannelIo:
            return cm_.channel_io();
        case Action::Count:
            break;
    }
}

void World::open_session() {
    const uint8_t variant = p_.u8() % 3;
    if (sessions_.size() >= kMaxSessions) return;
    Hostile h;
    h.c = std::make_unique<SessionClient>(rig);
    if (variant == 0) {
        const int rc = h.c->hello();
        TRACE("open session: hello %d (session %u)\n", rc, h.c->session_id);
    } else if (variant == 2) {
        const int memfd = memfd_create("not-an-eventfd", MFD_CLOEXEC);
        const abi::HelloRequest req{1, 0};
        auto r = h.c->call(Op::Hello, req, std::span<const int>(&memfd, 1), kReplyTurns);
        close(memfd);
        TRACE("open session: hello with a memfd: %d\n", r ? r->status() : kNoReply);
    }
    sessions_.push_back(std::move(h));
}

wire::Gid World::gid(uint8_t& sgid_index) {
    switch (p_.u8() % 6) {
        case 0:
            sgid_index = 0;
            return kOwnGid4;
        case 1:
            sgid_index = 2;
            return kOwnGid6;
        case 2:
            sgid_index = 1;
            return wire::Gid::from_ipv6(port::test::kSelf.ipv6[0].addr);
        case 3:
            sgid_index = 0;
            return wire::Gid::from_ipv4(port::test::kPeerIp);  // ARP: a deferred reply
        case 4:
            sgid_index = 2;
            return wire::Gid::from_ipv6(port::test::kPeerIp6);  // neighbour discovery
        default: {
            wire::Gid g;
            for (auto& b : g.raw) b = p_.u8();
            sgid_index = p_.u8();
            return g;
        }
    }
}

// Records what a successful reply created, so later actions can name it and write its rings.
void World::track(Hostile* s, Op op, const void* body, SessionReply& r) {
    if (r.status() != 0) return;
    switch (op) {
        case Op::Hello:  // a session opened without Hello says it now: the CM's checks need its id
            s->c->session_id = r.as<abi::HelloReply>().session_id;
            break;
        case Op::AllocPd:
            keep(s->pds, r.as<abi::HandleReply>().handle);
            break;
        case Op::AllocMw:
            keep(s->mws, r.as<abi::AllocMwReply>());
            break;
        case Op::CreateAh:
            keep(s->ahs, r.as<abi::HandleReply>().handle);
            break;
        case Op::CreateCompChannel:
            keep(s->channels, r.as<abi::HandleReply>().handle);
            break;
        case Op::RegMr: {
            abi::RegMrRequest req;
            std::memcpy(&req, body, sizeof req);
            keep(s->mrs, Mr{r.as<abi::RegMrReply>().lkey, r.as<abi::RegMrReply>().rkey, req.iova, req.length});
            break;
        }
        case Op::ReregMr: {  // the region's new range, for the WQEs that name it later
            abi::ReregMrRequest req;
            std::memcpy(&req, body, sizeof req);
            if ((req.flags & abi::kReregChangeTranslation) == 0) break;
            for (Mr& m : s->mrs)
                if (m.lkey == req.lkey) {
                    m.iova = req.iova;
                    m.length = req.length;
                }
            break;
        }
        case Op::CreateCq: {
            CqRing cq;
            cq.reply = r.as<abi::CreateCqReply>();
            cq.handle = cq.reply.handle;
            INVARIANT(abi::is_power_of_two(cq.reply.ring_size) &&
                      cq.reply.ring_bytes >= abi::ring_bytes(cq.reply.ring_size, sizeof(abi::Cqe)));
            cq.memory = SharedMapping::map(r.take_fd(0), cq.reply.ring_bytes);
            INVARIANT(cq.memory != nullptr);
            cq.ring = abi::RingView(cq.memory->data, cq.reply.ring_size, sizeof(abi::Cqe));
            keep(s->cqs, std::move(cq));
            break;
        }
        case Op::CreateQp: {
            QpRings qp;
            const auto q = r.as<abi::CreateQpReply>();
            abi::CreateQpRequest req;
            std::memcpy(&req, body, sizeof req);
            qp.reply = q;
            qp.qpn = q.qpn;
            qp.qp_type = req.qp_type;
            INVARIANT(abi::is_power_of_two(q.sq_size) && q.ring_bytes >= abi::ring_bytes(q.sq_size, q.sq_stride));
            INVARIANT(q.rq_size == 0 || (abi::is_power_of_two(q.rq_size) &&
                                         q.ring_bytes >= q.rq_offset + abi::ring_bytes(q.rq_size, q.rq_stride)));
            qp.memory = SharedMapping::map(r.take_fd(0), q.ring_bytes);
            INVARIANT(qp.memory != nullptr);
            qp.sq = abi::RingView(qp.memory->data, q.sq_size, q.sq_stride);
            if (q.rq_size) qp.rq = abi::RingView(qp.memory->data + q.rq_offset, q.rq_size, q.rq_stride);
            keep(s->qps, std::move(qp));
            break;
        }
        case Op::CreateSrq: {
            SrqRing srq;
            srq.reply = r.as<abi::CreateSrqReply>();
            srq.handle = srq.reply.handle;
            INVARIANT(abi::is_power_of_two(srq.reply.ring_size) &&
                      srq.reply.ring_bytes >= abi::ring_bytes(srq.reply.ring_size, srq.reply.ring_stride));
            srq.memory = SharedMapping::map(r.take_fd(0), srq.reply.ring_bytes);
            INVARIANT(srq.memory != nullptr);
            srq.ring = abi::RingView(srq.memory->data, srq.reply.ring_size, srq.reply.ring_stride);
            keep(s->srqs, std::move(srq));
            break;
        }
        default:
            break;
    }
}

int make_fd(uint8_t kind) {
    switch (kind & 3) {
        case 0:
            return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        case 1: {
            const int fd = memfd_create("fuzz-fd", MFD_CLOEXEC);
            if (fd >= 0 && ftruncate(fd, 4096) != 0) {
                close(fd);
                return -1;
            }
            return fd;
        }
        case 2: {
            int p[2];
            if (pipe2(p, O_CLOEXEC) != 0) return -1;
            close(p[1]);
            return p[0];
        }
        default:
            return open("/dev/null", O_RDWR | O_CLOEXEC);
    }
}

struct Fds {
    std::vector<int> fds;
    ~Fds() {
        for (int fd : fds)
            if (fd >= 0) close(fd);
    }
};

void World::control() {
    Hostile* s = session();
    // 0 and 25: ops that do not exist; 26, 27: the window ops; 28: ReregMr; 29: SetCongestionParam.
    uint8_t op_byte = p_.u8() % 30;
    const Op op = op_byte == 26   ? Op::AllocMw
                  : op_byte == 27 ? Op::DeallocMw
                  : op_byte == 28 ? Op::ReregMr
                  : op_byte == 29 ? Op::SetCongestionParam
                                  : static_cast<Op>(op_byte);
    std::vector<uint8_t> body;
    Fds fds;
    auto put = [&body](const auto& v) {
        const auto* b = reinterpret_cast<const uint8_t*>(&v);
        body.insert(body.end(), b, b + sizeof v);
    };
    std::shared_ptr<SharedMapping> segment_memory;
    uint32_t segment_id = 0;
    switch (op) {
        case Op::Hello:
            put(abi::HelloRequest{p_.u32(), p_.u32()});
            if (p_.u8() & 0x80) fds.fds.push_back(make_fd(p_.u8()));  // Hello takes none (ABI 3)
            break;
        case Op::AllocPd:
        case Op::QueryPort:
            break;
        case Op::DeallocPd:
            put(abi::HandleRequest{pick_pd(s), 0});
            break;
        case Op::ShareSegment: {
            segment_id = p_.u8();
            const uint8_t pages = p_.u8();
            const uint64_t length = pages == kSizeRaw ? p_.u64() : uint64_t(pages % 17) * 4096;
            const uint8_t file = p_.u8();
            const size_t file_bytes = size_t(file % 17) * 4096 + (file & 0x80 ? 100 : 0);
            // Unsealable memfds too: the daemon cannot seal them, and Shrink takes their pages away.
            segment_memory = SharedMapping::create(std::max<size_t>(file_bytes, 1), (file & 0x40) == 0);
            put(abi::ShareSegmentRequest{segment_id, 0, length});
            if (segment_memory) {
                if (file_bytes == 0 && ftruncate(segment_memory->fd, 0) != 0) break;
                fds.fds.push_back(dup(segment_memory->fd));
            }
            break;
        }
        case Op::ReleaseSegment:
        case Op::DestroyCompChannel:
            put(abi::HandleRequest{op == Op::ReleaseSegment ? p_.u8() + 0u : pick_channel(s), 0});
            break;
        case Op::RegMr:
        case Op::ReregMr: {
            abi::RegMrRequest req{};
            abi::ReregMrRequest rereg{};
            if (op == Op::ReregMr) {
                rereg.lkey = pick(s, &Hostile::mrs, [](const Mr& m) { return m.lkey; });
                rereg.flags = p_.u8() % 16;  // none, every combination, and a flag that does not exist
            }
            req.pd = pick_pd(s);
            req.access = p_.u8();
            const uint32_t runs = p_.u8() % 4;
            std::vector<abi::SegmentRun> list;
            uint64_t total = 0;
            const Segment* first = nullptr;
            for (uint32_t i = 0; i < runs; ++i) {
                const uint8_t which = p_.u8();
                abi::SegmentRun run{};
                if (s && !s->segments.empty() && which < 0xF0) {
                    const Segment& seg = s->segments[which % s->segments.size()];
                    run.segment_id = seg.id;
                    if (!first) first = &seg;
                } else {
                    run.segment_id = which;
                }
                run.offset = uint64_t(p_.u8() % 17) * 4096;
                run.length = uint64_t(p_.u8() % 17) * 4096;
                total += run.length;
                list.push_back(run);
            }
            req.page_offset = p_.u16() % 4097;
            const uint32_t trim = p_.u8();
            const uint32_t fallback = p_.u8();
            req.length = total > req.page_offset + trim ? total - req.page_offset - trim : fallback;
            req.addr = first && first->memory ? reinterpret_cast<uint64_t>(first->memory->data) : 0;
            const bool any_iova = p_.u8() & 1;
            const uint64_t iova = p_.u64();
            req.iova = any_iova ? iova : req.addr + req.page_offset;
            req.run_count = p_.u8() == 0xFF ? p_.u32() : static_cast<uint32_t>(list.size());
            if (op == Op::ReregMr) {
                rereg.pd = req.pd;
                rereg.access = req.access;
                rereg.addr = req.addr;
                rereg.length = req.length;
                rereg.iova = req.iova;
                rereg.page_offset = req.page_offset;
                rereg.run_count = req.run_count;
                put(rereg);
            } else {
                put(req);
            }
            for (const auto& run : list) put(run);
            break;
        }
        case Op::DeregMr:
            put(abi::HandleRequest{pick(s, &Hostile::mrs, [](const Mr& m) { return m.lkey; }), 0});
            break;
        case Op::AllocMw:
            put(abi::AllocMwRequest{pick_pd(s), p_.u8() % 4u});  // types 0 and 3 do not exist
            break;
        case Op::DeallocMw:
            put(abi::HandleRequest{pick(s, &Hostile::mws, [](const abi::AllocMwReply& m) { return m.handle; }), 0});
            break;
        case Op::CreateCompChannel:
            if (p_.u8() & 0x80) fds.fds.push_back(make_fd(p_.u8()));  // the daemon makes the socket
            break;
        case Op::CreateCq: {
            const uint32_t cqe = size();
            put(abi::CreateCqRequest{cqe, p_.u8() & 1 ? pick_channel(s) : 0, p_.u32(), 0});
            break;
        }
        case Op::DestroyCq:
            put(abi::HandleRequest{pick_cq(s), 0});
            break;
        case Op::CreateSrq: {
            abi::CreateSrqRequest req{};
            req.pd = pick_pd(s);
            req.max_wr = size();
            req.max_sge = size();
            req.srq_limit = size();
            put(req);
            break;
        }
        case Op::ModifySrq: {
            abi::ModifySrqRequest req{};
            req.handle = pick_srq(s);
            req.attr_mask = p_.u8();
            req.max_wr = size();
            req.srq_limit = size();
            put(req);
            break;
        }
        case Op::QuerySrq:
        case Op::DestroySrq:
            put(abi::HandleRequest{pick_srq(s), 0});
            break;
        case Op::CreateQp: {
            abi::CreateQpRequest req{};
            const uint8_t type = p_.u8();
            req.qp_type = type % 4 == 3 ? p_.u8() : 2 + type % 3;
            req.pd = pick_pd(s);
            req.send_cq = pick_cq(s);
            req.recv_cq = pick_cq(s);
            req.srq = p_.u8() & 1 ? pick_srq(s) : 0;
            req.sq_sig_all = p_.u8() & 1;
            req.cap.max_send_wr = size();
            req.cap.max_recv_wr = size();
            req.cap.max_send_sge = size();
            req.cap.max_recv_sge = size();
            req.cap.max_inline_data = size();
            put(req);
            break;
        }
        case Op::ModifyQp: {
            // The masks the verbs use for each step, and anything else.
            static constexpr uint32_t kMasks[] = {
                1 | 16 | 32 | 8,
                1 | 16 | 32 | 64,
                1 | 128 | 256 | (1u << 20) | (1u << 12) | (1u << 17) | (1u << 15),
                1 | 128 | 256 | (1u << 20) | (1u << 12),
                1,
                1 | (1u << 16) | 512 | 1024 | 2048 | 8192,
                1 | (1u << 16),
                1u << 19,
            };
            abi::ModifyQpRequest req{};
            req.qpn = pick_qpn(s);
            const uint8_t m = p_.u8();
            req.attr_mask = m < std::size(kMasks) * 16 ? kMasks[m % std::size(kMasks)] : p_.u32();
            abi::QpAttr& a = req.attr;
            a.qp_state = p_.u8() % 9;
            a.cur_qp_state = p_.u8() % 9;
            a.path_mtu = p_.u8() % 7;
            a.qkey = p_.u32();
            a.rq_psn = p_.u32();
            a.sq_psn = p_.u32();
            a.dest_qp_num = pick_qpn(s);
            a.qp_access_flags = p_.u8();
            uint8_t sgid = 0;
            const wire::Gid g = gid(sgid);
            std::memcpy(a.ah_attr.dgid, g.raw.data(), 16);
            a.ah_attr.sgid_index = sgid;
            a.ah_attr.traffic_class = p_.u8();
            a.timeout = p_.u8() % 40;
            a.retry_cnt = p_.u8() % 9;
            a.rnr_retry = p_.u8() % 9;
            a.min_rnr_timer = p_.u8() % 40;
            a.max_rd_atomic = p_.u8();
            a.max_dest_rd_atomic = p_.u8();
            a.port_num = p_.u8() % 3;
            a.cap = {size(), size(), size(), size(), size()};
            put(req);
            break;
        }
        case Op::QueryQp:
            put(abi::QueryQpRequest{pick_qpn(s), p_.u32()});
            break;
        case Op::DestroyQp:
            put(abi::HandleRequest{pick_qpn(s), 0});
            break;
        case Op::CreateAh: {
            abi::CreateAhRequest req{};
            req.pd = pick_pd(s);
            uint8_t sgid = 0;
            const wire::Gid g = gid(sgid);
            std::memcpy(req.av.dgid, g.raw.data(), 16);
            req.av.sgid_index = sgid;
            req.av.traffic_class = p_.u8();
            req.av.flow_label = p_.u32();
            put(req);
            break;
        }
        case Op::DestroyAh:
            put(abi::HandleRequest{pick_ah(s), 0});
            break;
        case Op::Stats:
            put(abi::StatsRequest{p_.u32(), 0});
            break;
        case Op::SetLogLevel: {
            // Never a level that would log every message: the run must stay fast.
            static constexpr const char* kLevels[] = {"off", "critical", "err", "info!", ""};
            abi::SetLogLevelRequest req{};
            std::snprintf(req.level, sizeof req.level, "%s", kLevels[p_.u8() % std::size(kLevels)]);
            put(req);
            break;
        }
        case Op::SetCongestionParam: {
            // Knobs the daemon must take or refuse whole: good and bad names, values in and out
            // of range, cross-field conflicts, and a count or name the request cannot hold.
            static constexpr const char* kNames[] = {"rp_min_rate", "rp_max_rate", "rp_ai_rate", "rp_gd",
                                                     "np_enable/3", "rp_enable/9", "ecn_ect",  "rp_bogus",
                                                     "rp_time_reset", ""};
            abi::SetCongestionParamRequest req{};
            req.count = p_.u8() % (abi::kMaxCongestionParams + 2);
            for (uint32_t i = 0; i < std::min(req.count, abi::kMaxCongestionParams); ++i) {
                std::snprintf(req.params[i].name, sizeof req.params[i].name, "%s", kNames[p_.u8() % std::size(kNames)]);
                // rp_time_reset and the rates stay >= 50: the run must stay fast.
                req.params[i].value = p_.u8() & 0x80 ? p_.u64() : 50 + p_.u8() % 8 * 500;
                if (p_.u8() == 0xff) std::memset(req.params[i].name, 'x', sizeof req.params[i].name);
            }
            put(req);
            break;
        }
        default:  // no such op
            put(p_.u64());
            break;
    }
    if (!s) return;
    auto r = s->c->call(op, body.data(), body.size(), fds.fds, kReplyTurns);
    TRACE("control session %u op %u (%zu bytes, %zu fds): %d\n", s->c->session_id, op_byte, body.size(), fds.fds.size(),
          r ? r->status() : kNoReply);
    if (!r) return;
    track(s, op, body.data(), *r);
    if (op == Op::ShareSegment && r->status() == 0) keep(s->segments, Segment{segment_id, segment_memory});
}

void World::raw_message() {
    Hostile* s = session();
    const uint8_t n = p_.u8();
    const auto b = p_.bytes(n);
    std::vector<uint8_t> msg(b.begin(), b.end());
    const uint8_t flags = p_.u8();
    const uint8_t kinds = p_.u8();
    if ((flags & 1) && msg.size() >= sizeof(abi::MessageHeader)) {
        abi::MessageHeader h;
        std::memcpy(&h, msg.data(), sizeof h);
        h.magic = abi::kMagic;
        h.version = abi::kAbiVersion;
        h.length = static_cast<uint32_t>(msg.size());
        std::memcpy(msg.data(), &h, sizeof h);
    }
    Fds fds;
    for (int i = 0; i < (kinds & 3); ++i) fds.fds.push_back(make_fd(static_cast<uint8_t>(kinds >> (2 + 2 * i))));
    if (!s) return;
    s->cm.raw = true;
    const bool sent = s->c->send_raw(msg.data(), msg.size(), fds.fds);
    TRACE("raw message session %u: %zu bytes, %zu fds, sent %d\n", s->c->session_id, msg.size(), fds.fds.size(), sent);
    if (flags & 2) rig.turn();
}

void World::setup() {
    Hostile* s = session();
    const uint8_t pages_byte = p_.u8();
    const uint32_t pages = 1 + pages_byte % 8;
    const bool sealable = (pages_byte & 0x80) == 0;  // an unsealable buffer is one Shrink can cut
    const uint32_t cqe = size();
    if (!s || !s->c->connected()) return;
    uint32_t pd = 0;
    if (s->c->alloc_pd(pd) != 0) return;
    keep(s->pds, pd);
    Buffer buf;
    const uint32_t access = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    const int rc = s->c->register_buffer(pd, size_t{pages} * 4096, s->next_segment++, access, buf, sealable);
    if (rc == 0) {
        keep(s->mrs, Mr{buf.lkey, buf.rkey, buf.iova(), buf.memory->size});
        keep(s->segments, Segment{buf.segment_id, buf.memory});
        keep(s->buffers, std::move(buf));
    }
    CqRing cq;
    const int cq_rc = s->c->create_cq(cqe, 0, cq);
    if (cq_rc == 0) keep(s->cqs, std::move(cq));
    TRACE("setup session %u: pd %#x, buffer %d, cq(%u) %d\n", s->c->session_id, pd, rc, cqe, cq_rc);
}

void World::qp_pair() {
    Hostile* s = session();
    const uint8_t type = 2 + p_.u8() % 3;
    uint8_t sgid = 0;
    const wire::Gid g = gid(sgid);
    if (!s || !s->c->connected() || s->pds.empty() || s->cqs.empty()) return;
    abi::CreateQpRequest req{};
    req.qp_type = type;
    req.pd = s->pds.back();
    req.send_cq = req.recv_cq = s->cqs.back().handle;
    req.cap = {16, 16, 2, 2, 64};
    QpRings a, b;
    if (s->c->create_qp(req, a) != 0) return;
    const int brc = s->c->create_qp(req, b);
    const uint32_t qkey = 0x11111111;
    const int arc = s->c->connect(a, b.qpn, g, sgid, qkey);
    const int crc = brc == 0 ? s->c->connect(b, a.qpn, g, sgid, qkey) : brc;
    TRACE("qp pair session %u type %u: %#x %#x connect %d %d\n", s->c->session_id, type, a.qpn, b.qpn, arc, crc);
    if (type == 4) {
        uint32_t ah = 0;
        if (s->c->create_ah(req.pd, g, sgid, ah) == 0) keep(s->ahs, ah);
    }
    keep(s->qps, std::move(a));
    if (brc == 0) keep(s->qps, std::move(b));
}

// How a producer index moves after a write: by one (rung or not), by any amount, to any value,
// or not at all.
void World::publish(abi::RingView* ring, uint32_t* produced, uint32_t doorbell, Hostile* s) {
    const uint8_t mode = p_.u8() % 5;
    const uint32_t v = p_.u32();
    if (!ring) return;
    switch (mode) {
        case 0:
        case 1:
            ++*produced;
            break;
        case 2:
            *produced += v & 0x3FF;
            break;
        case 3:
            *produced = v;
            break;
        default:
            return;
    }
    ring->publish(*produced);
    if (mode != 1) s->c->ring_doorbell(doorbell);
}

void World::post_send() {
    Hostile* s = session();
    QpRings* qp = pick_object(s, &Hostile::qps);
    static constexpr uint8_t kOpcodes[] = {2, 0, 1, 3, 4, 5, 6, 7, 9, 8, 10, 11, 14, 15};
    abi::SendWqe w{};
    const uint8_t op = p_.u8();
    w.opcode = op < std::size(kOpcodes) * 16 ? kOpcodes[op % std::size(kOpcodes)] : p_.u8();
    w.send_flags = p_.u8();
    w.wr_id = p_.u8();
    const uint8_t nsge = p_.u8();
    w.num_sge = nsge == 0xFF ? p_.u32() : nsge % 5;
    const Mr* local = pick_mr(s);
    const uint16_t offset = p_.u16();
    const uint32_t length = size();
    const bool raw_lkey = p_.u8() & 1;
    const uint32_t any_lkey = p_.u32();
    const uint32_t lkey = raw_lkey || !local ? any_lkey : local->lkey;
    const Mr* remote = pick_mr(s);
    const uint16_t remote_offset = p_.u16();
    const uint64_t any_addr = p_.u64();
    const uint32_t any_rkey = p_.u32();
    w.remote_addr = remote ? remote->iova + remote_offset : any_addr;
    w.rkey = remote ? remote->rkey : any_rkey;
    w.compare_add = p_.u64();
    w.swap = p_.u64();
    w.ah = pick_ah(s);
    w.remote_qpn = pick_qpn(s);
    const bool pair_qkey = p_.u8() & 1;
    const uint32_t any_qkey = p_.u32();
    w.remote_qkey = pair_qkey ? 0x11111111 : any_qkey;
    w.imm_data = p_.u32();
    // BIND_MW (8): often a window this session (or another) really has, over one of its regions
    // (the bind's fields in the WQE: abi/queue_entries.hpp); no extra program bytes, so programs
    // written before windows existed decode as they did.
    if (w.opcode == 8 && s && !s->mws.empty()) {
        w.imm_data = s->mws[w.imm_data % s->mws.size()].rkey;
        if (local) w.swap = (w.swap & ~uint64_t{0xFFFFFFFF}) | local->lkey;
        if (local) w.remote_addr = local->iova + offset;
        w.compare_add %= 2 * 4096 + 1;
    }
    w.inline_length = p_.u8();
    const auto inline_bytes = (w.send_flags & 8) ? p_.bytes(w.inline_length) : std::span<const uint8_t>{};
    if (!qp || !qp->memory) {
        publish(nullptr, nullptr, 0, s);
        return;
    }
    auto* slot = static_cast<uint8_t*>(qp->sq.entry(qp->sq_produced));
    std::memcpy(slot, &w, sizeof w);
    const size_t room = qp->sq.entry_size() - abi::kSendWqeHeader;
    if (w.send_flags & 8) {
        std::memcpy(slot + abi::kSendWqeHeader, inline_bytes.data(), std::min(room, inline_bytes.size()));
    } else {
        const uint64_t base = local ? local->iova + offset : offset;
        for (size_t i = 0; i < std::min<size_t>(w.num_sge, room / sizeof(abi::Sge)); ++i) {
            const abi::Sge g{base + i * length, length, lkey};
            std::memcpy(slot + abi::kSendWqeHeader + i * sizeof g, &g, sizeof g);
        }
    }
    TRACE("post send qp %#x opcode %u flags %#x sges %u length %u at %u\n", qp->qpn, w.opcode, w.send_flags, w.num_sge,
          length, qp->sq_produced);
    publish(&qp->sq, &qp->sq_produced, qp->reply.doorbell, s);
}

void World::post_recv() {
    Hostile* s = session();
    const bool to_srq = p_.u8() & 1;
    QpRings* qp = to_srq ? nullptr : pick_object(s, &Hostile::qps);
    SrqRing* srq = to_srq ? pick_object(s, &Hostile::srqs) : nullptr;
    const uint8_t nsge = p_.u8();
    const uint32_t num_sge = nsge == 0xFF ? p_.u32() : nsge % 5;
    const Mr* mr = pick_mr(s);
    const uint16_t offset = p_.u16();
    const uint32_t length = size();
    const bool raw_lkey = p_.u8() & 1;
    const uint32_t any_lkey = p_.u32();
    const uint32_t lkey = raw_lkey || !mr ? any_lkey : mr->lkey;
    const uint64_t wr_id = p_.u8();
    abi::RingView* ring = qp && qp->memory && qp->rq.valid() ? &qp->rq : srq && srq->memory ? &srq->ring : nullptr;
    if (!ring) {
        publish(nullptr, nullptr, 0, s);
        return;
    }
    uint32_t& produced = qp ? qp->rq_produced : srq->produced;
    auto* slot = static_cast<uint8_t*>(ring->entry(produced));
    const abi::RecvWqe w{wr_id, num_sge, 0};
    std::memcpy(slot, &w, sizeof w);
    const size_t room = (ring->entry_size() - sizeof w) / sizeof(abi::Sge);
    const uint64_t base = mr ? mr->iova + offset : offset;
    for (size_t i = 0; i < std::min<size_t>(num_sge, room); ++i) {
        const abi::Sge g{base + i * length, length, lkey};
        std::memcpy(slot + sizeof w + i * sizeof g, &g, sizeof g);
    }
    TRACE("post recv %s %#x sges %u length %u at %u\n", qp ? "qp" : "srq", qp ? qp->qpn : srq->handle, num_sge, length,
          produced);
    publish(ring, &produced, qp ? qp->reply.doorbell : srq->reply.doorbell, s);
}

void World::set_index() {
    Hostile* s = session();
    const uint8_t target = p_.u8() % 3;
    abi::RingView* ring = nullptr;
    if (target == 2) {
        if (SrqRing* srq = pick_object(s, &Hostile::srqs); srq && srq->memory) ring = &srq->ring;
    } else if (QpRings* qp = pick_object(s, &Hostile::qps); qp && qp->memory) {
        ring = target == 0 ? &qp->sq : qp->rq.valid() ? &qp->rq : nullptr;
    }
    const uint8_t mode = p_.u8() % 7;
    const uint32_t v = p_.u32();
    if (!ring) return;
    abi::RingHeader& h = ring->header();
    TRACE("set index mode %u value %#x\n", mode, v);
    switch (mode) {
        case 0:
            h.producer.fetch_add(static_cast<uint32_t>(static_cast<int8_t>(v)));
            break;
        case 1:
            h.producer.store(v);
            break;
        case 2:
            h.producer.store(h.consumer.load() - 1 - (v & 0xFF));  // behind what was read
            break;
        case 3:
            h.consumer.store(v);  // the daemon's index
            break;
        case 4:
            h.error.store(v);
            break;
        case 5:
            h.size = v;  // written once by the daemon, never read back
            h.entry_size = v >> 8;
            break;
        default:
            h.arm.store(v);
            h.events.store(v);
            break;
    }
}

void World::cq_write() {
    Hostile* s = session();
    CqRing* cq = pick_object(s, &Hostile::cqs);
    const uint8_t field = p_.u8() % 7;
    const uint32_t v = p_.u32();
    if (!cq || !cq->memory) return;
    abi::RingHeader& h = cq->ring.header();
    TRACE("cq write %#x field %u value %#x\n", cq->handle, field, v);
    switch (field) {
        case 0:
            h.consumer.store(v);
            break;
        case 1:
            h.consumer.store(h.producer.load());
            break;
        case 2:
            h.arm.store(v);
            break;
        case 3:
            abi::arm_cq(h, v & 1 ? abi::kArmNext : abi::kArmSolicited);
            break;
        case 4:
            h.events.store(v);
            break;
        case 5:
            h.producer.store(v);
            break;
        default:
            h.error.store(v);
            break;
    }
}

void World::doorbell() {
    Hostile* s = session();
    const uint8_t mode = p_.u8() % 5;
    const uint16_t slot = p_.u16();
    const uint64_t v = p_.u64();
    if (!s || !s->c->doorbells) return;
    abi::DoorbellBits& bits = *s->c->doorbells;
    TRACE("doorbell session %u mode %u slot %u value %#llx\n", s->c->session_id, mode, slot,
          static_cast<unsigned long long>(v));
    switch (mode) {
        case 0:
            if (!s->qps.empty()) s->c->ring_doorbell(s->qps[slot % s->qps.size()].reply.doorbell);
            break;
        case 1:
            abi::ring_doorbell_slot(bits, slot % abi::kDoorbellSlots);
            break;
        case 2:  // every bit of every level
            bits.top.store(~uint64_t{0});
            for (auto& w : bits.summary) w.store(~uint64_t{0});
            for (auto& w : bits.words) w.store(~uint64_t{0});
            break;
        case 3:  // a summary or top bit with nothing below it, or words with no summary above
            bits.top.store(v);
            bits.summary[slot % abi::kDoorbellSummaryWords].store(v);
            break;
        default:
            bits.words[slot % abi::kDoorbellWords].store(v);
            break;
    }
}

void World::kick() {
    Hostile* s = session();
    if (!s || s->c->kick_fd < 0) return;
    const uint64_t one = 1;
    (void)!write(s->c->kick_fd, &one, sizeof one);
}

void World::turns() {
    static constexpr uint64_t kSteps[] = {1'000,      10'000,      100'000,       1'000'000,
                                          10'000'000, 100'000'000, 1'000'000'000, 3'000'000'000};
    const int n = 1 + p_.u8() % 16;
    const uint64_t step = kSteps[p_.u8() % std::size(kSteps)];
    for (int i = 0; i < n; ++i) rig.turn(step);
}

void World::partial_turn() {
    const uint8_t which = p_.u8();
    if (which == 0xFF) {  // Stats is valid JSON whatever the state (rare: it costs 20 ms here)
        INVARIANT(nlohmann::json::parse(rig.host->stats_json(), nullptr, false).is_object());
        return;
    }
    switch (which % 4) {
        case 0:
            rig.host->poll(rig.now);
            break;
        case 1:
            rig.dp.poll(rig.now);
            break;
        case 2:
            rig.host->poll_control();
            break;
        default:
            if (rig.host->begin_nap()) rig.host->nap(0);
            break;
    }
}

void World::garbage() {
    Hostile* s = session();
    const uint8_t region = p_.u8();
    const uint16_t offset = p_.u16();
    const auto bytes = p_.bytes(p_.u8());
    if (!s) return;
    SharedMapping* m = nullptr;
    const size_t i = region / 5;
    switch (region % 5) {
        case 0:
            if (!s->qps.empty()) m = s->qps[i % s->qps.size()].memory.get();
            break;
        case 1:
            if (!s->cqs.empty()) m = s->cqs[i % s->cqs.size()].memory.get();
            break;
        case 2:
            if (!s->srqs.empty()) m = s->srqs[i % s->srqs.size()].memory.get();
            break;
        case 3:
            m = s->c->async_memory.get();
            break;
        default:
            if (!s->segments.empty()) m = s->segments[i % s->segments.size()].memory.get();
            break;
    }
    if (!m || !m->data || m->size == 0) return;
    const size_t at = offset % m->size;
    std::memcpy(m->data + at, bytes.data(), std::min(bytes.size(), m->size - at));
    TRACE("garbage: %zu bytes at %zu of a %zu-byte mapping\n", bytes.size(), at, m->size);
}

void World::poll_cq() {
    Hostile* s = session();
    CqRing* cq = pick_object(s, &Hostile::cqs);
    if (!cq || !cq->memory) return;
    std::vector<abi::Cqe> out;
    cq->poll(out);
    TRACE("poll cq %#x: %zu\n", cq->handle, out.size());
}

// A segment's file cut short while MRs over it are in use: a sealed one refuses (EPERM), an
// unsealable one loses the pages, and every later access by the daemon to them must come back as
// an access error (the SIGBUS guard), never a crash of the process (which is the fuzzer).
void World::shrink() {
    Hostile* s = session();
    const uint8_t which = p_.u8();
    const uint8_t pages = p_.u8() % 17;
    if (!s || s->segments.empty()) return;
    const Segment& seg = s->segments[which % s->segments.size()];
    if (!seg.memory) return;
    const int rc = ftruncate(seg.memory->fd, off_t{pages} * 4096);
    TRACE("shrink segment %u to %u pages: %d\n", seg.id, pages, rc == 0 ? 0 : errno);
}

// Collects one frame a port builder writes.
class FrameCollector final : public common::FrameSink {
public:
    std::span<uint8_t> allocate(size_t length) override {
        frame.assign(length, 0);
        return frame;
    }
    void commit(size_t length) override { frame.resize(length); }
    std::vector<uint8_t> frame;
};

// A frame arriving at the port: any bytes; the peer's ARP reply (QPs and AHs towards 10.77.0.2
// resolve, their frames go to the port); or a RoCEv2 frame with a valid ICRC from the peer or
// seemingly from ourselves, to any QP, with fuzzed opcode, PSN, extension headers and payload.
void World::inject() {
    const uint8_t kind = p_.u8() % 3;
    if (kind == 0) {
        const auto b = p_.bytes(p_.u8() * 4);
        rig.port.inject(std::vector<uint8_t>(b.begin(), b.end()));
        return;
    }
    if (kind == 1) {
        FrameCollector c;
        const auto& self = port::test::kSelf;
        port::emit_arp(c, port::test::kPeerMac,
                       port::ArpPacket{2, port::test::kPeerMac, port::test::kPeerIp, self.mac, self.ipv4, self.mac});
        rig.port.inject(std::move(c.frame));
        return;
    }
    Hostile* s = session();
    const bool from_peer = p_.u8() & 1;
    wire::FrameSpec f;
    f.dst_mac = port::test::kSelf.mac;
    f.src_mac = from_peer ? port::test::kPeerMac : port::test::kSelf.mac;
    f.src_gid = from_peer ? wire::Gid::from_ipv4(port::test::kPeerIp) : kOwnGid4;
    f.dst_gid = kOwnGid4;
    f.bth.opcode = p_.u8();
    const uint8_t flags = p_.u8();
    f.bth.solicited = flags & 1;
    f.bth.ack_req = flags & 2;
    f.bth.mig_req = flags & 4;
    f.bth.dest_qp = pick_qpn(s) & 0xFFFFFF;
    f.bth.psn = p_.u32() & 0xFFFFFF;
    const uint64_t va = p_.u64();
    const uint32_t key = p_.u32(), length = p_.u32(), word = p_.u32();
    const uint64_t other = p_.u64();
    const auto payload = p_.bytes(p_.u8() * 4);
    const wire::OpcodeInfo& info = wire::opcode_info(f.bth.opcode);
    if (info.has(wire::kExtDeth)) f.ext.deth = wire::Deth{word, 0, length & 0xFFFFFF};
    if (info.has(wire::kExtReth)) f.ext.reth = wire::Reth{va, key, length};
    if (info.has(wire::kExtAtomicEth)) f.ext.atomic_eth = wire::AtomicEth{va, key, other, ~other};
    if (info.has(wire::kExtAeth)) f.ext.aeth = wire::Aeth{static_cast<uint8_t>(word), length & 0xFFFFFF};
    if (info.has(wire::kExtAtomicAckEth)) f.ext.atomic_ack_eth = wire::AtomicAckEth{other};
    if (info.has(wire::kExtImmDt)) f.ext.immdt = wire::ImmDt{word};
    if (info.has(wire::kExtIeth)) f.ext.ieth = wire::Ieth{key};
    if (info.has(wire::kExtFeth)) f.ext.feth = wire::Feth{static_cast<uint8_t>(word & 0xF), static_cast<uint8_t>((word >> 4) & 3), 0};
    if (info.has_payload) f.payload = payload;
    const auto size = wire::frame_size(f);
    if (!size) return;
    std::vector<uint8_t> frame(*size);
    if (!wire::build_frame(f, frame)) return;
    TRACE("inject opcode %#x to %#x psn %u (%zu bytes)\n", f.bth.opcode, f.bth.dest_qp, f.bth.psn, frame.size());
    rig.port.inject(std::move(frame));
}

// ---------------------------------------------------------------------------------------------
// The invariants

// A well-behaved client next to whatever the hostile ones left: Hello, a PD, a buffer, a CQ, two
// RC QPs connected over our own GID, one SEND checked byte for byte.
void well_behaved_send(ServiceRig& rig, uint32_t seed) {
    SessionClient c(rig);
    INVARIANT(c.hello() == 0);
    uint32_t pd = 0;
    INVARIANT(c.alloc_pd(pd) == 0);
    Buffer buf;
    INVARIANT(c.register_buffer(pd, 2 * 4096, 1, kAccessLocalWrite, buf) == 0);
    CqRing cq;
    INVARIANT(c.create_cq(16, 0, cq) == 0);
    abi::CreateQpRequest req{};
    req.qp_type = 2;
    req.pd = pd;
    req.send_cq = req.recv_cq = cq.handle;
    req.cap = {4, 4, 1, 1, 0};
    QpRings a, b;
    INVARIANT(c.create_qp(req, a) == 0);
    INVARIANT(c.create_qp(req, b) == 0);
    INVARIANT(c.connect(a, b.qpn, kOwnGid4) == 0);
    INVARIANT(c.connect(b, a.qpn, kOwnGid4) == 0);
    constexpr uint32_t kLength = 1500;  // two packets at MTU 1024
    for (uint32_t i = 0; i < kLength; ++i) buf.memory->data[i] = static_cast<uint8_t>(seed * 31 + i * 7);
    std::memset(buf.memory->data + 4096, 0, 4096);
    const abi::Sge into{buf.iova() + 4096, 4096, buf.lkey};
    c.post_recv(b, 0xB0B, std::span(&into, 1));
    abi::SendWqe w{};
    w.wr_id = 0xA11CE;
    w.opcode = 2;      // IBV_WR_SEND
    w.send_flags = 2;  // IBV_SEND_SIGNALED
    w.num_sge = 1;
    const abi::Sge from{buf.iova(), kLength, buf.lkey};
    c.post_send(a, w, std::span(&from, 1));
    const auto cqes = c.wait_cqes(cq, 2, 2000);
    INVARIANT_V(cqes.size() == 2, cqes.size(), 0);
    for (const abi::Cqe& e : cqes) {
        INVARIANT_V(e.status == 0, e.status, e.opcode);
        INVARIANT_V(e.wr_id == (e.opcode == 128 ? 0xB0Bu : 0xA11CEu), e.wr_id, e.opcode);
        if (e.opcode == 128) INVARIANT(e.byte_len == kLength && e.qp_num == b.qpn && e.src_qp == a.qpn);
    }
    INVARIANT(std::memcmp(buf.memory->data, buf.memory->data + 4096, kLength) == 0);
}

size_t open_fds() {
    size_t n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (readdir(d)) ++n;
        closedir(d);
    }
    return n;
}

void World::check_and_close() {
    for (Hostile& s : sessions_) s.c->drain();
    static uint32_t runs = 0;
    well_behaved_send(rig, ++runs);
    for (Hostile& s : sessions_) s.c->disconnect();
    // A session whose reply waits for ARP or ND reads its socket again once the neighbour answers
    // or the agent gives up (3 s at most): seconds per turn.
    for (int i = 0; i < 64 && rig.host->session_count() > 0; ++i) rig.turn(200'000'000);
    INVARIANT_V(rig.host->session_count() == 0, rig.host->session_count(), 0);
    const transport::Engine& e = rig.engine;
    INVARIANT_V(e.qp_count() == 0 && e.cq_count() == 0, e.qp_count(), e.cq_count());
    INVARIANT_V(e.pd_count() == 0 && e.srq_count() == 0, e.pd_count(), e.srq_count());
    INVARIANT_V(e.ah_count() == 0 && e.mr_count() == 0, e.ah_count(), e.mr_count());
    // The engine catches what escapes an entry point and counts it: a bug, found or not.
    INVARIANT_V(e.device_counters().internal_errors == 0, e.device_counters().internal_errors, 0);
    check_cm_after_close(rig, cm_.used());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    g_trace = std::getenv("RNIC_FUZZ_TRACE") != nullptr;
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    spdlog::set_level(g_trace ? spdlog::level::info : spdlog::level::off);  // SetLogLevel may have changed it
    const size_t fds_before = open_fds();
    {
        ProgramReader program({data, std::min(size, kMaxProgram)});
        World world(program);
        world.run();
        world.check_and_close();
    }
    const size_t fds_after = open_fds();
    INVARIANT_V(fds_after == fds_before, fds_before, fds_after);
    return 0;
}
