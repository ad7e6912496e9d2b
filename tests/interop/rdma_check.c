/* rdma_check: RDMA WRITE, READ and both atomics between two RC QPs with every byte checked, the
   one thing Debian's programs cannot show (perftest never looks at the data, the pingpongs only
   SEND). Built against rdma-core's libibverbs, it runs unmodified in the rxe VM and on rnicd
   (rnic-run), so each side can be the requester.

     server: rdma_check -d DEV -g GID_INDEX -p PORT [-m MTU] [-s SIZE] [-n ITERS]
     client: rdma_check ... SERVER_IP

   The QP data (QPN, PSN, GID, rkey, address) is exchanged over TCP, as the pingpongs do. The
   client, per iteration i: WRITEs pattern i into the server's buffer, READs it back into a
   second buffer and compares; FETCH_AND_ADDs 1 to the server's counter (the old value must be
   i) and COMPARE_AND_SWAPs a second word from i to i+1 (must return i). Then it tells the
   server over TCP, and the server checks its own memory: the last pattern and both counters.
   Exit 0 when everything matched; every wait is bounded (20 s per completion, 60 s on TCP).

   -w 1|2: the same through a memory window of that type. The server registers its buffer with
   IBV_ACCESS_MW_BIND, binds a window over the written area and the atomic words once its QP is
   ready (type 1: ibv_bind_mw; type 2: IBV_WR_BIND_MW by ibv_post_send, the rkey moved on by
   ibv_inc_rkey), checks the IBV_WC_BIND_MW completion and sends the window's rkey over TCP; the
   client uses only that rkey. Afterwards the window is taken away (type 2: the client's
   SEND_WITH_INV of the rkey, whose receive completion the server checks for IBV_WC_WITH_INV and
   invalidated_rkey; type 1: the server's zero-length ibv_bind_mw) and the client's READ through
   it must complete with IBV_WC_REM_ACCESS_ERR. -w 3 is type 2 taken away by the server's own
   IBV_WR_LOCAL_INV instead. -w and -x are not combined.

   -x (extended verbs): the same through ibv_create_cq_ex (every wc_flags rxe's provider accepts)
   and ibv_create_qp_ex, posting with ibv_wr_* and polling with ibv_start_poll/ibv_wc_read_*,
   each completion's opcode and QP number checked; after the last iteration the client WRITEs
   WITH_IMM the last pattern again and the server checks its receive completion (opcode
   RECV_RDMA_WITH_IMM, immediate, byte_len, wc_flags, QP number) through the accessors. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct dest {
    uint32_t qpn, psn, rkey;
    uint64_t addr;
    uint8_t gid[16];
};

/* One buffer on each side: [0, size) is written and read (the client's source), then two
   8-byte atomic words at `words` (8-byte aligned, as atomics need), then the client's read-back
   area and its 8-byte atomic result. */
struct ctx {
    struct ibv_context *dev;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_cq_ex *cqx; /* -x: the extended CQ (cq is its ibv_cq) */
    struct ibv_qp_ex *qpx; /* -x: the QP's work-request API */
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    uint8_t *buf;
    size_t size, words, back, result, total;
};

static int die(const char *what) {
    fprintf(stderr, "rdma_check: %s failed: %s\n", what, strerror(errno));
    return 1;
}

static uint8_t pattern(int iter, size_t i) { return (uint8_t)(i * 7 + (size_t)iter * 13 + (i >> 8)); }

static int tcp_exchange(const char *server, int port, const struct dest *mine, struct dest *theirs) {
    int fd = -1;
    if (server) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        if (inet_pton(AF_INET, server, &a.sin_addr) != 1) return -1;
        for (int tries = 0; tries < 100; tries++) { /* the server may not listen yet: 10 s */
            fd = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) break;
            close(fd);
            fd = -1;
            usleep(100000);
        }
    } else {
        int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1)) return -1;
        fd = accept(l, NULL, NULL);
        close(l);
    }
    if (fd < 0) return -1;
    struct timeval tv = {.tv_sec = 60};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (write(fd, mine, sizeof *mine) != sizeof *mine || recv(fd, theirs, sizeof *theirs, MSG_WAITALL) != sizeof *theirs) {
        close(fd);
        return -1;
    }
    return fd;
}

static int connect_qp(struct ctx *c, int gid_index, enum ibv_mtu mtu, const struct dest *mine, const struct dest *d) {
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                               IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE};
    if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return die("INIT");
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = d->qpn;
    a.rq_psn = d->psn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.hop_limit = 1; /* as the pingpongs ask; Linux sends the route's 64 anyway */
    a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
    memcpy(a.ah_attr.grh.dgid.raw, d->gid, 16);
    if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return die("RTR");
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14; /* 67 ms, as perftest and the pingpongs */
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = mine->psn;
    a.max_rd_atomic = 4;
    if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                     IBV_QP_MAX_QP_RD_ATOMIC))
        return die("RTS");
    return 0;
}

/* Waits (`seconds` at most) for one completion; 0 with *wc filled, 1 on timeout or error. */
static int wait_wc(struct ctx *c, struct ibv_wc *wc, const char *what, int seconds) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int n = ibv_poll_cq(c->cq, 1, wc);
        if (n < 0) return die("poll_cq");
        if (n == 1) return 0;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > seconds) {
            fprintf(stderr, "rdma_check: %s: no completion in %d s\n", what, seconds);
            return 1;
        }
    }
}

/* -x: the request through the ibv_wr_* API instead of ibv_post_send. */
static int post_ex(struct ctx *c, const struct ibv_send_wr *wr) {
    struct ibv_qp_ex *x = c->qpx;
    ibv_wr_start(x);
    x->wr_id = wr->wr_id;
    x->wr_flags = wr->send_flags;
    switch (wr->opcode) {
        case IBV_WR_RDMA_WRITE: ibv_wr_rdma_write(x, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr); break;
        case IBV_WR_RDMA_WRITE_WITH_IMM:
            ibv_wr_rdma_write_imm(x, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, wr->imm_data);
            break;
        case IBV_WR_RDMA_READ: ibv_wr_rdma_read(x, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr); break;
        case IBV_WR_ATOMIC_FETCH_AND_ADD:
            ibv_wr_atomic_fetch_add(x, wr->wr.atomic.rkey, wr->wr.atomic.remote_addr, wr->wr.atomic.compare_add);
            break;
        case IBV_WR_ATOMIC_CMP_AND_SWP:
            ibv_wr_atomic_cmp_swp(x, wr->wr.atomic.rkey, wr->wr.atomic.remote_addr, wr->wr.atomic.compare_add,
                                  wr->wr.atomic.swap);
            break;
        default: ibv_wr_abort(x); return EINVAL;
    }
    ibv_wr_set_sge_list(x, (size_t)wr->num_sge, wr->sg_list);
    return ibv_wr_complete(x);
}

/* -x: one completion through the extended CQ (20 s at most), its fields through the accessors. */
struct ex_wc {
    enum ibv_wc_status status;
    enum ibv_wc_opcode opcode;
    uint32_t qp_num, byte_len;
    unsigned int wc_flags;
    uint32_t imm;
};
static int poll_ex(struct ctx *c, struct ex_wc *out) {
    struct ibv_poll_cq_attr attr = {0};
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int rc = ibv_start_poll(c->cqx, &attr);
        if (rc == 0) {
            out->status = c->cqx->status;
            out->opcode = ibv_wc_read_opcode(c->cqx);
            out->qp_num = ibv_wc_read_qp_num(c->cqx);
            out->byte_len = ibv_wc_read_byte_len(c->cqx);
            out->wc_flags = ibv_wc_read_wc_flags(c->cqx);
            out->imm = ntohl(ibv_wc_read_imm_data(c->cqx));
            ibv_end_poll(c->cqx);
            return 0;
        }
        if (rc != ENOENT) return die("ibv_start_poll");
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 20) return 1;
    }
}

static enum ibv_wc_opcode wc_opcode_of(enum ibv_wr_opcode op) {
    switch (op) {
        case IBV_WR_RDMA_WRITE:
        case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
        case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
        case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
        case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
        default: return IBV_WC_SEND;
    }
}

/* Posts one signaled work request and waits (20 s at most) for its completion. */
static int run_wr(struct ctx *c, struct ibv_send_wr *wr, const char *what, int iter) {
    struct ibv_send_wr *bad;
    if (c->qpx) {
        struct ex_wc w;
        if (post_ex(c, wr)) return die(what);
        if (poll_ex(c, &w)) {
            fprintf(stderr, "rdma_check: %s %d: no completion in 20 s\n", what, iter);
            return 1;
        }
        if (w.status != IBV_WC_SUCCESS || w.opcode != wc_opcode_of(wr->opcode) || w.qp_num != c->qp->qp_num) {
            fprintf(stderr, "rdma_check: %s %d completed with %s, opcode %d, qp 0x%x\n", what, iter,
                    ibv_wc_status_str(w.status), (int)w.opcode, w.qp_num);
            return 1;
        }
        return 0;
    }
    if (ibv_post_send(c->qp, wr, &bad)) return die(what);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct ibv_wc wc;
        int n = ibv_poll_cq(c->cq, 1, &wc);
        if (n < 0) return die("poll_cq");
        if (n == 1) {
            if (wc.status == IBV_WC_SUCCESS) return 0;
            fprintf(stderr, "rdma_check: %s %d completed with %s\n", what, iter, ibv_wc_status_str(wc.status));
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 20) {
            fprintf(stderr, "rdma_check: %s %d: no completion in 20 s\n", what, iter);
            return 1;
        }
    }
}

static int client(struct ctx *c, const struct dest *d, int iters) {
    uint8_t *src = c->buf, *back = c->buf + c->back;
    uint64_t *result = (uint64_t *)(c->buf + c->result);
    struct ibv_sge sge = {.lkey = c->mr->lkey};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED};
    for (int it = 0; it < iters; it++) {
        for (size_t i = 0; i < c->size; i++) src[i] = pattern(it, i);
        sge.addr = (uintptr_t)src;
        sge.length = (uint32_t)c->size;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = d->addr;
        wr.wr.rdma.rkey = d->rkey;
        if (run_wr(c, &wr, "RDMA WRITE", it)) return 1;
        memset(back, 0, c->size);
        sge.addr = (uintptr_t)back;
        wr.opcode = IBV_WR_RDMA_READ;
        if (run_wr(c, &wr, "RDMA READ", it)) return 1;
        for (size_t i = 0; i < c->size; i++)
            if (back[i] != src[i]) {
                fprintf(stderr, "rdma_check: iteration %d: byte %zu read back 0x%02x, wrote 0x%02x\n", it, i, back[i], src[i]);
                return 1;
            }
        sge.addr = (uintptr_t)result;
        sge.length = 8;
        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.remote_addr = d->addr + c->words;
        wr.wr.atomic.compare_add = 1;
        wr.wr.atomic.rkey = d->rkey;
        *result = ~0ull;
        if (run_wr(c, &wr, "FETCH_AND_ADD", it)) return 1;
        if (*result != (uint64_t)it) {
            fprintf(stderr, "rdma_check: FETCH_AND_ADD %d returned %llu\n", it, (unsigned long long)*result);
            return 1;
        }
        wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
        wr.wr.atomic.remote_addr = d->addr + c->words + 8;
        wr.wr.atomic.compare_add = (uint64_t)it;
        wr.wr.atomic.swap = (uint64_t)it + 1;
        *result = ~0ull;
        if (run_wr(c, &wr, "CMP_AND_SWAP", it)) return 1;
        if (*result != (uint64_t)it) {
            fprintf(stderr, "rdma_check: CMP_AND_SWAP %d returned %llu\n", it, (unsigned long long)*result);
            return 1;
        }
    }
    if (c->qpx) { /* the last pattern again, WITH_IMM: the server checks its receive completion */
        sge.addr = (uintptr_t)src;
        sge.length = (uint32_t)c->size;
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.imm_data = htonl(0x5eed0000u + (uint32_t)iters);
        wr.wr.rdma.remote_addr = d->addr;
        wr.wr.rdma.rkey = d->rkey;
        if (run_wr(c, &wr, "RDMA WRITE WITH_IMM", iters)) return 1;
    }
    return 0;
}

/* -x: the receive the client's WRITE_WITH_IMM consumed, read through the accessors. */
static int server_check_imm(struct ctx *c, int iters) {
    struct ex_wc w;
    if (poll_ex(c, &w)) {
        fprintf(stderr, "rdma_check: no RECV_RDMA_WITH_IMM completion in 20 s\n");
        return 1;
    }
    if (w.status != IBV_WC_SUCCESS || w.opcode != IBV_WC_RECV_RDMA_WITH_IMM || w.imm != 0x5eed0000u + (uint32_t)iters ||
        w.byte_len != c->size || !(w.wc_flags & IBV_WC_WITH_IMM) || w.qp_num != c->qp->qp_num) {
        fprintf(stderr, "rdma_check: receive completion %s opcode %d imm 0x%x byte_len %u wc_flags 0x%x qp 0x%x\n",
                ibv_wc_status_str(w.status), (int)w.opcode, w.imm, w.byte_len, w.wc_flags, w.qp_num);
        return 1;
    }
    return 0;
}

/* The server's own view: its memory holds what the client wrote last and both counters. */
static int server_check(struct ctx *c, int iters) {
    for (size_t i = 0; i < c->size; i++)
        if (c->buf[i] != pattern(iters - 1, i)) {
            fprintf(stderr, "rdma_check: server byte %zu is 0x%02x, want 0x%02x\n", i, c->buf[i], pattern(iters - 1, i));
            return 1;
        }
    uint64_t add, swap;
    memcpy(&add, c->buf + c->words, 8);
    memcpy(&swap, c->buf + c->words + 8, 8);
    if (add != (uint64_t)iters || swap != (uint64_t)iters) {
        fprintf(stderr, "rdma_check: server counters %llu %llu, want %d\n", (unsigned long long)add,
                (unsigned long long)swap, iters);
        return 1;
    }
    return 0;
}

/* ---- memory windows (-w) ---- */

/* Server: a window of `type` over [buf, buf + len) with remote write, read and atomic rights. */
static int bind_window(struct ctx *c, struct ibv_mw *mw, int type, uint64_t len, uint32_t *rkey) {
    struct ibv_mw_bind_info info = {.mr = c->mr, .addr = (uintptr_t)c->buf, .length = len,
                                    .mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                                       IBV_ACCESS_REMOTE_ATOMIC};
    if (type == 1) {
        struct ibv_mw_bind b = {.wr_id = 71, .send_flags = IBV_SEND_SIGNALED, .bind_info = info};
        if (ibv_bind_mw(c->qp, mw, &b)) return die("ibv_bind_mw");
        *rkey = mw->rkey; /* the verb moved it on */
    } else {
        struct ibv_send_wr wr = {.wr_id = 71, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED}, *bad;
        wr.bind_mw.mw = mw;
        wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
        wr.bind_mw.bind_info = info;
        if (ibv_post_send(c->qp, &wr, &bad)) return die("IBV_WR_BIND_MW");
        *rkey = mw->rkey = wr.bind_mw.rkey;
    }
    struct ibv_wc wc;
    if (wait_wc(c, &wc, "the bind", 20)) return 1;
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_BIND_MW || wc.wr_id != 71) {
        fprintf(stderr, "rdma_check: bind completed with %s, opcode %d\n", ibv_wc_status_str(wc.status), wc.opcode);
        return 1;
    }
    return 0;
}

/* Client, after the window is gone: a READ through it must fail with a remote access error. */
static int read_must_fail(struct ctx *c, const struct dest *d) {
    struct ibv_sge sge = {.addr = (uintptr_t)(c->buf + c->back), .length = 8, .lkey = c->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 72, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
                             .send_flags = IBV_SEND_SIGNALED}, *bad;
    wr.wr.rdma.remote_addr = d->addr;
    wr.wr.rdma.rkey = d->rkey;
    if (ibv_post_send(c->qp, &wr, &bad)) return die("the READ through the dead window");
    struct ibv_wc wc;
    if (wait_wc(c, &wc, "the READ through the dead window", 20)) return 1;
    if (wc.status != IBV_WC_REM_ACCESS_ERR) {
        fprintf(stderr, "rdma_check: READ through the dead window completed with %s\n", ibv_wc_status_str(wc.status));
        return 1;
    }
    return 0;
}

/* Client, type 2: SEND_WITH_INV of the window's rkey (the server checks its receive). */
static int send_invalidate(struct ctx *c, uint32_t rkey) {
    struct ibv_sge sge = {.addr = (uintptr_t)c->buf, .length = 8, .lkey = c->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 73, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_INV,
                             .send_flags = IBV_SEND_SIGNALED}, *bad;
    wr.invalidate_rkey = rkey;
    if (ibv_post_send(c->qp, &wr, &bad)) return die("SEND_WITH_INV");
    struct ibv_wc wc;
    if (wait_wc(c, &wc, "SEND_WITH_INV", 20)) return 1;
    if (wc.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "rdma_check: SEND_WITH_INV completed with %s\n", ibv_wc_status_str(wc.status));
        return 1;
    }
    return 0;
}

/* Server, type 2: the receive of the client's SEND_WITH_INV names the window's rkey. Linux rxe
   (6.1) hands user space the kernel's IB_WC_WITH_INVALIDATE bit (1 << 2), which verbs.h calls
   IBV_WC_IP_CSUM_OK, instead of IBV_WC_WITH_INV (1 << 3): either says "invalidated" here. */
static int check_invalidated(struct ctx *c, uint32_t rkey) {
    struct ibv_wc wc;
    if (wait_wc(c, &wc, "the receive of SEND_WITH_INV", 120)) return 1;
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
        !(wc.wc_flags & (IBV_WC_WITH_INV | IBV_WC_IP_CSUM_OK)) ||
        wc.invalidated_rkey != rkey || wc.byte_len != 8) {
        fprintf(stderr, "rdma_check: SEND_WITH_INV received with %s, opcode %d, flags 0x%x, rkey 0x%x (want 0x%x)\n",
                ibv_wc_status_str(wc.status), wc.opcode, wc.wc_flags, wc.invalidated_rkey, rkey);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *devname = NULL, *server = NULL;
    int gid_index = 0, port = 18600, iters = 10, window = 0, opt, extended = 0;
    size_t size = 65536;
    enum ibv_mtu mtu = IBV_MTU_1024;
    while ((opt = getopt(argc, argv, "d:g:p:m:s:n:w:x")) != -1) {
        switch (opt) {
            case 'd': devname = optarg; break;
            case 'g': gid_index = atoi(optarg); break;
            case 'p': port = atoi(optarg); break;
            case 'm': mtu = atoi(optarg) == 4096 ? IBV_MTU_4096 : atoi(optarg) == 2048 ? IBV_MTU_2048 : IBV_MTU_1024; break;
            case 's': size = strtoul(optarg, NULL, 0); break;
            case 'n': iters = atoi(optarg); break;
            case 'w': window = atoi(optarg); break;
            case 'x': extended = 1; break;
            default: fprintf(stderr, "usage: rdma_check -d DEV -g GID -p PORT [-m MTU] [-s SIZE] [-n N] [-w 1|2|3 | -x] [SERVER]\n"); return 2;
        }
    }
    if (optind < argc) server = argv[optind];
    if (size == 0 || size > (1u << 24) || iters < 1 || window < 0 || window > 3 || (window && extended)) return 2;
    const int mw_type = window == 1 ? 1 : 2; /* -w 3: type 2, invalidated locally */

    struct ibv_device **list = ibv_get_device_list(NULL);
    struct ibv_device *dev = NULL;
    for (int i = 0; list && list[i]; i++)
        if (!devname || !strcmp(ibv_get_device_name(list[i]), devname)) dev = list[i];
    if (!dev) return die("finding the device");
    struct ctx c = {.size = size, .words = (size + 7) & ~(size_t)7};
    c.back = c.words + 16;
    c.result = c.back + c.words;
    c.total = c.result + 8;
    if (!(c.dev = ibv_open_device(dev))) return die("ibv_open_device");
    if (!(c.pd = ibv_alloc_pd(c.dev))) return die("ibv_alloc_pd");
    if (extended) {
        /* Every wc_flags rxe's provider (rdma-core 44) accepts. */
        struct ibv_cq_init_attr_ex ca = {.cqe = 16,
                                         .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                                                     IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                                                     IBV_WC_EX_WITH_DLID_PATH_BITS};
        if (!(c.cqx = ibv_create_cq_ex(c.dev, &ca))) return die("ibv_create_cq_ex");
        c.cq = ibv_cq_ex_to_cq(c.cqx);
    } else if (!(c.cq = ibv_create_cq(c.dev, 16, NULL, NULL, 0))) {
        return die("ibv_create_cq");
    }
    c.buf = aligned_alloc(4096, (c.total + 4095) / 4096 * 4096);
    memset(c.buf, 0, c.total);
    if (!(c.mr = ibv_reg_mr(c.pd, c.buf, c.total,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                IBV_ACCESS_REMOTE_ATOMIC | (window ? IBV_ACCESS_MW_BIND : 0))))
        return die("ibv_reg_mr");
    struct ibv_qp_init_attr qa = {.send_cq = c.cq, .recv_cq = c.cq, .qp_type = IBV_QPT_RC,
                                  .cap = {.max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
    if (extended) {
        struct ibv_qp_init_attr_ex qx = {.send_cq = c.cq, .recv_cq = c.cq, .qp_type = IBV_QPT_RC, .cap = qa.cap,
                                         .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = c.pd,
                                         .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                                                           IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                                                           IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP};
        if (!(c.qp = ibv_create_qp_ex(c.dev, &qx))) return die("ibv_create_qp_ex");
        if (!(c.qpx = ibv_qp_to_qp_ex(c.qp))) return die("ibv_qp_to_qp_ex");
    } else if (!(c.qp = ibv_create_qp(c.pd, &qa))) {
        return die("ibv_create_qp");
    }

    struct dest mine = {.qpn = c.qp->qp_num, .rkey = c.mr->rkey, .addr = (uintptr_t)c.buf}, theirs;
    srand48(getpid() * time(NULL));
    mine.psn = (uint32_t)lrand48() & 0xffffff;
    union ibv_gid gid;
    if (ibv_query_gid(c.dev, 1, gid_index, &gid)) return die("ibv_query_gid");
    memcpy(mine.gid, gid.raw, 16);
    int fd = tcp_exchange(server, port, &mine, &theirs);
    if (fd < 0) return die("the TCP exchange");
    if (connect_qp(&c, gid_index, mtu, &mine, &theirs)) return 1;
    if (extended && !server) { /* the receive the client's WRITE_WITH_IMM takes (an RNR NAK until it is here) */
        struct ibv_recv_wr rwr = {.wr_id = 7}, *rbad;
        if (ibv_post_recv(c.qp, &rwr, &rbad)) return die("ibv_post_recv");
    }

    struct ibv_mw *mw = NULL;
    uint32_t mw_rkey = 0;
    if (window && !server) {
        if (!(mw = ibv_alloc_mw(c.pd, mw_type == 1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2))) return die("ibv_alloc_mw");
        if (window == 2) { /* the receive SEND_WITH_INV will land in */
            struct ibv_sge sge = {.addr = (uintptr_t)(c.buf + c.back), .length = 8, .lkey = c.mr->lkey};
            struct ibv_recv_wr rwr = {.wr_id = 74, .sg_list = &sge, .num_sge = 1}, *rbad;
            if (ibv_post_recv(c.qp, &rwr, &rbad)) return die("ibv_post_recv");
        }
        if (bind_window(&c, mw, mw_type, c.words + 16, &mw_rkey)) return 1;
        if (write(fd, &mw_rkey, 4) != 4) return die("sending the window's rkey");
    } else if (window) {
        if (recv(fd, &mw_rkey, 4, MSG_WAITALL) != 4) return die("receiving the window's rkey");
        theirs.rkey = mw_rkey;
    }

    char verdict = 'x';
    int rc;
    if (server) {
        rc = client(&c, &theirs, iters);
        if (!rc && window == 2) rc = send_invalidate(&c, mw_rkey) || read_must_fail(&c, &theirs);
        if (!rc && window && window != 2) { /* the server unbinds or invalidates, then the window must be dead */
            char ask = 'u', ack = 0;
            if (write(fd, &ask, 1) != 1 || recv(fd, &ack, 1, MSG_WAITALL) != 1) return die("the unbind exchange");
            rc = ack != 'U' || read_must_fail(&c, &theirs);
        }
        char done = rc ? 'f' : 'd';
        if (write(fd, &done, 1) != 1 || recv(fd, &verdict, 1, MSG_WAITALL) != 1) return die("the final TCP exchange");
        if (!rc && verdict != 'y') fprintf(stderr, "rdma_check: the server found its memory wrong\n");
        rc = rc || verdict != 'y';
    } else {
        char done = 0;
        if (window == 2 && check_invalidated(&c, mw_rkey)) return 1;
        if (window == 3) { /* IBV_WR_LOCAL_INV of the type 2 window's rkey */
            char ask = 0, ack = 'U';
            if (recv(fd, &ask, 1, MSG_WAITALL) != 1 || ask != 'u') return die("waiting for the unbind request");
            struct ibv_send_wr inv = {.wr_id = 76, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED}, *bad;
            inv.invalidate_rkey = mw_rkey;
            struct ibv_wc wc;
            if (ibv_post_send(c.qp, &inv, &bad)) return die("IBV_WR_LOCAL_INV");
            if (wait_wc(&c, &wc, "LOCAL_INV", 20)) return 1;
            if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_LOCAL_INV) {
                fprintf(stderr, "rdma_check: LOCAL_INV completed with %s, opcode %d\n", ibv_wc_status_str(wc.status),
                        wc.opcode);
                return 1;
            }
            if (write(fd, &ack, 1) != 1) return die("the unbind exchange");
        }
        if (window == 1) {
            char ask = 0, ack = 'U';
            if (recv(fd, &ask, 1, MSG_WAITALL) != 1 || ask != 'u') return die("waiting for the unbind request");
            /* Length 0 unbinds. The region is named all the same: rdma-core 44's rxe provider
               reads bind_info.mr->lkey even for a zero-length bind (NULL crashes there). */
            struct ibv_mw_bind unbind = {.wr_id = 75, .send_flags = IBV_SEND_SIGNALED,
                                         .bind_info = {.mr = c.mr, .addr = (uintptr_t)c.buf, .length = 0}};
            struct ibv_wc wc;
            if (ibv_bind_mw(c.qp, mw, &unbind)) return die("the zero-length ibv_bind_mw");
            if (wait_wc(&c, &wc, "the unbind", 20)) return 1;
            if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_BIND_MW) {
                fprintf(stderr, "rdma_check: unbind completed with %s\n", ibv_wc_status_str(wc.status));
                return 1;
            }
            if (write(fd, &ack, 1) != 1) return die("the unbind exchange");
        }
        if (recv(fd, &done, 1, MSG_WAITALL) != 1) return die("waiting for the client");
        rc = done != 'd' || server_check(&c, iters) || (extended && server_check_imm(&c, iters));
        verdict = rc ? 'n' : 'y';
        if (write(fd, &verdict, 1) != 1) return die("the final TCP exchange");
    }
    close(fd);
    if (!rc)
        printf("rdma_check: %d iterations of WRITE+READ %zu B, FETCH_AND_ADD, CMP_AND_SWAP%s: data ok\n", iters, size,
               window == 1 ? " through a type 1 window, unbound, then refused"
               : window == 2 ? " through a type 2 window, SEND_WITH_INV, then refused"
               : window == 3 ? " through a type 2 window, LOCAL_INV, then refused"
               : extended ? " (cq_ex, ibv_wr_*, WRITE_WITH_IMM)" : "");
    ibv_destroy_qp(c.qp);
    if (mw && ibv_dealloc_mw(mw)) return die("ibv_dealloc_mw"); /* before the region it was bound to */
    ibv_dereg_mr(c.mr);
    ibv_destroy_cq(c.cq);
    ibv_dealloc_pd(c.pd);
    ibv_close_device(c.dev);
    ibv_free_device_list(list);
    return rc;
}
