/* Stand-in for rdma-core's librdmacm.so.1 until the rdma_cm issue implements it.
 *
 * perftest links librdmacm.so.1 unconditionally but calls it only with -R / --rdma_cm
 * (create_rdma_resources and the cm event loop); without -R no rdma_* function is reached.
 * rdmacm-utils (rping, ucmatose, rstream, ...) call it on every run. Every function of
 * rdma-core 44's librdmacm ABI (RDMACM_1.0 .. RDMACM_1.3, rsocket included) is exported so
 * any librdmacm program loads; each fails cleanly: -1 (or NULL) with errno ENOSYS, void
 * functions do nothing, rdma_getaddrinfo returns EAI_SYSTEM with errno ENOSYS (callers
 * either test "!= 0" or print gai_strerror, which then says to look at errno), and
 * rdma_event_str names the event as librdmacm does.
 *
 * <rdma/rdma_cma.h> is not installed on our machines (librdmacm-dev), so the prototypes
 * below are written out with the structs left incomplete: only pointers to them cross the
 * ABI, and every scalar matches rdma-core's librdmacm/rdma_cma.h and rsocket.h
 * (enum arguments are int-sized on x86-64). No libibverbs dependency. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#define RNIC_EXPORT __attribute__((visibility("default")))

struct rdma_event_channel;
struct rdma_cm_id;
struct rdma_cm_event;
struct rdma_addrinfo;
struct rdma_conn_param;
struct rdma_cm_join_mc_attr_ex;
struct ibv_context;
struct ibv_pd;
struct ibv_qp_init_attr;
struct ibv_qp_init_attr_ex;
struct ibv_srq_init_attr;
struct ibv_srq_init_attr_ex;
struct ibv_qp_attr;
struct ibv_ece;

static int fail(void)
{
	errno = ENOSYS;
	return -1;
}

static ssize_t fail_ssize(void)
{
	errno = ENOSYS;
	return -1;
}

/* ---- RDMACM_1.0: connection manager ---- */

RNIC_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	errno = ENOSYS;
	return NULL;
}

RNIC_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	(void)channel;
}

RNIC_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
			       void *context, int ps /* enum rdma_port_space */)
{
	(void)channel;
	(void)context;
	(void)ps;
	if (id)
		*id = NULL;
	return fail();
}

RNIC_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			       struct ibv_qp_init_attr *qp_init_attr)
{
	(void)res;
	(void)pd;
	(void)qp_init_attr;
	if (id)
		*id = NULL;
	return fail();
}

RNIC_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	(void)id;
}

RNIC_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	(void)id;
	return fail();
}

RNIC_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	(void)id;
	(void)addr;
	return fail();
}

RNIC_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				  struct sockaddr *dst_addr, int timeout_ms)
{
	(void)id;
	(void)src_addr;
	(void)dst_addr;
	(void)timeout_ms;
	return fail();
}

RNIC_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	(void)id;
	(void)timeout_ms;
	return fail();
}

RNIC_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
			       struct ibv_qp_init_attr *qp_init_attr)
{
	(void)id;
	(void)pd;
	(void)qp_init_attr;
	return fail();
}

RNIC_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *qp_init_attr)
{
	(void)id;
	(void)qp_init_attr;
	return fail();
}

RNIC_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	(void)id;
}

RNIC_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
				struct ibv_srq_init_attr *attr)
{
	(void)id;
	(void)pd;
	(void)attr;
	return fail();
}

RNIC_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	(void)id;
	(void)attr;
	return fail();
}

RNIC_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	(void)id;
}

RNIC_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	(void)id;
	(void)conn_param;
	return fail();
}

RNIC_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	(void)id;
	(void)backlog;
	return fail();
}

RNIC_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	(void)listen;
	if (id)
		*id = NULL;
	return fail();
}

RNIC_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	(void)id;
	(void)conn_param;
	return fail();
}

RNIC_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			    uint8_t private_data_len)
{
	(void)id;
	(void)private_data;
	(void)private_data_len;
	return fail();
}

RNIC_EXPORT int rdma_notify(struct rdma_cm_id *id, int event /* enum ibv_event_type */)
{
	(void)id;
	(void)event;
	return fail();
}

RNIC_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	(void)id;
	return fail();
}

RNIC_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	(void)id;
	(void)addr;
	(void)context;
	return fail();
}

RNIC_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	(void)id;
	(void)addr;
	return fail();
}

RNIC_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	(void)channel;
	if (event)
		*event = NULL;
	return fail();
}

RNIC_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	(void)event;
	return fail();
}

RNIC_EXPORT uint16_t rdma_get_src_port(struct rdma_cm_id *id)
{
	(void)id;
	return 0;
}

RNIC_EXPORT uint16_t rdma_get_dst_port(struct rdma_cm_id *id)
{
	(void)id;
	return 0;
}

RNIC_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	if (num_devices)
		*num_devices = 0;
	errno = ENOSYS;
	return NULL;
}

RNIC_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	(void)list;
}

/* Names as librdmacm prints them, indexed by enum rdma_cm_event_type (stable ABI values). */
RNIC_EXPORT const char *rdma_event_str(int event /* enum rdma_cm_event_type */)
{
	static const char *const names[] = {
		"RDMA_CM_EVENT_ADDR_RESOLVED",	  "RDMA_CM_EVENT_ADDR_ERROR",
		"RDMA_CM_EVENT_ROUTE_RESOLVED",	  "RDMA_CM_EVENT_ROUTE_ERROR",
		"RDMA_CM_EVENT_CONNECT_REQUEST",  "RDMA_CM_EVENT_CONNECT_RESPONSE",
		"RDMA_CM_EVENT_CONNECT_ERROR",	  "RDMA_CM_EVENT_UNREACHABLE",
		"RDMA_CM_EVENT_REJECTED",	  "RDMA_CM_EVENT_ESTABLISHED",
		"RDMA_CM_EVENT_DISCONNECTED",	  "RDMA_CM_EVENT_DEVICE_REMOVAL",
		"RDMA_CM_EVENT_MULTICAST_JOIN",	  "RDMA_CM_EVENT_MULTICAST_ERROR",
		"RDMA_CM_EVENT_ADDR_CHANGE",	  "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};
	if (event < 0 || (size_t)event >= sizeof(names) / sizeof(names[0]))
		return "UNKNOWN EVENT";
	return names[event];
}

RNIC_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
				size_t optlen)
{
	(void)id;
	(void)level;
	(void)optname;
	(void)optval;
	(void)optlen;
	return fail();
}

RNIC_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	(void)id;
	(void)channel;
	return fail();
}

RNIC_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
				 const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	(void)node;
	(void)service;
	(void)hints;
	if (res)
		*res = NULL;
	errno = ENOSYS;
	return EAI_SYSTEM;
}

RNIC_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	(void)res; /* rdma_getaddrinfo never hands one out */
}

/* ---- RDMACM_1.0: rsocket ---- */

RNIC_EXPORT int rsocket(int domain, int type, int protocol)
{
	(void)domain;
	(void)type;
	(void)protocol;
	return fail();
}

RNIC_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	(void)socket;
	(void)addr;
	(void)addrlen;
	return fail();
}

RNIC_EXPORT int rlisten(int socket, int backlog)
{
	(void)socket;
	(void)backlog;
	return fail();
}

RNIC_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	(void)socket;
	(void)addr;
	(void)addrlen;
	return fail();
}

RNIC_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	(void)socket;
	(void)addr;
	(void)addrlen;
	return fail();
}

RNIC_EXPORT int rshutdown(int socket, int how)
{
	(void)socket;
	(void)how;
	return fail();
}

RNIC_EXPORT int rclose(int socket)
{
	(void)socket;
	return fail();
}

RNIC_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	(void)socket;
	(void)buf;
	(void)len;
	(void)flags;
	return fail_ssize();
}

RNIC_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
			      struct sockaddr *src_addr, socklen_t *addrlen)
{
	(void)socket;
	(void)buf;
	(void)len;
	(void)flags;
	(void)src_addr;
	(void)addrlen;
	return fail_ssize();
}

RNIC_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	(void)socket;
	(void)msg;
	(void)flags;
	return fail_ssize();
}

RNIC_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	(void)socket;
	(void)buf;
	(void)len;
	(void)flags;
	return fail_ssize();
}

RNIC_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			    const struct sockaddr *dest_addr, socklen_t addrlen)
{
	(void)socket;
	(void)buf;
	(void)len;
	(void)flags;
	(void)dest_addr;
	(void)addrlen;
	return fail_ssize();
}

RNIC_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	(void)socket;
	(void)msg;
	(void)flags;
	return fail_ssize();
}

RNIC_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	(void)socket;
	(void)buf;
	(void)count;
	return fail_ssize();
}

RNIC_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	(void)socket;
	(void)iov;
	(void)iovcnt;
	return fail_ssize();
}

RNIC_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	(void)socket;
	(void)buf;
	(void)count;
	return fail_ssize();
}

RNIC_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	(void)socket;
	(void)iov;
	(void)iovcnt;
	return fail_ssize();
}

RNIC_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	(void)fds;
	(void)nfds;
	(void)timeout;
	return fail();
}

RNIC_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
			struct timeval *timeout)
{
	(void)nfds;
	(void)readfds;
	(void)writefds;
	(void)exceptfds;
	(void)timeout;
	return fail();
}

RNIC_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	(void)socket;
	(void)addr;
	(void)addrlen;
	return fail();
}

RNIC_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	(void)socket;
	(void)addr;
	(void)addrlen;
	return fail();
}

RNIC_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval,
			    socklen_t optlen)
{
	(void)socket;
	(void)level;
	(void)optname;
	(void)optval;
	(void)optlen;
	return fail();
}

RNIC_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	(void)socket;
	(void)level;
	(void)optname;
	(void)optval;
	(void)optlen;
	return fail();
}

RNIC_EXPORT int rfcntl(int socket, int cmd, ...)
{
	(void)socket;
	(void)cmd;
	return fail();
}

RNIC_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	(void)socket;
	(void)buf;
	(void)len;
	(void)prot;
	(void)flags;
	(void)offset;
	return fail();
}

RNIC_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	(void)socket;
	(void)buf;
	(void)len;
	return fail();
}

RNIC_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	(void)socket;
	(void)buf;
	(void)count;
	(void)offset;
	(void)flags;
	errno = ENOSYS;
	return 0; /* librdmacm returns the byte count written; 0 with errno on failure */
}

/* ---- RDMACM_1.1 ---- */

RNIC_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id,
				       struct rdma_cm_join_mc_attr_ex *mc_join_attr, void *context)
{
	(void)id;
	(void)mc_join_attr;
	(void)context;
	return fail();
}

/* ---- RDMACM_1.2 ---- */

RNIC_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	(void)id;
	return fail();
}

RNIC_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
				  int *qp_attr_mask)
{
	(void)id;
	(void)qp_attr;
	(void)qp_attr_mask;
	return fail();
}

/* ---- RDMACM_1.3 ---- */

RNIC_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id;
	(void)ece;
	return fail();
}

RNIC_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id;
	(void)ece;
	return fail();
}

RNIC_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
				uint8_t private_data_len)
{
	(void)id;
	(void)private_data;
	(void)private_data_len;
	return fail();
}
