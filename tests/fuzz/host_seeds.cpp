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

    std::printf("%s: 12 seeds\n", dir.c_str());
    return 0;
}
