// The drop-in librdmacm.so.1 through rdma-core's own <rdma/rdma_cma.h> and <rdma/rdma_verbs.h>,
// against one real rnicd (check_rdmacm_api.py brings up the bed; $RNIC_RUN_DIR names its socket
// directory, $RNIC_TEST_IP and $RNIC_TEST_IP6 its addresses). Both ends of every connection
// live in this process on the one device: rnicd loops frames for its own address back through
// its CM and engine. What the rdmacm-utils do not show: the channel descriptor with real events,
// private data both ways (REQ, REP, REJ), the QP's states, the rdma_verbs.h helpers, SRQs,
// options, multicast's errno, wildcard binds, errno values from the daemon, and a dying daemon.
#define CATCH_CONFIG_MAIN
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <signal.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? v : "";
}

sockaddr_storage address(const std::string& ip, uint16_t port) {
    sockaddr_storage ss{};
    if (ip.find(':') != std::string::npos) {
        auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        REQUIRE(inet_pton(AF_INET6, ip.c_str(), &in6->sin6_addr) == 1);
    } else {
        auto* in = reinterpret_cast<sockaddr_in*>(&ss);
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        REQUIRE(inet_pton(AF_INET, ip.c_str(), &in->sin_addr) == 1);
    }
    return ss;
}

sockaddr* sa(sockaddr_storage& ss) {
    return reinterpret_cast<sockaddr*>(&ss);
}

uint16_t next_port() {
    static uint16_t port = static_cast<uint16_t>(20000 + getpid() % 12000);
    return ++port;
}

bool readable(int fd, int timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN) != 0;
}

// The next event of `ch`, waited for with poll() on its descriptor (at most 10 s).
rdma_cm_event* next_event(rdma_event_channel* ch) {
    REQUIRE(readable(ch->fd, 10'000));
    rdma_cm_event* e = nullptr;
    REQUIRE(rdma_get_cm_event(ch, &e) == 0);
    return e;
}

// The next event, which must be `type` with status 0; acknowledged unless `keep`.
rdma_cm_event* expect_event(rdma_event_channel* ch, rdma_cm_event_type type, bool keep = false) {
    rdma_cm_event* e = next_event(ch);
    INFO("got " << rdma_event_str(e->event) << " status " << e->status);
    REQUIRE(e->event == type);
    REQUIRE(e->status == 0);
    if (!keep) {
        REQUIRE(rdma_ack_cm_event(e) == 0);
        return nullptr;
    }
    return e;
}

ibv_qp_state qp_state(ibv_qp* qp) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    REQUIRE(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init) == 0);
    return attr.qp_state;
}

ibv_qp_init_attr rc_attr() {
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 4;
    a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.sq_sig_all = 1;
    return a;
}

// A server id listening on ip:port and a client id address- and route-resolved towards it,
// both on one channel.
struct Pair {
    rdma_event_channel* ch = nullptr;
    rdma_cm_id* listener = nullptr;
    rdma_cm_id* client = nullptr;
    uint16_t port = 0;

    explicit Pair(const std::string& ip, rdma_port_space ps = RDMA_PS_TCP) {
        ch = rdma_create_event_channel();
        REQUIRE(ch != nullptr);
        REQUIRE(rdma_create_id(ch, &listener, this, ps) == 0);
        port = next_port();
        sockaddr_storage ss = address(ip, port);
        REQUIRE(rdma_bind_addr(listener, sa(ss)) == 0);
        REQUIRE(listener->verbs != nullptr);  // bound to the device that owns the address
        REQUIRE(rdma_listen(listener, 4) == 0);
        REQUIRE(rdma_create_id(ch, &client, this, ps) == 0);
        REQUIRE(rdma_resolve_addr(client, nullptr, sa(ss), 2000) == 0);
        expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
        REQUIRE(rdma_resolve_route(client, 2000) == 0);
        expect_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
    }
    ~Pair() {
        if (client != nullptr) rdma_destroy_id(client);
        if (listener != nullptr) rdma_destroy_id(listener);
        rdma_destroy_event_channel(ch);
    }
};

}  // namespace

TEST_CASE("rdma_get_devices lists rnicd's context, the one ids get", "[api]") {
    int n = -1;
    ibv_context** list = rdma_get_devices(&n);
    REQUIRE(list != nullptr);
    REQUIRE(n == 1);
    CHECK(std::string(ibv_get_device_name(list[0]->device)) == "rnic0");
    CHECK(list[1] == nullptr);
    Pair p(env("RNIC_TEST_IP"));
    CHECK(p.client->verbs == list[0]);
    CHECK(p.listener->verbs == list[0]);
    rdma_free_devices(list);
}

TEST_CASE("the channel descriptor with a real daemon: poll, epoll, O_NONBLOCK", "[api]") {
    rdma_event_channel* ch = rdma_create_event_channel();
    REQUIRE(ch != nullptr);
    REQUIRE(fcntl(ch->fd, F_SETFL, O_NONBLOCK) == 0);
    rdma_cm_event* e = nullptr;
    CHECK(rdma_get_cm_event(ch, &e) == -1);
    CHECK(errno == EAGAIN);
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd, &ev) == 0);
    rdma_cm_id* id = nullptr;
    REQUIRE(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_storage dst = address(env("RNIC_TEST_IP"), next_port());
    REQUIRE(rdma_resolve_addr(id, nullptr, sa(dst), 2000) == 0);
    epoll_event got{};
    REQUIRE(epoll_wait(ep, &got, 1, 10'000) == 1);  // the event makes the descriptor readable
    REQUIRE(rdma_get_cm_event(ch, &e) == 0);
    CHECK(e->event == RDMA_CM_EVENT_ADDR_RESOLVED);
    CHECK(e->id == id);
    CHECK_FALSE(readable(ch->fd, 0));  // nothing else waits
    rdma_cm_event* none = nullptr;
    CHECK(rdma_get_cm_event(ch, &none) == -1);
    CHECK(errno == EAGAIN);
    // The route the daemon resolved: our own address both ways, a port picked for the source.
    CHECK(rdma_get_local_addr(id)->sa_family == AF_INET);
    CHECK(rdma_get_src_port(id) != 0);
    CHECK(rdma_get_dst_port(id) == reinterpret_cast<sockaddr_in*>(&dst)->sin_port);
    CHECK(std::memcmp(&reinterpret_cast<sockaddr_in*>(rdma_get_peer_addr(id))->sin_addr,
                      &reinterpret_cast<sockaddr_in*>(&dst)->sin_addr, 4) == 0);
    // destroy waits for the acknowledgement of the event it still holds: it comes from here.
    std::atomic<bool> destroyed{false};
    std::thread destroyer([&] {
        CHECK(rdma_destroy_id(id) == 0);
        destroyed = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK_FALSE(destroyed);
    CHECK(rdma_ack_cm_event(e) == 0);  // the ADDR_RESOLVED taken above
    destroyer.join();
    CHECK(destroyed);
    close(ep);
    rdma_destroy_event_channel(ch);
}

TEST_CASE("RC over rdma_cm: private data both ways, QP states, the rdma_verbs.h helpers, disconnect", "[api]") {
    for (const std::string& ip : {env("RNIC_TEST_IP"), env("RNIC_TEST_IP6")}) {
        INFO("server address " << ip);
        Pair p(ip);
        ibv_qp_init_attr attr = rc_attr();
        REQUIRE(rdma_create_qp(p.client, nullptr, &attr) == 0);
        CHECK(qp_state(p.client->qp) == IBV_QPS_INIT);
        CHECK(p.client->send_cq != nullptr);  // the library's own CQs, with channels
        CHECK(p.client->recv_cq_channel != nullptr);
        const char req_data[] = "hello from the active side";
        rdma_conn_param param{};
        param.private_data = req_data;
        param.private_data_len = sizeof req_data;
        param.responder_resources = 1;
        param.initiator_depth = 1;
        param.retry_count = 7;
        param.rnr_retry_count = 7;
        REQUIRE(rdma_connect(p.client, &param) == 0);

        rdma_cm_event* req = expect_event(p.ch, RDMA_CM_EVENT_CONNECT_REQUEST, true);
        CHECK(req->listen_id == p.listener);
        rdma_cm_id* server = req->id;
        CHECK(server != p.listener);
        CHECK(server->context == p.listener->context);
        CHECK(server->verbs == p.listener->verbs);
        REQUIRE(req->param.conn.private_data_len >= sizeof req_data);
        CHECK(std::memcmp(req->param.conn.private_data, req_data, sizeof req_data) == 0);
        CHECK(req->param.conn.responder_resources == 1);
        CHECK(req->param.conn.initiator_depth == 1);
        CHECK(req->param.conn.qp_num == p.client->qp->qp_num);
        CHECK(rdma_get_dst_port(server) == rdma_get_src_port(p.client));
        REQUIRE(rdma_ack_cm_event(req) == 0);

        ibv_qp_init_attr sattr = rc_attr();
        REQUIRE(rdma_create_qp(server, nullptr, &sattr) == 0);
        static char buf[64];  // not on the stack: our libibverbs refuses to register stack pages
        std::memset(buf, 0, sizeof buf);
        ibv_mr* smr = rdma_reg_msgs(server, buf, sizeof buf);
        REQUIRE(smr != nullptr);
        REQUIRE(rdma_post_recv(server, nullptr, buf, sizeof buf, smr) == 0);
        const char rep_data[] = "welcome";
        rdma_conn_param accept{};
        accept.private_data = rep_data;
        accept.private_data_len = sizeof rep_data;
        accept.responder_resources = 1;
        accept.initiator_depth = 1;
        REQUIRE(rdma_accept(server, &accept) == 0);
        CHECK(qp_state(server->qp) == IBV_QPS_RTS);  // RTR and RTS before the REP

        // Two ESTABLISHED: the client's (its CONNECT_RESPONSE turned into RTR, RTS and the RTU
        // by the library) with the REP's private data, and the server's.
        bool client_up = false, server_up = false;
        for (int i = 0; i < 2; ++i) {
            rdma_cm_event* e = expect_event(p.ch, RDMA_CM_EVENT_ESTABLISHED, true);
            if (e->id == p.client) {
                client_up = true;
                REQUIRE(e->param.conn.private_data_len >= sizeof rep_data);
                CHECK(std::memcmp(e->param.conn.private_data, rep_data, sizeof rep_data) == 0);
            } else {
                CHECK(e->id == server);
                server_up = true;
            }
            rdma_ack_cm_event(e);
        }
        CHECK(client_up);
        CHECK(server_up);
        CHECK(qp_state(p.client->qp) == IBV_QPS_RTS);

        static char msg[] = "data over the connection";
        ibv_mr* cmr = rdma_reg_msgs(p.client, msg, sizeof msg);
        REQUIRE(cmr != nullptr);
        REQUIRE(rdma_post_send(p.client, nullptr, msg, sizeof msg, cmr, 0) == 0);
        ibv_wc wc{};
        REQUIRE(rdma_get_send_comp(p.client, &wc) == 1);
        CHECK(wc.status == IBV_WC_SUCCESS);
        REQUIRE(rdma_get_recv_comp(server, &wc) == 1);
        CHECK(wc.status == IBV_WC_SUCCESS);
        CHECK(wc.byte_len == sizeof msg);
        CHECK(std::string(buf) == msg);

        REQUIRE(rdma_disconnect(p.client) == 0);
        CHECK(qp_state(p.client->qp) == IBV_QPS_ERR);  // flushed before the DREQ
        // The server hears the DREQ; its own rdma_disconnect sends the DREP that the client's
        // DISCONNECTED waits for (or the DREQ's timeout), as with Linux's CM.
        bool client_down = false, server_down = false;
        for (int i = 0; i < 2; ++i) {
            rdma_cm_event* e = expect_event(p.ch, RDMA_CM_EVENT_DISCONNECTED, true);
            const bool at_server = e->id == server;
            (at_server ? server_down : client_down) = true;
            rdma_ack_cm_event(e);
            if (at_server) REQUIRE(rdma_disconnect(server) == 0);
        }
        CHECK(client_down);
        CHECK(server_down);
        rdma_dereg_mr(cmr);
        rdma_dereg_mr(smr);
        rdma_destroy_qp(server);
        rdma_destroy_qp(p.client);
        REQUIRE(rdma_destroy_id(server) == 0);
    }
}

TEST_CASE("a reject with private data reaches the client, and no listener is reason 8", "[api]") {
    Pair p(env("RNIC_TEST_IP"));
    ibv_qp_init_attr attr = rc_attr();
    REQUIRE(rdma_create_qp(p.client, nullptr, &attr) == 0);
    rdma_conn_param param{};
    param.responder_resources = 1;
    param.initiator_depth = 1;
    REQUIRE(rdma_connect(p.client, &param) == 0);
    rdma_cm_event* req = expect_event(p.ch, RDMA_CM_EVENT_CONNECT_REQUEST, true);
    rdma_cm_id* server = req->id;
    rdma_ack_cm_event(req);
    const char why[] = "not today";
    REQUIRE(rdma_reject(server, why, sizeof why) == 0);
    rdma_cm_event* e = next_event(p.ch);
    CHECK(e->event == RDMA_CM_EVENT_REJECTED);
    CHECK(e->id == p.client);
    CHECK(e->status == 28);  // IB_CM_REJ_CONSUMER_DEFINED
    REQUIRE(e->param.conn.private_data_len >= sizeof why);
    CHECK(std::memcmp(e->param.conn.private_data, why, sizeof why) == 0);
    rdma_ack_cm_event(e);
    CHECK(qp_state(p.client->qp) == IBV_QPS_ERR);
    rdma_destroy_qp(p.client);
    REQUIRE(rdma_destroy_id(server) == 0);

    // A port nobody listens on.
    rdma_cm_id* lone = nullptr;
    REQUIRE(rdma_create_id(p.ch, &lone, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_storage nobody = address(env("RNIC_TEST_IP"), next_port());
    REQUIRE(rdma_resolve_addr(lone, nullptr, sa(nobody), 2000) == 0);
    expect_event(p.ch, RDMA_CM_EVENT_ADDR_RESOLVED);
    REQUIRE(rdma_resolve_route(lone, 2000) == 0);
    expect_event(p.ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
    rdma_conn_param none{};
    none.qp_num = 0x123;
    REQUIRE(rdma_connect(lone, &none) == 0);
    e = next_event(p.ch);
    CHECK(e->event == RDMA_CM_EVENT_REJECTED);
    CHECK(e->status == 8);  // IB_CM_REJ_INVALID_SERVICE_ID
    rdma_ack_cm_event(e);
    REQUIRE(rdma_destroy_id(lone) == 0);
}

TEST_CASE("synchronous ids: rdma_create_ep, rdma_get_request, an SRQ, errors as return values", "[api]") {
    const std::string port = std::to_string(next_port());
    rdma_addrinfo hints{};
    hints.ai_flags = RAI_PASSIVE;
    hints.ai_port_space = RDMA_PS_TCP;
    rdma_addrinfo* res = nullptr;
    REQUIRE(rdma_getaddrinfo(env("RNIC_TEST_IP").c_str(), port.c_str(), &hints, &res) == 0);
    ibv_qp_init_attr attr = rc_attr();
    rdma_cm_id* listen_id = nullptr;
    REQUIRE(rdma_create_ep(&listen_id, res, nullptr, &attr) == 0);
    rdma_freeaddrinfo(res);
    REQUIRE(rdma_listen(listen_id, 1) == 0);

    hints.ai_flags = 0;
    REQUIRE(rdma_getaddrinfo(env("RNIC_TEST_IP").c_str(), port.c_str(), &hints, &res) == 0);
    rdma_cm_id* client = nullptr;
    REQUIRE(rdma_create_ep(&client, res, nullptr, nullptr) == 0);  // resolved, no QP
    rdma_freeaddrinfo(res);
    ibv_srq_init_attr srq_attr{};
    srq_attr.attr.max_wr = 4;
    srq_attr.attr.max_sge = 1;
    REQUIRE(rdma_create_srq(client, nullptr, &srq_attr) == 0);
    REQUIRE(client->srq != nullptr);
    ibv_qp_init_attr cattr = rc_attr();
    REQUIRE(rdma_create_qp(client, nullptr, &cattr) == 0);
    CHECK(client->qp->srq == client->srq);
    static char buf[32];
    ibv_mr* mr = rdma_reg_msgs(client, buf, sizeof buf);
    REQUIRE(rdma_post_recv(client, nullptr, buf, sizeof buf, mr) == 0);  // to the SRQ

    std::thread server([&] {
        rdma_cm_id* id = nullptr;
        REQUIRE(rdma_get_request(listen_id, &id) == 0);  // with the QP rdma_create_ep asked for
        REQUIRE(id->qp != nullptr);
        REQUIRE(rdma_accept(id, nullptr) == 0);  // returns once ESTABLISHED
        static char msg[] = "to the SRQ";
        ibv_mr* smr = rdma_reg_msgs(id, msg, sizeof msg);
        REQUIRE(rdma_post_send(id, nullptr, msg, sizeof msg, smr, 0) == 0);
        ibv_wc wc{};
        REQUIRE(rdma_get_send_comp(id, &wc) == 1);
        CHECK(wc.status == IBV_WC_SUCCESS);
        rdma_cm_event* e = nullptr;
        REQUIRE(rdma_get_cm_event(id->channel, &e) == 0);  // the client's disconnect
        CHECK(e->event == RDMA_CM_EVENT_DISCONNECTED);
        rdma_ack_cm_event(e);
        rdma_dereg_mr(smr);
        rdma_destroy_ep(id);
    });
    REQUIRE(rdma_connect(client, nullptr) == 0);  // returns once ESTABLISHED
    ibv_wc wc{};
    REQUIRE(rdma_get_recv_comp(client, &wc) == 1);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(std::string(buf) == "to the SRQ");
    REQUIRE(rdma_disconnect(client) == 0);  // waits for its DISCONNECTED
    server.join();
    rdma_dereg_mr(mr);
    rdma_destroy_ep(client);  // QP, SRQ, CQs and id
    rdma_destroy_ep(listen_id);

    // A synchronous connect to a port nobody listens on fails with ECONNREFUSED.
    hints.ai_flags = 0;
    const std::string nobody = std::to_string(next_port());
    REQUIRE(rdma_getaddrinfo(env("RNIC_TEST_IP").c_str(), nobody.c_str(), &hints, &res) == 0);
    ibv_qp_init_attr qattr = rc_attr();
    REQUIRE(rdma_create_ep(&client, res, nullptr, &qattr) == 0);
    rdma_freeaddrinfo(res);
    CHECK(rdma_connect(client, nullptr) == -1);
    CHECK(errno == ECONNREFUSED);
    rdma_destroy_ep(client);
}

TEST_CASE("addresses, options and multicast as the kernel answers them", "[api]") {
    rdma_event_channel* ch = rdma_create_event_channel();
    REQUIRE(ch != nullptr);
    rdma_cm_id* id = nullptr;
    REQUIRE(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_storage foreign = address("192.0.2.77", 1);  // TEST-NET-1: on no interface
    CHECK(rdma_bind_addr(id, sa(foreign)) == -1);
    CHECK(errno == EADDRNOTAVAIL);
    // The wildcard: a port of the daemon's choosing, no device.
    sockaddr_storage any = address("0.0.0.0", 0);
    REQUIRE(rdma_bind_addr(id, sa(any)) == 0);
    CHECK(id->verbs == nullptr);
    const uint16_t port = ntohs(rdma_get_src_port(id));
    CHECK(port != 0);
    CHECK(rdma_bind_addr(id, sa(any)) == -1);  // bound already
    CHECK(errno == EINVAL);
    rdma_cm_id* other = nullptr;
    REQUIRE(rdma_create_id(ch, &other, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_storage same = address(env("RNIC_TEST_IP"), port);
    CHECK(rdma_bind_addr(other, sa(same)) == -1);  // the wildcard holds the port (Linux's cma_check_port)
    CHECK(errno == EADDRNOTAVAIL);
    REQUIRE(rdma_listen(id, 0) == 0);
    CHECK(ntohs(rdma_get_src_port(id)) == port);
    uint8_t tos = 32;
    CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos) == 0);
    uint8_t timeout = 16;
    CHECK(rdma_set_option(other, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, sizeof timeout) == 0);
    REQUIRE(rdma_destroy_id(other) == 0);
    REQUIRE(rdma_destroy_id(id) == 0);

    // Multicast: rnicd has none yet, which Linux answers with ENOSYS for such a device.
    rdma_cm_id* ud = nullptr;
    REQUIRE(rdma_create_id(ch, &ud, nullptr, RDMA_PS_UDP) == 0);
    sockaddr_storage mine = address(env("RNIC_TEST_IP"), 0);
    REQUIRE(rdma_bind_addr(ud, sa(mine)) == 0);
    sockaddr_storage group = address("239.1.2.3", 0);
    CHECK(rdma_join_multicast(ud, sa(group), nullptr) == -1);
    CHECK(errno == ENOSYS);
    CHECK(rdma_leave_multicast(ud, sa(group)) == -1);
    CHECK(errno == EADDRNOTAVAIL);
    REQUIRE(rdma_destroy_id(ud) == 0);
    rdma_destroy_event_channel(ch);
}

TEST_CASE("UD over rdma_cm: SIDR gives the QPN, the Q_Key and an address vector for an AH", "[api]") {
    Pair p(env("RNIC_TEST_IP"), RDMA_PS_UDP);
    ibv_qp_init_attr attr = rc_attr();
    attr.qp_type = IBV_QPT_UD;
    REQUIRE(rdma_create_qp(p.client, nullptr, &attr) == 0);
    CHECK(qp_state(p.client->qp) == IBV_QPS_RTS);  // UD goes all the way at creation
    REQUIRE(rdma_connect(p.client, nullptr) == 0);
    rdma_cm_event* req = expect_event(p.ch, RDMA_CM_EVENT_CONNECT_REQUEST, true);
    rdma_cm_id* server = req->id;
    CHECK(req->param.ud.ah_attr.is_global == 1);  // the way back (a SIDR_REQ carries no QPN)
    rdma_ack_cm_event(req);
    ibv_qp_init_attr sattr = rc_attr();
    sattr.qp_type = IBV_QPT_UD;
    REQUIRE(rdma_create_qp(server, nullptr, &sattr) == 0);
    static char buf[40 + 64];
    ibv_mr* smr = rdma_reg_msgs(server, buf, sizeof buf);
    REQUIRE(rdma_post_recv(server, nullptr, buf, sizeof buf, smr) == 0);
    REQUIRE(rdma_accept(server, nullptr) == 0);
    rdma_cm_event* up = expect_event(p.ch, RDMA_CM_EVENT_ESTABLISHED, true);
    CHECK(up->id == p.client);
    CHECK(up->param.ud.qp_num == server->qp->qp_num);
    CHECK(up->param.ud.qkey == RDMA_UDP_QKEY);
    CHECK(up->param.ud.ah_attr.is_global == 1);
    ibv_ah* ah = ibv_create_ah(p.client->pd, &up->param.ud.ah_attr);
    REQUIRE(ah != nullptr);
    const uint32_t remote_qpn = up->param.ud.qp_num;
    rdma_ack_cm_event(up);
    static char msg[] = "datagram";
    ibv_mr* cmr = rdma_reg_msgs(p.client, msg, sizeof msg);
    REQUIRE(rdma_post_ud_send(p.client, nullptr, msg, sizeof msg, cmr, 0, ah, remote_qpn) == 0);
    ibv_wc wc{};
    REQUIRE(rdma_get_send_comp(p.client, &wc) == 1);
    CHECK(wc.status == IBV_WC_SUCCESS);
    REQUIRE(rdma_get_recv_comp(server, &wc) == 1);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(std::string(buf + 40) == msg);  // after the 40-byte GRH
    ibv_destroy_ah(ah);
    rdma_dereg_mr(cmr);
    rdma_dereg_mr(smr);
    rdma_destroy_qp(server);
    rdma_destroy_qp(p.client);
    REQUIRE(rdma_destroy_id(server) == 0);
}

// Run last, alone: it SIGKILLs the daemon ($RNIC_TEST_DAEMON_PIDFILE).
TEST_CASE("a dying daemon: DEVICE_REMOVAL for every id on it, then ENODEV", "[death]") {
    rdma_event_channel* ch = rdma_create_event_channel();
    REQUIRE(ch != nullptr);
    rdma_cm_id* a = nullptr;
    rdma_cm_id* b = nullptr;
    REQUIRE(rdma_create_id(ch, &a, nullptr, RDMA_PS_TCP) == 0);
    REQUIRE(rdma_create_id(ch, &b, nullptr, RDMA_PS_UDP) == 0);
    sockaddr_storage s1 = address(env("RNIC_TEST_IP"), next_port());
    sockaddr_storage s2 = address(env("RNIC_TEST_IP"), next_port());
    REQUIRE(rdma_bind_addr(a, sa(s1)) == 0);
    REQUIRE(rdma_listen(a, 1) == 0);
    REQUIRE(rdma_bind_addr(b, sa(s2)) == 0);
    std::ifstream pidfile(env("RNIC_TEST_DAEMON_PIDFILE"));
    pid_t pid = 0;
    pidfile >> pid;
    REQUIRE(pid > 0);
    REQUIRE(kill(pid, SIGKILL) == 0);
    bool got_a = false, got_b = false;
    for (int i = 0; i < 2; ++i) {
        rdma_cm_event* e = next_event(ch);  // poll wakes: the daemon's sockets hung up
        CHECK(e->event == RDMA_CM_EVENT_DEVICE_REMOVAL);
        (e->id == a ? got_a : got_b) = true;
        rdma_ack_cm_event(e);
    }
    CHECK(got_a);
    CHECK(got_b);
    CHECK_FALSE(readable(ch->fd, 200));
    CHECK(rdma_listen(a, 1) == -1);
    CHECK(errno == ENODEV);
    CHECK(rdma_destroy_id(a) == 0);
    CHECK(rdma_destroy_id(b) == 0);
    rdma_destroy_event_channel(ch);
}
