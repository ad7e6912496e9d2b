// The rsockets of the process by number, their defaults (/etc/rdma/rsocket), their memory, and
// the synchronous-id step every CM exchange of an rsocket goes through.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <shared_mutex>
#include <unordered_map>

#include "rsocket.hpp"

namespace rnic::rdmacm::rsock {

namespace {

template <typename T>
void read_value(const char* name, T& value) {
    char path[96];
    std::snprintf(path, sizeof path, "/etc/rdma/rsocket/%s", name);
    FILE* f = std::fopen(path, "r");
    if (f == nullptr) return;
    unsigned long long v = 0;
    if (std::fscanf(f, "%llu", &v) == 1) value = static_cast<T>(v);
    std::fclose(f);
}

Config load_config() {
    Config c;
    read_value("polling_time", c.polling_time_us);
    read_value("wake_up_interval", c.wake_up_interval_ms);
    read_value("inline_default", c.inline_default);
    read_value("sqsize_default", c.sqsize_default);
    read_value("rqsize_default", c.rqsize_default);
    read_value("mem_default", c.mem_default);
    if (c.mem_default < 1) c.mem_default = 1;
    read_value("wmem_default", c.wmem_default);
    if (c.wmem_default < kSndLowat) c.wmem_default = kSndLowat << 1;
    read_value("iomap_size", c.iomap_size);
    // Only sizes the one-byte scale in the connection data can carry.
    c.iomap_size = static_cast<uint16_t>(scale_to_value(static_cast<uint8_t>(value_to_scale(c.iomap_size, 8)), 8));
    return c;
}

std::shared_mutex table_mu;
std::unordered_map<int, RsocketPtr>& table() {
    static auto* t = new std::unordered_map<int, RsocketPtr>();  // outlives every static user
    return *t;
}

}  // namespace

const Config& config() {
    static const Config c = load_config();
    return c;
}

int fail(int error) {
    errno = error;
    return -1;
}

RsocketPtr find(int index) {
    std::shared_lock lock(table_mu);
    const auto it = table().find(index);
    return it != table().end() ? it->second : nullptr;
}

int insert(const RsocketPtr& rs, int index) {
    std::unique_lock lock(table_mu);
    if (!table().emplace(index, rs).second) return fail(EBUSY);
    rs->index = index;
    return index;
}

void erase(int index) {
    std::unique_lock lock(table_mu);
    table().erase(index);
}

bool PageBuffer::allocate(size_t bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t rounded = (bytes + page - 1) / page * page;
    void* p = nullptr;
    if (posix_memalign(&p, page, rounded) != 0) return false;
    std::memset(p, 0, rounded);
    data = static_cast<uint8_t*>(p);
    size = rounded;
    return true;
}

void PageBuffer::release() {
    std::free(data);
    data = nullptr;
    size = 0;
}

// A listener's accepted sockets inherit its sizes, as rdma-core's rs_alloc does.
Rsocket::Rsocket(int t, const Rsocket* listener)
    : type(t),
      sbuf_size(listener != nullptr ? listener->sbuf_size : config().wmem_default),
      rbuf_size(listener != nullptr ? listener->rbuf_size : config().mem_default),
      sq_size(listener != nullptr ? listener->sq_size : config().sqsize_default),
      rq_size(listener != nullptr ? listener->rq_size : config().rqsize_default),
      sq_inline(listener != nullptr ? listener->sq_inline : config().inline_default),
      target_iomap_size(listener != nullptr ? listener->target_iomap_size : config().iomap_size) {
    wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

Rsocket::~Rsocket() {
    // Memory still registered (a socket never closed, freed at exit) may yet be written by
    // the NIC: it is left alone.
    if (verbs_released) {
        sbuf.release();
        rbuf.release();
        target_list.release();
    }
    if (wake_fd >= 0) close(wake_fd);
    for (const int fd : accept_queue)
        if (fd >= 0) close(fd);
}

int cm_complete(rdma_cm_id* id) {
    if (id->event != nullptr) {
        rdma_ack_cm_event(id->event);
        id->event = nullptr;
    }
    if (rdma_get_cm_event(id->channel, &id->event) != 0) {
        id->event = nullptr;
        return -1;
    }
    const rdma_cm_event& e = *id->event;
    if (e.status == 0) return 0;
    if (e.event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
    return fail(e.status < 0 ? -e.status : e.status);
}

}  // namespace rnic::rdmacm::rsock
