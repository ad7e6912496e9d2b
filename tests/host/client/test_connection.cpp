// The client library against the in-test daemon: control messages both ways, the data path
// over real ring memfds, completion and async events, and a daemon that dies.
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "fake_daemon.hpp"
#include "rnic/host/client/connection.hpp"
#include "rnic/host/client/verbs_values.hpp"

using namespace rnic::host;
using namespace rnic::host::client;
using rnic::test::FakeDaemon;

namespace {

struct Fixture {
    std::unique_ptr<FakeDaemon> daemon;
    std::unique_ptr<Connection> conn;
    Fixture() {
        int sv[2];
        REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
        daemon = std::make_unique<FakeDaemon>(sv[1]);
        auto c = Connection::adopt(sv[0]);
        REQUIRE(c.ok());
        conn = std::move(*c);
    }
    ~Fixture() {
        conn.reset();
        daemon.reset();
    }
    uint16_t last_op() {
        std::lock_guard l(daemon->mutex);
        return daemon->ops.back();
    }
};

abi::QpCaps caps(uint32_t send_wr, uint32_t recv_wr) {
    return abi::QpCaps{send_wr, recv_wr, 1, 1, 0};
}

bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
}

std::string perms_at(const void* addr) {
    const auto a = reinterpret_cast<uintptr_t>(addr);
    FILE* f = std::fopen("/proc/self/maps", "re");
    char line[4096];
    std::string out;
    while (std::fgets(line, sizeof line, f) != nullptr) {
        unsigned long s = 0, e = 0;
        char p[8] = {};
        if (std::sscanf(line, "%lx-%lx %7s", &s, &e, p) == 3 && a >= s && a < e) out = p;
    }
    std::fclose(f);
    return out;
}

}  // namespace

TEST_CASE("Hello: device attributes, the status page read-only, the async socket and ring") {
    Fixture f;
    REQUIRE(f.conn->device_name() == "rnic0");
    REQUIRE(f.conn->hello().session_id == 7);
    REQUIRE(f.conn->hello().gid_count == 2);
    CHECK(f.conn->hello().gid_types[1] == abi::kGidTypeRoceV2);
    REQUIRE(f.conn->device_attr().max_qp_wr == 1024);
    REQUIRE(perms_at(f.conn->status_page()) == "r--s");
    f.daemon->status_page()->loop_turns.store(99);
    REQUIRE(f.conn->status_page()->loop_turns.load() == 99);
    // The async socket the daemon made is the one it polls.
    REQUIRE(!readable(f.conn->async_fd()));
    const char one = 1;
    REQUIRE(send(f.daemon->async_notify_fd, &one, 1, MSG_DONTWAIT) == 1);
    REQUIRE(readable(f.conn->async_fd()));
    auto port = f.conn->query_port(1);
    REQUIRE(port.ok());
    REQUIRE(port->max_mtu == 5);
    REQUIRE(f.conn->query_port(2).error() == EINVAL);
}

TEST_CASE("control verbs round trip - daemon errors come back as their errno") {
    Fixture f;
    auto pd = f.conn->alloc_pd();
    REQUIRE(pd.ok());
    REQUIRE(f.last_op() == uint16_t(abi::Op::AllocPd));
    auto cq = f.conn->create_cq(10, nullptr, 0);
    REQUIRE(cq.ok());
    REQUIRE((*cq)->ring.size() == 16);
    REQUIRE((*cq)->cqe == 10);
    auto qp = f.conn->create_qp(*pd, QpInitAttr{verbs::kQptRc, *cq, *cq, nullptr, caps(4, 4), false});
    REQUIRE(qp.ok());
    REQUIRE((*qp)->cap.max_inline_data == 64);  // as granted
    REQUIRE((*qp)->sq.max_inline == 64);
    REQUIRE((*qp)->rq.ring.size() == 4);

    f.daemon->fail_ops[uint16_t(abi::Op::ModifyQp)] = EINVAL;
    abi::QpAttr attr{};
    attr.qp_state = 1;
    REQUIRE(f.conn->modify_qp(*qp, attr, verbs::kQpState) == EINVAL);
    REQUIRE(f.conn->modify_qp(*qp, attr, verbs::kQpState) == 0);
    REQUIRE((*qp)->state.load() == 1);
    REQUIRE(f.conn->query_qp(*qp, 0).ok());
    REQUIRE(f.conn->destroy_cq(*cq) == EBUSY);  // a QP still uses it

    auto srq = f.conn->create_srq(*pd, 16, 2, 0);
    REQUIRE(srq.ok());
    REQUIRE(f.conn->query_srq(*srq)->max_wr == 16);
    REQUIRE(f.conn->modify_srq(*srq, 2, 0, 5) == 0);
    REQUIRE((*srq)->srq_limit == 5);

    auto ah = f.conn->create_ah(*pd, abi::AddressVector{});
    REQUIRE(ah.ok());
    REQUIRE(f.conn->destroy_ah(*ah) == 0);
    REQUIRE(f.conn->destroy_srq(*srq) == 0);
    REQUIRE(f.conn->destroy_qp(*qp) == 0);
    REQUIRE(f.last_op() == uint16_t(abi::Op::DestroyQp));
    REQUIRE(f.conn->destroy_cq(*cq) == 0);
    REQUIRE(f.conn->dealloc_pd(*pd) == 0);

    f.daemon->stats_json = R"({"log_level":"info"})";
    REQUIRE(*f.conn->stats() == R"({"log_level":"info"})");
    REQUIRE(f.conn->set_log_level("debug") == 0);
    REQUIRE(f.conn->set_log_level("loud") == EINVAL);
    REQUIRE(f.daemon->log_level == "debug");
}

TEST_CASE("reg_mr shares each segment once per connection and releases it with its last MR") {
    Fixture f;
    auto pd = f.conn->alloc_pd();
    const size_t ps = page_size();
    auto* buf =
        static_cast<uint8_t*>(mmap(nullptr, 4 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    std::memset(buf, 0x77, 4 * ps);
    auto a = f.conn->reg_mr(*pd, buf + 10, 2 * ps - 10, 7);
    REQUIRE(a.ok());
    uint32_t first_segment;
    {
        std::lock_guard l(f.daemon->mutex);
        REQUIRE(f.daemon->segment_fds.size() == 1);
        first_segment = f.daemon->segment_fds.begin()->first;
        REQUIRE(f.daemon->segment_lengths[first_segment] == 2 * ps);
        REQUIRE(f.daemon->last_reg.addr == reinterpret_cast<uintptr_t>(buf + 10));
        REQUIRE(f.daemon->last_reg.page_offset == 10);
        REQUIRE(f.daemon->last_reg.iova == reinterpret_cast<uintptr_t>(buf + 10));
        REQUIRE(f.daemon->last_reg.access == 7);
        REQUIRE(f.daemon->last_runs.size() == 1);
        // The daemon's mapping of the fd is the application's buffer.
        auto* view = static_cast<uint8_t*>(
            mmap(nullptr, 2 * ps, PROT_READ | PROT_WRITE, MAP_SHARED, f.daemon->segment_fds[first_segment], 0));
        REQUIRE(view[20] == 0x77);
        view[20] = 1;
        REQUIRE(buf[20] == 1);
        munmap(view, 2 * ps);
    }
    auto b = f.conn->reg_mr_iova(*pd, buf + ps, 2 * ps, 0, 1);  // overlaps a's second page
    REQUIRE(b.ok());
    {
        std::lock_guard l(f.daemon->mutex);
        REQUIRE(f.daemon->segment_fds.size() == 2);  // only the new page went over
        REQUIRE(f.daemon->last_runs.size() == 2);
        REQUIRE(f.daemon->last_runs[0].segment_id == first_segment);
        REQUIRE(f.daemon->last_runs[0].offset == ps);
        REQUIRE(f.daemon->last_reg.iova == 0);
    }
    REQUIRE(f.conn->dereg_mr(*a) == 0);
    {
        std::lock_guard l(f.daemon->mutex);
        REQUIRE(f.daemon->released_segments.empty());  // b still uses both
    }
    REQUIRE(f.conn->dereg_mr(*b) == 0);
    {
        std::lock_guard l(f.daemon->mutex);
        REQUIRE(f.daemon->released_segments.size() == 2);
    }
    // A failed RegMr takes back what it shared.
    f.daemon->fail_ops[uint16_t(abi::Op::RegMr)] = EINVAL;
    auto* other = static_cast<uint8_t*>(mmap(nullptr, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(f.conn->reg_mr(*pd, other, 100, 1).error() == EINVAL);
    {
        std::lock_guard l(f.daemon->mutex);
        REQUIRE(f.daemon->released_segments.size() == 3);
    }
    auto* none = mmap(nullptr, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(f.conn->reg_mr(*pd, none, 100, 1).error() == EFAULT);
    munmap(none, ps);
    munmap(other, ps);
    munmap(buf, 4 * ps);
}

TEST_CASE("post, doorbell, poll: CQEs retire SQ and RQ slots - the kick only when the daemon sleeps") {
    Fixture f;
    auto pd = f.conn->alloc_pd();
    auto cq = f.conn->create_cq(16, nullptr, 0);
    auto qp = f.conn->create_qp(*pd, QpInitAttr{verbs::kQptRc, *cq, *cq, nullptr, caps(2, 2), false});
    REQUIRE(qp.ok());
    Qp* q = *qp;
    const abi::Sge sge{0x1000, 8, 1};
    SendWr w2{2, nullptr, &sge, 1, verbs::kWrSend, verbs::kSendSignaled, 0, 0, 0, 0, 0, nullptr, 0, 0, 0, 0};
    SendWr w1{1, &w2, &sge, 1, verbs::kWrSend, 0, 0, 0, 0, 0, 0, nullptr, 0, 0, 0, 0};
    const SendWr* bad = nullptr;
    REQUIRE(f.conn->post_send(q, &w1, &bad) == 0);
    REQUIRE(q->sq.ring.header().producer.load() == 2);
    REQUIRE(f.daemon->take_kicks() == 0);  // awake daemon: no syscall

    SendWr w3 = w1;
    w3.wr_id = 3;
    w3.next = nullptr;
    REQUIRE(f.conn->post_send(q, &w3, &bad) == ENOMEM);
    REQUIRE(bad == &w3);

    const RecvWr r1{10, nullptr, &sge, 1};
    REQUIRE(f.conn->post_recv(q, &r1, nullptr) == 0);

    abi::Cqe c{};
    c.wr_id = 2;
    c.qp_num = q->qpn;
    c.opcode = verbs::kWcSend;
    c.wqe_index = 1;
    f.daemon->push_cqe(q->send_cq->handle, c);
    c.wr_id = 10;
    c.opcode = verbs::kWcRecv;
    c.wqe_index = 0;
    f.daemon->push_cqe(q->send_cq->handle, c);
    abi::Cqe out[4];
    REQUIRE(f.conn->poll_cq(*cq, 1, out) == 1);
    REQUIRE(out[0].wr_id == 2);
    REQUIRE(q->sq.retired.load() == 2);
    REQUIRE(f.conn->poll_cq(*cq, 4, out) == 1);
    REQUIRE(out[0].wr_id == 10);
    REQUIRE(q->rq.retired.load() == 1);
    REQUIRE((*cq)->ring.header().consumer.load() == 2);
    REQUIRE(f.conn->poll_cq(*cq, 4, out) == 0);

    f.daemon->status_page()->sleeping.store(1);
    REQUIRE(f.conn->post_send(q, &w3, &bad) == 0);
    REQUIRE(f.daemon->take_kicks() == 1);

    // Receives: a sleeping daemon is kicked for the first outstanding one only; later ones wait
    // for the frame that will consume the first (which wakes it).
    const RecvWr r2{11, nullptr, &sge, 1};
    const RecvWr r3{12, nullptr, &sge, 1};
    REQUIRE(f.conn->post_recv(q, &r2, nullptr) == 0);
    REQUIRE(f.daemon->take_kicks() == 1);
    REQUIRE(f.conn->post_recv(q, &r3, nullptr) == 0);
    REQUIRE(f.daemon->take_kicks() == 0);
    REQUIRE(q->rq.ring.header().producer.load() == 3);  // published all the same
    c.opcode = verbs::kWcRecv;
    for (uint32_t i : {1u, 2u}) {
        c.wr_id = 10 + i;
        c.wqe_index = i;
        f.daemon->push_cqe(q->send_cq->handle, c);
    }
    REQUIRE(f.conn->poll_cq(*cq, 4, out) == 2);
    REQUIRE(q->rq.retired.load() == 3);
    REQUIRE(f.conn->post_recv(q, &r1, nullptr) == 0);  // nothing outstanding again: kick
    REQUIRE(f.daemon->take_kicks() == 1);
    f.daemon->status_page()->sleeping.store(0);

    // RESET: the rings start over on both sides.
    abi::QpAttr attr{};
    attr.qp_state = verbs::kQpsReset;
    REQUIRE(f.conn->modify_qp(q, attr, verbs::kQpState) == 0);
    REQUIRE(q->sq.produced == 0);
    REQUIRE(q->sq.retired.load() == 0);
    REQUIRE(f.conn->post_send(q, &w1, &bad) == 0);
    REQUIRE(q->sq.ring.header().producer.load() == 2);

    // A corrupt CQ producer index is an error, not a flood of garbage.
    (*cq)->ring.header().producer.store((*cq)->consumed + 1000);
    REQUIRE(f.conn->poll_cq(*cq, 4, out) == -EIO);
}

TEST_CASE("a vanished daemon: flush completions for every outstanding WQE, EIO, DEVICE_FATAL") {
    Fixture f;
    auto pd = f.conn->alloc_pd();
    auto scq = f.conn->create_cq(16, nullptr, 0);
    auto rcq = f.conn->create_cq(16, nullptr, 0);
    auto qp = f.conn->create_qp(*pd, QpInitAttr{verbs::kQptRc, *scq, *rcq, nullptr, caps(4, 4), false});
    Qp* q = *qp;
    const abi::Sge sge{0x1000, 8, 1};
    SendWr w2{2, nullptr, &sge, 1, verbs::kWrRdmaWrite, verbs::kSendSignaled, 0, 0, 0, 0, 0, nullptr, 0, 0, 0, 0};
    SendWr w1{1, &w2, &sge, 1, verbs::kWrSend, verbs::kSendSignaled, 0, 0, 0, 0, 0, nullptr, 0, 0, 0, 0};
    REQUIRE(f.conn->post_send(q, &w1, nullptr) == 0);
    const RecvWr r2{21, nullptr, &sge, 1};
    const RecvWr r1{20, &r2, &sge, 1};
    REQUIRE(f.conn->post_recv(q, &r1, nullptr) == 0);
    abi::Cqe c{};
    c.wr_id = 1;
    c.qp_num = q->qpn;
    c.wqe_index = 0;
    f.daemon->push_cqe((*scq)->handle, c);  // delivered just before the crash

    f.daemon->die();
    // The real completion first, then the flush (in one poll or two: the watchdog may have
    // noticed the death before the first).
    std::vector<abi::Cqe> got;
    abi::Cqe out[8];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (got.size() < 2 && std::chrono::steady_clock::now() < deadline) {
        const int n = f.conn->poll_cq(*scq, 8, out);
        REQUIRE(n >= 0);
        got.insert(got.end(), out, out + n);
    }
    REQUIRE(f.conn->dead());
    REQUIRE(got.size() == 2);
    REQUIRE(got[0].wr_id == 1);
    REQUIRE(got[0].status == verbs::kWcSuccess);
    REQUIRE(got[1].wr_id == 2);
    REQUIRE(got[1].status == verbs::kWcWrFlushErr);
    REQUIRE(got[1].opcode == verbs::kWcRdmaWrite);
    REQUIRE(f.conn->poll_cq(*scq, 8, out) == 0);
    REQUIRE(f.conn->poll_cq(*rcq, 8, out) == 2);
    REQUIRE(out[0].wr_id == 20);
    REQUIRE(out[1].wr_id == 21);
    REQUIRE(out[1].opcode == verbs::kWcRecv);

    REQUIRE(f.conn->post_send(q, &w1, nullptr) == EIO);
    REQUIRE(f.conn->alloc_pd().error() == EIO);
    AsyncEvent e{};
    REQUIRE(f.conn->get_async_event(&e) == 0);
    REQUIRE(e.event_type == verbs::kEventDeviceFatal);
    REQUIRE(f.conn->get_async_event(&e) == EIO);
    // Cleaning up still works.
    REQUIRE(f.conn->destroy_qp(q) == 0);
    REQUIRE(f.conn->destroy_cq(*scq) == 0);
    REQUIRE(f.conn->dealloc_pd(*pd) == 0);
}

TEST_CASE("a control call notices the dead daemon at once") {
    Fixture f;
    f.daemon->die();
    REQUIRE(f.conn->alloc_pd().error() == EIO);
    REQUIRE(f.conn->dead());
}

TEST_CASE("the daemon's hang-up alone makes async_fd and channel fds readable (no verb called)") {
    Fixture f;
    auto ch = f.conn->create_comp_channel();
    REQUIRE(ch.ok());
    auto cq = f.conn->create_cq(4, *ch, 0);
    REQUIRE(cq.ok());
    REQUIRE(!readable(f.conn->async_fd()));
    REQUIRE(!readable((*ch)->fd));
    f.daemon->die();
    // What an application blocked in its own poll() on both fds sees.
    pollfd p[2] = {{f.conn->async_fd(), POLLIN, 0}, {(*ch)->fd, POLLIN, 0}};
    int ready = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (ready < 2 && std::chrono::steady_clock::now() < deadline) {
        REQUIRE(poll(p, 2, 1000) >= 0);
        ready = ((p[0].revents & POLLIN) != 0) + ((p[1].revents & POLLIN) != 0);
    }
    REQUIRE(ready == 2);
    REQUIRE(f.conn->dead());
    AsyncEvent e{};
    REQUIRE(f.conn->get_async_event(&e) == 0);
    REQUIRE(e.event_type == verbs::kEventDeviceFatal);
    REQUIRE(*f.conn->get_cq_event(*ch) == *cq);
    f.conn->ack_cq_events(*cq, 1);
    REQUIRE(f.conn->destroy_cq(*cq) == 0);
    REQUIRE(f.conn->destroy_comp_channel(*ch) == 0);
}

TEST_CASE("a daemon that never answers: the control verb times out, the connection is dead") {
    Fixture f;
    f.conn->set_reply_timeout_ms(200);
    auto pd = f.conn->alloc_pd();
    REQUIRE(pd.ok());
    {
        std::lock_guard l(f.daemon->mutex);
        f.daemon->silent_ops.insert(static_cast<uint16_t>(abi::Op::CreateCq));
    }
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(f.conn->create_cq(4, nullptr, 0).error() == ETIMEDOUT);
    REQUIRE(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    REQUIRE(f.conn->dead());
    REQUIRE(f.conn->alloc_pd().error() == EIO);
    AsyncEvent e{};
    REQUIRE(f.conn->get_async_event(&e) == 0);
    REQUIRE(e.event_type == verbs::kEventDeviceFatal);
    REQUIRE(f.conn->dealloc_pd(*pd) == 0);  // cleaning up still works
}

TEST_CASE("completion channels: arm, event, non-blocking EAGAIN, ack before destroy - death wakes a waiter") {
    Fixture f;
    auto ch = f.conn->create_comp_channel();
    REQUIRE(ch.ok());
    auto cq = f.conn->create_cq(4, *ch, 0);
    REQUIRE(cq.ok());
    REQUIRE(f.conn->req_notify_cq(*cq, true) == 0);
    REQUIRE((*cq)->ring.header().arm.load() == abi::kArmSolicited);
    REQUIRE(f.conn->req_notify_cq(*cq, false) == 0);
    REQUIRE((*cq)->ring.header().arm.load() == abi::kArmNext);

    REQUIRE(fcntl((*ch)->fd, F_SETFL, O_NONBLOCK) == 0);
    REQUIRE(f.conn->get_cq_event(*ch).error() == EAGAIN);
    f.daemon->raise_cq_event((*cq)->handle);
    f.daemon->raise_cq_event((*cq)->handle);
    REQUIRE(*f.conn->get_cq_event(*ch) == *cq);
    REQUIRE(readable((*ch)->fd));  // one more is pending
    REQUIRE(*f.conn->get_cq_event(*ch) == *cq);
    REQUIRE(!readable((*ch)->fd));
    REQUIRE(f.conn->get_cq_event(*ch).error() == EAGAIN);
    f.conn->ack_cq_events(*cq, 2);

    REQUIRE(fcntl((*ch)->fd, F_SETFL, 0) == 0);
    Result<Cq*> woken = Error{0};
    std::thread waiter([&] { woken = f.conn->get_cq_event(*ch); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    f.daemon->die();
    waiter.join();
    REQUIRE(woken.ok());
    REQUIRE(*woken == *cq);
    f.conn->ack_cq_events(*cq, 1);
    REQUIRE(f.conn->get_cq_event(*ch).error() == EIO);
    REQUIRE(f.conn->destroy_comp_channel(*ch) == EBUSY);
    REQUIRE(f.conn->destroy_cq(*cq) == 0);
    REQUIRE(f.conn->destroy_comp_channel(*ch) == 0);
}

TEST_CASE("async events from the ring name this connection's objects") {
    Fixture f;
    auto pd = f.conn->alloc_pd();
    auto cq = f.conn->create_cq(4, nullptr, 0);
    auto qp = f.conn->create_qp(*pd, QpInitAttr{verbs::kQptUd, *cq, *cq, nullptr, caps(2, 2), false});
    REQUIRE(fcntl(f.conn->async_fd(), F_SETFL, O_NONBLOCK) == 0);
    AsyncEvent e{};
    REQUIRE(f.conn->get_async_event(&e) == EAGAIN);
    f.daemon->push_async_event(verbs::kEventQpFatal, (*qp)->qpn);
    f.daemon->push_async_event(verbs::kEventCqErr, (*cq)->handle);
    REQUIRE(f.conn->get_async_event(&e) == 0);
    REQUIRE(e.event_type == verbs::kEventQpFatal);
    REQUIRE(e.qp == *qp);
    REQUIRE(f.conn->get_async_event(&e) == 0);
    REQUIRE(e.cq == *cq);
    REQUIRE(!readable(f.conn->async_fd()));
    REQUIRE(f.conn->get_async_event(&e) == EAGAIN);
    // The daemon's own DEVICE_FATAL (shutdown) is not repeated when the socket then closes.
    f.daemon->push_async_event(verbs::kEventDeviceFatal, 1);
    f.daemon->die();
    REQUIRE(f.conn->get_async_event(&e) == 0);
    REQUIRE(e.event_type == verbs::kEventDeviceFatal);
    REQUIRE(f.conn->alloc_pd().error() == EIO);
    REQUIRE(f.conn->get_async_event(&e) == EIO);
}

TEST_CASE("no daemon: open fails with the socket's errno - devices are the run dir's sockets") {
    char dir[] = "/tmp/rnic-client-run-XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    REQUIRE(Connection::open("rnic0", dir).error() == ENOENT);
    REQUIRE(list_devices(dir)->empty());
    REQUIRE(list_devices(std::string(dir) + "/missing").error() == ENOENT);
    rmdir(dir);
}
