// Writes the seed corpus of fuzz_host_service: programs (host_program.hpp) that reach the states
// worth mutating from, each a file in the directory given. Run by tests/system/run-host-fuzzer.sh
// before every fuzzing run, so the corpus is code, not committed bytes.
//   fuzz_host_seeds DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "host_program.hpp"

using namespace rnic::host::fuzz;

namespace {

// Argument layouts as fuzz_host_service.cpp reads them. Selectors below kPickOther name object
// (b % count) of the acting session; sizes below kSizeShift are the value itself.
constexpr uint8_t kRc = 0, kUc = 1, kUd = 2;         // QpPair types
constexpr uint8_t kGid4 = 0, kGid6 = 1, kPeer4 = 3;  // gid selectors: our IPv4 and IPv6 GIDs, the peer
constexpr uint8_t kSend = 0, kWrite = 1, kRead = 4, kCas = 5, kFaa = 6;  // PostSend opcode table
constexpr uint8_t kSignaled = 2, kInline = 8;
constexpr uint8_t kKiB = kSizeShift + 10;  // size 1024
constexpr uint8_t kOpAllocPd = 2, kOpCreateSrq = 12, kOpCreateQp = 16, kOpDestroyQp = 19, kOpDestroyAh = 21,
                  kOpDestroyCq = 11, kOpDeregMr = 7, kOpStats = 23;
// Control op byte 28 is ReregMr (fuzz_host_service.cpp); its flags: 1 translation, 2 PD, 4 access.
constexpr uint8_t kOpReregMr = 28, kReregPd = 2, kReregAccess = 4;

// The CM's layouts (cm_actions.hpp). Port spaces: 0 TCP, 1 UDP, 2 IB; QP types 0 RC, 1 UC, 2 UD;
// addresses: 0 our IPv4, 1 our IPv6, 3 the peer's IPv4, 5 0.0.0.0, 8 a neighbour that never
// answers; ports: 1 is 7174, 2 is 7175; timeouts: 2 is 1000 ms; backlogs: 3 is 4; private data
// lengths: 0 none, 2 is 56, 7 is 148, 9 is 180.
constexpr uint8_t kTcp = 0, kUdp = 1;
constexpr uint8_t kOwn4 = 0, kOwn6 = 1, kPeerIp4 = 3, kSilent = 8;
constexpr uint8_t kPort7174 = 1, kPort7175 = 2;
constexpr uint8_t kNewChannel = 0xFF;
// CmControl op numbers (abi::CmOp - 25).
constexpr uint8_t kCmCreateChannel = 0, kCmDestroyId = 3, kCmMigrateId = 4, kCmDisconnect = 13;
// Reactions to events in turn (cm_actions.cpp's react): kGo moves an address to its route, a
// route to a connection, accepts a request, answers CONNECT_RESPONSE with the RTU, leaves an
// established connection alone, answers a DISCONNECTED with DREP, destroys the id of any other
// event; kAccept the same but disconnects an established connection and ignores the rest; kReject
// rejects a request; kQuery asks for the INIT attributes first.
constexpr uint8_t kGo = 1, kAccept = 0, kReject = 2, kQuery = 0x80;
// CmMad attributes and id modes.
constexpr uint8_t kReq = 0, kMra = 1, kRej = 2, kRep = 3, kRtu = 4, kDreq = 5, kSidrReq = 7, kClassPortInfo = 9,
                  kOtherGet = 10, kEcho = 11;
constexpr uint8_t kLiveIds = 0, kNearIds = 1, kAnswer = 2, kRawIds = 3;

// One CM MAD from the wire, fields as mad() reads them; defaults make a valid message from the
// peer over IPv4 (RC, retry and RNR retry 7, 15 CM retries, MTU 1024, ACK timeout 18).
struct MadArgs {
    uint8_t attr = kReq;
    uint8_t route = 0;
    uint8_t ids = kAnswer;
    uint8_t index = 0, delta = 0;
    uint32_t local = 0, remote = 0;  // kRawIds
    uint8_t guid = 0;
    uint8_t qpn = 0;
    uint32_t psn = 0x100;
    uint8_t a = 1, b = 1, c = 0, d = 0xF8;
    uint16_t code = 0x486F;
    uint8_t port = kPort7174;  // TCP port space
    uint8_t header = 0;
    uint8_t private_length = 0;
    uint8_t mad_mutation = 0;
    uint32_t mad_value = 0;
    uint8_t frame_mutation = 0;
    uint32_t frame_value = 0;
};

struct Program : ProgramWriter {
    Program& open(uint8_t variant = 0) {
        action(Action::OpenSession).u8(variant);
        return *this;
    }
    Program& setup(uint8_t s, uint8_t pages, uint8_t cqe) {
        action(Action::Setup).u8(s).u8(pages - 1).u8(cqe);
        return *this;
    }
    Program& pair(uint8_t s, uint8_t type, uint8_t gid = kGid4) {
        action(Action::QpPair).u8(s).u8(type).u8(gid);
        return *this;
    }
    Program& turns(uint8_t n, uint8_t step = 0) {
        action(Action::Turns).u8(n - 1).u8(step);
        return *this;
    }
    // One SGE of `length` (a size byte) at `offset` into MR 0, to QP `remote_qp` (UD) through AH 0;
    // WRITE, READ and atomics at `remote_offset` into MR 0.
    Program& send(uint8_t s, uint8_t qp, uint8_t opcode, uint8_t flags, uint8_t wr_id, uint16_t offset, uint8_t length,
                  uint16_t remote_offset = 0, uint8_t remote_qp = 1, uint8_t publish = 0) {
        action(Action::PostSend).u8(s).u8(qp).u8(opcode).u8(flags).u8(wr_id).u8(1);
        u8(0).u16(offset).u8(length).u8(0).u32(0);         // local MR 0, its lkey
        u8(0).u16(remote_offset).u64(0).u32(0);            // remote MR 0
        u64(1).u64(2);                                     // compare_add, swap
        u8(0).u8(remote_qp).u8(1).u32(0).u32(0x01020304);  // AH 0, remote QP, the pair's Q_Key, imm
        u8(0);                                             // inline length
        u8(publish).u32(0);
        return *this;
    }
    Program& send_inline(uint8_t s, uint8_t qp, std::span<const uint8_t> data) {
        action(Action::PostSend).u8(s).u8(qp).u8(kSend).u8(kSignaled | kInline).u8(9).u8(0);
        u8(0).u16(0).u8(0).u8(0).u32(0).u8(0).u16(0).u64(0).u32(0).u64(0).u64(0);
        u8(0).u8(1).u8(1).u32(0).u32(0);
        u8(static_cast<uint8_t>(data.size())).raw(data);
        u8(0).u32(0);
        return *this;
    }
    Program& recv(uint8_t s, uint8_t qp, uint8_t wr_id, uint16_t offset, uint8_t length, bool srq = false) {
        action(Action::PostRecv).u8(s).u8(srq).u8(qp).u8(1).u8(0).u16(offset).u8(length).u8(0).u32(0).u8(wr_id);
        u8(0).u32(0);
        return *this;
    }
    Program& poll(uint8_t s, uint8_t cq = 0) {
        action(Action::PollCq).u8(s).u8(cq);
        return *this;
    }
    Program& doorbell(uint8_t s, uint8_t mode, uint16_t slot, uint64_t value = 0) {
        action(Action::Doorbell).u8(s).u8(mode).u16(slot).u64(value);
        return *this;
    }
    Program& set_index(uint8_t s, uint8_t target, uint8_t object, uint8_t mode, uint32_t value) {
        action(Action::SetIndex).u8(s).u8(target).u8(object).u8(mode).u32(value);
        return *this;
    }
    Program& cq_write(uint8_t s, uint8_t cq, uint8_t field, uint32_t value) {
        action(Action::CqWrite).u8(s).u8(cq).u8(field).u32(value);
        return *this;
    }
    // A RoCEv2 frame to QP `qp` (a selector) from the peer or, spoofed, from ourselves.
    Program& frame(uint8_t s, bool from_peer, uint8_t opcode, uint8_t qp, uint32_t psn, uint8_t words = 0) {
        action(Action::Inject).u8(2).u8(s).u8(from_peer).u8(opcode).u8(2).u8(qp).u32(psn);
        u64(0x1000).u32(0).u32(64).u32(0x11111111).u64(0).u8(words);
        for (uint8_t i = 0; i < words * 4; ++i) u8(i);
        return *this;
    }
    Program& destroy(uint8_t s, uint8_t op, uint8_t pick) {
        action(Action::Control).u8(s).u8(op).u8(pick);
        return *this;
    }

    // ---- the CM ----
    Program& address(uint8_t kind, uint8_t port) {
        u8(kind).u8(port);
        return *this;
    }
    // Up to 8 events taken and answered with `what` in turn; connection parameters with
    // `private_length`, the session's QP `qp`, the UDP port space's Q_Key, one responder resource
    // and initiator depth, retry counts 7; rejects with 148 bytes.
    Program& reactions(std::initializer_list<uint8_t> what, uint8_t private_length = 0, uint8_t qp = 0) {
        u8(static_cast<uint8_t>(what.size() - 1));
        for (size_t i = 0; i < 8; ++i) u8(i < what.size() ? what.begin()[i] : 0);
        u8(private_length).u8(0x40).u8(qp).u8(1).u8(1).u8(1).u8(0).u8(7).u8(7);
        u8(7).u8(0x77);
        return *this;
    }
    Program& cm_listen(uint8_t s, uint8_t ps, uint8_t type, uint8_t addr, uint8_t port, uint8_t backlog = 3,
                       uint8_t channel = 0) {
        action(Action::CmListen).u8(s).u8(channel).u8(ps).u8(type).u8(0);
        address(addr, port).u8(backlog);
        return *this;
    }
    // `qp` names the session's QP, or is the QPN itself when it has none (connections from one
    // QPN of one CA to the same daemon are stale connections to each other).
    Program& cm_connect(uint8_t s, uint8_t ps, uint8_t type, uint8_t addr, uint8_t port,
                        std::initializer_list<uint8_t> what, uint8_t private_length = 0, uint8_t qp = 0) {
        action(Action::CmConnect).u8(s).u8(0).u8(ps).u8(type).u8(0);
        address(kOwn4, 0).address(addr, port).u8(2);
        return reactions(what, private_length, qp);
    }
    Program& cm_create_channel(uint8_t s) {
        action(Action::CmControl).u8(s).u8(kCmCreateChannel).u8(0);
        return *this;
    }
    Program& cm_respond(uint8_t s, std::initializer_list<uint8_t> what, uint8_t channel = 0) {
        action(Action::CmRespond).u8(s).u8(channel);
        return reactions(what);
    }
    // CmControl ops whose fields are one handle selector.
    Program& cm_op(uint8_t s, uint8_t op, uint8_t pick) {
        action(Action::CmControl).u8(s).u8(op).u8(pick).u8(0);
        return *this;
    }
    // Stats' page of CM ids, from the first.
    Program& cm_stats(uint8_t s) {
        action(Action::CmControl).u8(s).u8(22).u8(0).u8(0);
        return *this;
    }
    Program& cm_time(uint8_t n, uint8_t mode = 0) {
        action(Action::CmTime).u8(n - 1).u8(mode);
        return *this;
    }
    Program& cm_drain(uint8_t s, uint8_t channel = 0) {
        action(Action::CmChannelIo).u8(s).u8(channel).u8(0).u8(0);
        return *this;
    }
    Program& cm_mad(const MadArgs& m) {
        action(Action::CmMad).u8(m.attr).u8(m.route).u8(m.ids).u8(m.index).u8(m.delta);
        if (m.ids == kRawIds) u32(m.local).u32(m.remote);
        u8(m.guid).u8(m.qpn).u32(m.psn).u8(m.a).u8(m.b).u8(m.c).u8(m.d).u16(m.code);
        u8(0).u8(m.port).u8(m.header).u16(5000).u8(m.private_length).u8(0x5A);
        u8(m.mad_mutation).u32(m.mad_value).u8(m.frame_mutation).u32(m.frame_value);
        return *this;
    }
};

void write(const std::filesystem::path& dir, const std::string& name, const Program& p) {
    std::ofstream out(dir / name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(p.bytes.data()), static_cast<std::streamsize>(p.bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const std::filesystem::path dir = argv[1];
    std::filesystem::create_directories(dir);

    // Well-behaved traffic of every kind the rings carry: the states to mutate from.
    Program rc;
    rc.open().setup(0, 2, 64).pair(0, kRc);
    rc.recv(0, 1, 1, 4096, kKiB).send(0, 0, kSend, kSignaled, 2, 0, kKiB);
    rc.send(0, 0, kWrite, kSignaled, 3, 0, 64, 2048).send(0, 0, kRead, kSignaled, 4, 0, 64, 3000);
    rc.send(0, 0, kCas, kSignaled, 5, 0, 8, 4000).send(0, 0, kFaa, kSignaled, 6, 0, 8, 4008);
    rc.turns(16).poll(0);
    write(dir, "rc-send-write-read-atomics", rc);

    Program uc;
    uc.open().setup(0, 2, 64).pair(0, kUc, kGid6).recv(0, 1, 1, 4096, kKiB);
    const uint8_t text[] = "inline over UC, IPv6";
    uc.send_inline(0, 0, text).send(0, 0, kWrite, kSignaled, 2, 0, 100, 6000).turns(8).poll(0);
    write(dir, "uc-ipv6-inline-write", uc);

    // UD sends through one AH, the AH destroyed before they all went out (the crash of issue 4's
    // era: the address vector is the WQE's own copy).
    Program ud;
    ud.open().setup(0, 2, 200).pair(0, kUd);
    for (uint8_t i = 0; i < 24; ++i) ud.recv(0, 1, i, 4096, 200);
    for (uint8_t i = 0; i < 24; ++i) ud.send(0, 0, kSend, kSignaled, i, 0, 64);
    ud.action(Action::PartialTurn).u8(0);  // the host service reads the SQ, nothing is sent yet
    ud.destroy(0, kOpDestroyAh, 0).turns(16).poll(0);
    write(dir, "ud-sends-then-destroy-ah", ud);

    // A CQ of 4 that is never polled: overflow, CQ_ERR, the QPs on it in trouble, nothing else.
    Program overflow;
    overflow.open().setup(0, 2, 4).pair(0, kRc);
    for (uint8_t i = 0; i < 16; ++i) overflow.recv(0, 1, i, 4096, 32);
    for (uint8_t i = 0; i < 16; ++i) overflow.send(0, 0, kSend, kSignaled, i, 0, 32);
    overflow.turns(16).turns(4, 6);
    write(dir, "cq-overflow", overflow);

    // Doorbells: every bit, bits for nothing, a summary with no word under it.
    Program bells;
    bells.open().setup(0, 1, 16).pair(0, kRc).recv(0, 1, 1, 0, 16);
    bells.doorbell(0, 2, 0).turns(2).doorbell(0, 3, 7, ~0ull).turns(2).doorbell(0, 4, 3, 0x5555).turns(2);
    bells.doorbell(0, 1, 32767).doorbell(0, 1, 12345).turns(2).send(0, 0, kSend, kSignaled, 2, 0, 16).turns(4);
    write(dir, "doorbell-storm", bells);

    // Producer indices past the ring, behind the consumer, and a CQ consumer that lies.
    Program wild;
    wild.open().setup(0, 1, 16).pair(0, kRc).set_index(0, 0, 0, 1, 0xFFFF0000).doorbell(0, 0, 0).turns(2);
    wild.set_index(0, 1, 1, 2, 3).doorbell(0, 0, 1).turns(2).cq_write(0, 0, 0, 0x80000000).cq_write(0, 0, 2, 7);
    wild.send(0, 1, kSend, kSignaled, 1, 0, 16).turns(4).set_index(0, 0, 1, 5, 0xFFFFFFFF).turns(2);
    write(dir, "wild-indices", wild);

    // A buffer the daemon could not seal, cut short under its MR with WRITEs, READs and SENDs on
    // the way: the daemon's accesses to the lost pages are access errors, not a SIGBUS.
    Program cut;
    cut.open().setup(0, 0x80 | 2, 64).pair(0, kRc).recv(0, 1, 1, 4096, kKiB);
    cut.send(0, 0, kWrite, kSignaled, 2, 0, 64, 6000).turns(4);
    cut.action(Action::Shrink).u8(0).u8(0).u8(1);
    cut.send(0, 0, kWrite, kSignaled, 3, 0, 64, 6000).send(0, 0, kRead, kSignaled, 4, 0, 64, 6100);
    cut.send(0, 0, kSend, kSignaled, 5, 5000, 64).turns(16).poll(0);
    write(dir, "shrunk-buffer", cut);

    // WQEs of garbage, published five at a time.
    Program junk;
    junk.open().setup(0, 1, 16).pair(0, kRc);
    for (uint8_t i = 0; i < 4; ++i) {
        junk.action(Action::Garbage).u8(0).u8(0).u16(static_cast<uint16_t>(192 + 200 * i)).u8(48);
        for (uint8_t b = 0; b < 48; ++b) junk.u8(static_cast<uint8_t>(b * 37 + i));
    }
    junk.set_index(0, 0, 0, 0, 5).doorbell(0, 0, 0).turns(4).poll(0);
    write(dir, "garbage-wqes", junk);

    // A session that dies with work in flight and its memory mapped, its rings written after;
    // another session's traffic goes on; a third one opens.
    Program dies;
    dies.open().open().setup(0, 2, 32).setup(1, 2, 32).pair(0, kRc).pair(1, kRc);
    for (uint8_t i = 0; i < 4; ++i) dies.recv(0, 1, i, 4096, 64).send(0, 0, kSend, kSignaled, i, 0, 64);
    dies.action(Action::Disconnect).u8(0);
    dies.send(0, 0, kWrite, kSignaled, 9, 0, 64, 100).doorbell(0, 2, 0).turns(4);
    dies.recv(1, 1, 1, 4096, 64).send(1, 0, kSend, kSignaled, 2, 0, 64).turns(8).poll(1).open();
    write(dir, "disconnect-midway", dies);

    // Objects destroyed while others use them, then used.
    Program stale;
    stale.open().setup(0, 1, 16).pair(0, kRc).send(0, 0, kSend, kSignaled, 1, 0, 16);
    stale.destroy(0, kOpDestroyCq, 0).destroy(0, kOpDeregMr, 0).destroy(0, kOpDestroyQp, 1);
    stale.send(0, 0, kSend, kSignaled, 2, 0, 16).turns(8).destroy(0, kOpDestroyQp, 0).destroy(0, kOpDestroyCq, 0);
    stale.doorbell(0, 2, 0).turns(2);
    write(dir, "destroy-in-use", stale);

    // ReregMr (Control op byte 28) between WQEs that name the region: its rights cut to LOCAL_WRITE
    // (the WRITE after fails), then back, then a PD change and an unknown flag.
    Program rereg;
    rereg.open().setup(0, 2, 32).pair(0, kRc).send(0, 0, kWrite, kSignaled, 1, 0, 64, 100).turns(4);
    const auto rereg_access = [&rereg](uint8_t flags, uint8_t access) {
        rereg.action(Action::Control).u8(0).u8(kOpReregMr).u8(0).u8(flags).u8(0).u8(access);
        rereg.u8(0).u16(0).u8(0).u8(64).u8(0).u64(0).u8(0);  // no runs, page offset, trim, length 64, iova
    };
    rereg_access(kReregAccess, 1);
    rereg.send(0, 0, kWrite, kSignaled, 2, 0, 64, 100).turns(8).poll(0);
    rereg_access(kReregAccess, 7);
    rereg_access(kReregPd, 0);
    rereg_access(8, 7);
    rereg.send(0, 0, kRead, kSignaled, 3, 0, 64, 100).turns(8).poll(0);
    write(dir, "rereg-under-traffic", rereg);

    // An SRQ with receives, a QP on it (Control CreateQp with the SRQ), Stats.
    Program srq;
    srq.open().setup(0, 1, 16);
    srq.action(Action::Control).u8(0).u8(kOpCreateSrq).u8(0).u8(16).u8(1).u8(0);
    srq.action(Action::Control).u8(0).u8(kOpCreateQp).u8(0).u8(0).u8(0).u8(0).u8(1).u8(0).u8(0);
    srq.u8(8).u8(8).u8(1).u8(1).u8(0);
    for (uint8_t i = 0; i < 4; ++i) srq.recv(0, 0, i, 0, 64, true);
    srq.turns(2).action(Action::Control).u8(0).u8(kOpStats).u32(0);
    srq.turns(1);
    write(dir, "srq", srq);

    // Messages that are not messages, Hello without an eventfd, ops before Hello.
    Program raw;
    raw.open(1).open(2).open();
    raw.action(Action::Control).u8(0).u8(kOpAllocPd);
    raw.action(Action::RawMessage).u8(2).u8(30);
    for (uint8_t b = 0; b < 30; ++b) raw.u8(b);
    raw.u8(1).u8(0x05);
    raw.action(Action::RawMessage).u8(2).u8(24);
    for (uint8_t b = 0; b < 24; ++b) raw.u8(static_cast<uint8_t>(0xA0 + b));
    raw.u8(3).u8(0x03);
    raw.action(Action::Control).u8(2).u8(25).u64(0);
    raw.turns(4);
    write(dir, "raw-messages", raw);

    // The peer answers ARP: a pair of RC QPs towards it, frames to the port; then frames from the
    // peer (a SEND, an ACK, a WRITE to a bad address) and one spoofed from our own address.
    Program peer;
    peer.open().setup(0, 1, 32).action(Action::Inject).u8(1);
    peer.turns(2).pair(0, kRc, kPeer4).recv(0, 1, 1, 0, 64).send(0, 0, kSend, kSignaled, 2, 0, 64).turns(4);
    peer.frame(0, true, 0x04, 1, 100, 16).frame(0, true, 0x11, 0, 100).frame(0, true, 0x0A, 1, 101, 16);
    peer.frame(0, false, 0x04, 1, 102, 4).turns(8).poll(0);
    write(dir, "peer-frames", peer);

    // ---- the CM ----

    // Two sessions connect through the daemon's own address: listen, resolve, route, REQ with
    // 56 bytes of private data, REP, RTU (Stats lists the ids), DREQ, DREP, timewait,
    // TIMEWAIT_EXIT, destroy.
    Program loop;
    loop.open().open().setup(0, 1, 16).setup(1, 1, 16).pair(0, kRc).pair(1, kRc);
    loop.cm_listen(0, kTcp, kRc, kOwn4, kPort7174).cm_connect(1, kTcp, kRc, kOwn4, kPort7174, {kGo, kGo}, 2);
    loop.turns(4).cm_respond(0, {kQuery | kAccept}).turns(4).cm_respond(1, {kGo}).turns(4).cm_respond(0, {kGo});
    loop.cm_stats(1).cm_op(1, kCmDisconnect, 0).turns(4).cm_respond(0, {kAccept}).turns(4).cm_respond(1, {kGo});
    loop.cm_time(4).cm_respond(0, {kGo}).cm_respond(1, {kGo}).cm_drain(0).cm_drain(1);
    write(dir, "cm-loopback-connect-disconnect", loop);

    // A request rejected with 148 bytes of private data; IPv6.
    Program rej;
    rej.open().open().cm_listen(0, kTcp, kRc, kOwn6, kPort7174).cm_connect(1, kTcp, kRc, kOwn6, kPort7174, {kGo, kGo});
    rej.turns(4).cm_respond(0, {kReject}).turns(4).cm_respond(1, {kAccept}).cm_op(1, kCmDestroyId, 0).cm_drain(1);
    write(dir, "cm-reject", rej);

    // SIDR: a UD id resolves a UDP-space service with 180 bytes of private data.
    Program sidr;
    sidr.open().open().cm_listen(0, kUdp, kUd, kOwn4, kPort7175);
    sidr.cm_connect(1, kUdp, kUd, kOwn4, kPort7175, {kGo, kGo}, 9).turns(4).cm_respond(0, {kAccept}).turns(4);
    sidr.cm_respond(1, {kGo}).cm_connect(1, kUdp, kUd, kOwn4, kPort7174, {kGo, kGo, kGo}).turns(4);
    write(dir, "cm-sidr", sidr);

    // A listener destroyed with three requests it never took: each gets REJ 28.
    Program backlog;
    backlog.open().open().cm_listen(0, kTcp, kRc, kOwn4, kPort7174);
    for (uint8_t i = 0; i < 3; ++i) backlog.cm_connect(1, kTcp, kRc, kOwn4, kPort7174, {kGo, kGo}, 0, i);
    backlog.turns(4).cm_op(0, kCmDestroyId, 0).turns(4).cm_respond(1, {kAccept, kAccept, kAccept}).cm_drain(0);
    write(dir, "cm-listener-destroyed-with-requests", backlog);

    // The peer's CM over the wire: our REQ to it answered with REP, our RTU, its DREQ; its REQ to
    // our listener, accepted, its RTU; a duplicate REQ (the delayed MRA); a REJ "timeout".
    Program peer_cm;
    peer_cm.open().action(Action::Inject).u8(1);
    peer_cm.turns(2).cm_connect(0, kTcp, kRc, kPeerIp4, kPort7174, {kGo, kGo}).turns(4);
    MadArgs rep;
    rep.attr = kRep;
    peer_cm.cm_mad(rep).turns(2).cm_respond(0, {kGo}).turns(2);
    MadArgs dreq;
    dreq.attr = kDreq;
    peer_cm.cm_mad(dreq).turns(2).cm_respond(0, {kAccept}).turns(2);
    peer_cm.cm_listen(0, kTcp, kRc, kOwn4, kPort7175, 3, kNewChannel);
    MadArgs req;
    req.ids = kRawIds;
    req.local = 0x00C0FFEE;
    req.port = kPort7175;
    req.private_length = 56;
    peer_cm.cm_mad(req).turns(2).cm_mad(req).turns(2).cm_respond(0, {kAccept}, 1).turns(2);
    MadArgs rtu;
    rtu.attr = kRtu;
    peer_cm.cm_mad(rtu).turns(2).cm_respond(0, {kGo}, 1);
    req.local = 0x00C0FFEF;
    req.qpn = 1;
    peer_cm.cm_mad(req).turns(2);
    MadArgs timeout;
    timeout.attr = kRej;
    timeout.ids = kRawIds;
    timeout.local = 0x00C0FFEF;
    timeout.code = 3;  // Timeout, the peer's GUID as ARI
    timeout.a = 8;
    peer_cm.cm_mad(timeout).turns(2).cm_respond(0, {kGo, kGo}, 1).cm_time(3).cm_drain(0).cm_drain(0, 1);
    write(dir, "cm-peer", peer_cm);

    // A peer that never answers: the REQ is resent 15 times (the clock jumps to each retry), then
    // UNREACHABLE; an address query to a silent neighbour times out.
    Program silent;
    silent.open().action(Action::Inject).u8(1);
    silent.turns(2);
    silent.cm_connect(0, kTcp, kRc, kPeerIp4, kPort7174, {kGo, kGo})
        .cm_connect(0, kTcp, kRc, kSilent, kPort7174, {kGo});
    silent.cm_time(8).cm_time(8).cm_time(2).cm_respond(0, {kGo, kGo, kGo});
    write(dir, "cm-peer-silent", silent);

    // A session dies holding ids in every state: listening, an untaken request, connected,
    // connecting, resolving; the other side hears DREQ and REJ.
    Program death;
    death.open().open().cm_listen(1, kTcp, kRc, kOwn4, kPort7174).cm_listen(0, kTcp, kRc, kOwn4, kPort7175);
    death.cm_connect(0, kTcp, kRc, kOwn4, kPort7174, {kGo, kGo}, 0, 1);
    death.cm_connect(0, kTcp, kRc, kOwn4, kPort7174, {kGo, kGo}, 0, 2);
    death.cm_connect(1, kTcp, kRc, kOwn4, kPort7175, {kGo, kGo}, 0, 3).turns(4).cm_respond(1, {kAccept}).turns(4);
    death.cm_respond(0, {kGo}).cm_connect(0, kTcp, kRc, kSilent, kPort7174, {kGo});
    death.action(Action::Disconnect).u8(0);
    death.turns(4).cm_respond(1, {kGo, kGo, kGo, kGo}).cm_time(2);
    write(dir, "cm-session-death", death);

    // MADs that are not what they say: base and class versions, responses, a Get of
    // ClassPortInfo and of another class, the wrong Q_Key, a short MAD, a flipped byte, the
    // daemon's own MAD echoed back, ids one off from a live connection's.
    Program bad;
    bad.open().action(Action::Inject).u8(1);
    bad.turns(2).cm_listen(0, kTcp, kRc, kOwn4, kPort7174);
    bad.cm_connect(0, kTcp, kRc, kPeerIp4, kPort7174, {kGo, kGo}).turns(2);
    MadArgs m;
    m.mad_mutation = 3;
    m.mad_value = 2;
    bad.cm_mad(m);
    m.mad_mutation = 4;
    bad.cm_mad(m);
    m.mad_mutation = 7;
    bad.cm_mad(m);
    m = MadArgs{};
    m.attr = kClassPortInfo;
    bad.cm_mad(m);
    m.attr = kOtherGet;
    m.a = 0x04;
    m.c = 1;
    bad.cm_mad(m);
    m = MadArgs{};
    m.frame_mutation = 4;
    m.frame_value = 0x12345678;
    bad.cm_mad(m);
    m.frame_mutation = 5;
    m.frame_value = 0xF0;
    bad.cm_mad(m);
    m.frame_mutation = 6;
    m.frame_value = 300;
    bad.cm_mad(m);
    m = MadArgs{};
    m.attr = kEcho;
    bad.cm_mad(m);
    m.attr = kMra;
    m.ids = kNearIds;
    m.delta = 1;
    bad.cm_mad(m);
    m.attr = kDreq;
    m.ids = kLiveIds;
    bad.cm_mad(m);
    m.attr = kSidrReq;
    m.ids = kRawIds;
    m.header = 2;
    bad.cm_mad(m).turns(4).cm_drain(0);
    write(dir, "cm-hostile-mads", bad);

    // A listener moved to another channel while an untaken request has an event of its own (the
    // peer gave up on it: REJ "timeout"), then destroyed.
    Program moved;
    moved.open().action(Action::Inject).u8(1);
    moved.turns(2).cm_listen(0, kTcp, kRc, kOwn4, kPort7174);
    MadArgs r2;
    r2.ids = kRawIds;
    r2.local = 0x00C0FFEE;
    r2.private_length = 8;
    MadArgs t2 = r2;
    t2.attr = kRej;
    t2.code = 3;
    t2.a = 8;
    moved.cm_mad(r2).turns(2).cm_mad(t2).turns(2).cm_create_channel(0);
    moved.action(Action::CmControl).u8(0).u8(kCmMigrateId).u8(0).u8(1).u8(0);
    moved.cm_op(0, kCmDestroyId, 0).cm_drain(0, 0).cm_drain(0, 1);
    write(dir, "cm-migrate-listener", moved);

    std::printf("%s: 21 seeds\n", dir.c_str());
    return 0;
}
