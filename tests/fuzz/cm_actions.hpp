// The connection manager's part of the hostile-client fuzzer (fuzz_host_service.cpp): the CM ops
// of abi/cm.hpp with fuzzed fields and handles, compound flows that take a pair of sessions
// through listen, resolve, connect, accept and disconnect on loopback (or towards the peer),
// CM MADs arriving from the wire as GSI frames built with the wire library, jumps of the clock to
// the CM's timers, and the channel sockets' bytes (cm_actions.cpp; the MADs in
// cm_wire_actions.cpp, what holds after a program in cm_checks.cpp). Layouts, as read from the
// program:
//
//   CmControl    u8 session, u8 op (abi::kCmOpFirst + op % 23; 21 is no op; 22 is Stats' page
//                of CM ids: u8 what, u8 first id [>= 0xF0: u32], and nothing else), the op's
//                fields in the order of cm_actions.cpp's control(), u8 body shape (0xF0-0xF7:
//                1-8 bytes short, 0xF8-0xFF: longer)
//   CmListen     u8 session, u8 channel (0xFF: a new one), port space, QP type, u8 options
//                (1 REUSEADDR, 2 AFONLY set to bit 2, 8 no bind), address, backlog
//   CmConnect    u8 session, u8 channel, port space, QP type, u8 options (1 REUSEADDR, 2 bind
//                the source first, 4 TOS, 8 ACK timeout), address (source), address
//                (destination), timeout, reactions
//   CmRespond    u8 session, u8 channel (of the session), reactions
//   CmMad        u8 attribute, u8 route, u8 ids mode, u8 index, u8 delta [mode 3: u32 local, u32
//                remote], u8 GUID [3: u64], u8 QPN [>= 0xC0: u32], u32 PSN, u8 a, u8 b, u8 c,
//                u8 d, u16 code, u8 port space [>= 0xF0: u64 service ID, else port], u8 rdma_cm
//                header mode, u16 its source port, u8 private data length, u8 seed, u8 MAD
//                mutation, u32 value, u8 frame mutation, u32 value
//   CmTime       u8 count, u8 mode
//   CmChannelIo  u8 session, u8 channel, u8 mode, u8 count
//
// where
//   address      u8 kind [raw: u16 family, 16 bytes, u32 scope], port
//   port         u8: below 0x80 a fixed port, below 0xC0 the port of a live id, else a u16
//   reactions    u8 count, 8 reaction bytes, connection parameters, private data length, u8 seed
//   parameters   private data length, u8 seed, QPN, u8 Q_Key, u8 responder resources, u8
//                initiator depth, u8 flags, u8 retry count, u8 RNR retry count
#pragma once

#include <unistd.h>

#include <cstdint>
#include <deque>
#include <set>
#include <span>
#include <vector>

#include "host_program.hpp"
#include "rnic/cm/cm_service.hpp"
#include "rnic/host/abi/cm.hpp"
#include "rnic/wire/mad.hpp"
#include "session_client.hpp"

namespace rnic::host::fuzz {

// A descriptor closed with its holder.
class OwnedFd {
public:
    OwnedFd() = default;
    explicit OwnedFd(int fd) : fd_(fd) {}
    OwnedFd(OwnedFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    OwnedFd& operator=(OwnedFd&& o) noexcept {
        if (this != &o) {
            reset();
            fd_ = o.fd_;
            o.fd_ = -1;
        }
        return *this;
    }
    OwnedFd(const OwnedFd&) = delete;
    OwnedFd& operator=(const OwnedFd&) = delete;
    ~OwnedFd() { reset(); }
    int get() const { return fd_; }
    void reset() {
        if (fd_ >= 0) close(fd_);
        fd_ = -1;
    }

private:
    int fd_ = -1;
};

// A CM channel as the session received it: the socket the application polls and the daemon's
// end of it, which the library is handed too.
struct CmChannelEnds {
    uint32_t handle = 0;
    OwnedFd client;
    OwnedFd daemon;
    // Every event queued since the last full drain (the bytes read, then events taken until
    // EAGAIN) wrote a byte, so an unreadable socket means no event waits. False once the
    // session read bytes without taking the events.
    bool in_sync = true;
};

// What one session was told by the CM. Nothing is forgotten when the daemon destroys it.
struct CmHeld {
    std::vector<uint32_t> ids;
    std::vector<CmChannelEnds> channels;
    // Every id the session was told of (CreateId, CONNECT_REQUEST): an event for any other id,
    // or a CONNECT_REQUEST for one of them, is out of order; unless the session sent raw
    // messages, whose replies nobody reads.
    std::set<uint32_t> told;
    bool raw = false;
};

struct CmParty {
    test::SessionClient* client = nullptr;  // null: there is no session
    CmHeld* held = nullptr;
    std::span<const test::QpRings> qps;  // QPNs for the connection parameters
};

// The fuzzer's sessions, as the CM actions see them.
class CmSessions {
public:
    virtual size_t count() const = 0;
    virtual CmParty party(size_t index) = 0;

protected:
    ~CmSessions() = default;
};

class CmFuzzer {
public:
    CmFuzzer(ProgramReader& program, test::ServiceRig& rig, CmSessions& sessions);

    void control();
    void listen();
    void connect();
    void respond();
    void mad();
    void time();
    void channel_io();

    // Whether the program reached the CM at all (the checks that cost time run only then).
    bool used() const { return used_; }

private:
    struct Reactions {
        uint8_t count = 0;
        uint8_t what[8]{};
        abi::CmConnParam param{};
        uint32_t reject_length = 0;
        uint8_t reject_seed = 0;
    };
    // A MAD the daemon sent to the peer, which the peer may answer.
    struct SentMad {
        wire::Mad mad;
    };

    CmParty session();
    uint32_t pick_id(const CmParty& s);
    uint32_t pick_channel(const CmParty& s);
    uint32_t pick_qpn(const CmParty& s);
    abi::CmAddress address();
    uint16_t port();
    uint32_t port_space();
    uint32_t qp_type();
    uint32_t timeout();
    uint32_t backlog();
    uint32_t private_length();
    abi::CmConnParam conn_param(const CmParty& s);
    Reactions reactions(const CmParty& s);
    void stats_page(const CmParty& s);

    // One CM op; 0, the daemon's errno or test::kNoReply. `out` gets the reply when given.
    int call(const CmParty& s, abi::CmOp op, const void* body, size_t length, test::SessionReply* out = nullptr);
    template <class T>
    int call(const CmParty& s, abi::CmOp op, const T& body, test::SessionReply* out = nullptr) {
        return call(s, op, &body, sizeof body, out);
    }
    // Records what a successful reply made (channels, ids) and checks what it says.
    void track(const CmParty& s, abi::CmOp op, test::SessionReply& r);
    // The event belongs to the session that took it: its id (and a CONNECT_REQUEST's listener)
    // is one of the session's in the daemon's CM.
    void check_event(const CmParty& s, const abi::CmEvent& ev);
    uint32_t own_channel(const CmParty& s, uint8_t which);
    uint32_t create_id(const CmParty& s, uint32_t channel, uint32_t ps, uint32_t type);
    void react(const CmParty& s, uint32_t channel, const Reactions& r);
    // Drains the channel's socket and takes its events until EAGAIN, checking that an unreadable
    // socket of a channel in sync had nothing queued.
    void drain(const CmParty& s, CmChannelEnds& ch);
    void collect_sent();
    std::vector<cm::IdInfo> live() const;

    ProgramReader& p_;
    test::ServiceRig& rig_;
    CmSessions& sessions_;
    bool used_ = false;
    size_t sent_seen_ = 0;      // frames of the port's sent list already looked at
    std::deque<SentMad> sent_;  // the latest MADs the daemon sent to the peer
    uint32_t psn_ = 0;          // the peer's GSI PSN
};

// After every session closed: the CM holds no id and no channel, its counters add up with the
// datapath's; with `deep`, Stats lists no CM id and charges no user for one. Then a well-behaved
// pair of sessions connects through the daemon's own address (listen, resolve, connect with
// private data, accept, RTU, DREQ, DREP, the channel socket readable for each event), and is
// reclaimed in turn.
void check_cm_after_close(test::ServiceRig& rig, bool deep);

}  // namespace rnic::host::fuzz
