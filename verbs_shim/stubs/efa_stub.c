/* Stand-in for rdma-core's libefa.so.1 (the AWS EFA direct-verbs library).
 *
 * perftest links libefa.so.1 for its SRD connection type (-c SRD). Our device is not an EFA
 * device, so every entry point fails as libefa does on a foreign device: NULL with errno
 * EOPNOTSUPP, or EOPNOTSUPP returned (libefa returns errno values) with errno set. All six
 * EFA functions of rdma-core 44 are exported (efa.map). No dependency on libibverbs: the
 * header is included only for the prototypes. See docs/verbs_shim.md. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/efadv.h>

#define RNIC_EXPORT __attribute__((visibility("default")))

static int unsupported(void)
{
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

static void *unsupported_ptr(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* EFA_1.0 */
RNIC_EXPORT struct ibv_qp *efadv_create_driver_qp(struct ibv_pd *ibvpd,
						  struct ibv_qp_init_attr *attr,
						  uint32_t driver_qp_type)
{
	(void)ibvpd;
	(void)attr;
	(void)driver_qp_type;
	return unsupported_ptr();
}

/* EFA_1.1 */
RNIC_EXPORT struct ibv_qp *efadv_create_qp_ex(struct ibv_context *ibvctx,
					      struct ibv_qp_init_attr_ex *attr_ex,
					      struct efadv_qp_init_attr *efa_attr, uint32_t inlen)
{
	(void)ibvctx;
	(void)attr_ex;
	(void)efa_attr;
	(void)inlen;
	return unsupported_ptr();
}

RNIC_EXPORT int efadv_query_device(struct ibv_context *ibvctx, struct efadv_device_attr *attr,
				   uint32_t inlen)
{
	(void)ibvctx;
	(void)attr;
	(void)inlen;
	return unsupported();
}

RNIC_EXPORT int efadv_query_ah(struct ibv_ah *ibvah, struct efadv_ah_attr *attr, uint32_t inlen)
{
	(void)ibvah;
	(void)attr;
	(void)inlen;
	return unsupported();
}

/* EFA_1.2 */
RNIC_EXPORT struct ibv_cq_ex *efadv_create_cq(struct ibv_context *ibvctx,
					      struct ibv_cq_init_attr_ex *attr_ex,
					      struct efadv_cq_init_attr *efa_attr, uint32_t inlen)
{
	(void)ibvctx;
	(void)attr_ex;
	(void)efa_attr;
	(void)inlen;
	return unsupported_ptr();
}

RNIC_EXPORT struct efadv_cq *efadv_cq_from_ibv_cq_ex(struct ibv_cq_ex *ibvcqx)
{
	(void)ibvcqx;
	return unsupported_ptr();
}
