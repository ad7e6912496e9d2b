/* Stand-in for rdma-core's libmlx5.so.1 (the mlx5 direct-verbs library).
 *
 * perftest links libmlx5.so.1 for its DC, AES-XTS and signature-offload modes. Our device is
 * never an mlx5 device, so every entry point fails the way libmlx5 fails on a non-mlx5
 * device: pointer-returning calls give NULL with errno EOPNOTSUPP, int-returning calls
 * return EOPNOTSUPP (libmlx5 returns the errno value, not -1) and set errno, and
 * mlx5dv_is_supported() says false. Nothing here touches libibverbs: the prototypes come
 * from <infiniband/mlx5dv.h> only so the compiler checks them against rdma-core's. The
 * exported names and version nodes are in mlx5.map; see docs/verbs_shim.md. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include <infiniband/mlx5dv.h>

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

/* MLX5_1.0 */
RNIC_EXPORT int mlx5dv_query_device(struct ibv_context *ctx_in, struct mlx5dv_context *attrs_out)
{
	(void)ctx_in;
	(void)attrs_out;
	return unsupported();
}

/* MLX5_1.3 */
RNIC_EXPORT struct ibv_qp *mlx5dv_create_qp(struct ibv_context *context,
					    struct ibv_qp_init_attr_ex *qp_attr,
					    struct mlx5dv_qp_init_attr *mlx5_qp_attr)
{
	(void)context;
	(void)qp_attr;
	(void)mlx5_qp_attr;
	return unsupported_ptr();
}

/* MLX5_1.7 */
RNIC_EXPORT struct ibv_context *mlx5dv_open_device(struct ibv_device *device,
						   struct mlx5dv_context_attr *attr)
{
	(void)device;
	(void)attr;
	return unsupported_ptr();
}

RNIC_EXPORT int mlx5dv_devx_general_cmd(struct ibv_context *context, const void *in, size_t inlen,
					void *out, size_t outlen)
{
	(void)context;
	(void)in;
	(void)inlen;
	(void)out;
	(void)outlen;
	return unsupported();
}

/* MLX5_1.8 */
RNIC_EXPORT bool mlx5dv_is_supported(struct ibv_device *device)
{
	(void)device;
	return false;
}

/* MLX5_1.10 */
RNIC_EXPORT struct mlx5dv_mkey *mlx5dv_create_mkey(struct mlx5dv_mkey_init_attr *mkey_init_attr)
{
	(void)mkey_init_attr;
	return unsupported_ptr();
}

RNIC_EXPORT int mlx5dv_destroy_mkey(struct mlx5dv_mkey *mkey)
{
	(void)mkey;
	return unsupported();
}

RNIC_EXPORT struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qp)
{
	(void)qp;
	return unsupported_ptr();
}

/* MLX5_1.21 */
RNIC_EXPORT int mlx5dv_crypto_login(struct ibv_context *context,
				    struct mlx5dv_crypto_login_attr *login_attr)
{
	(void)context;
	(void)login_attr;
	return unsupported();
}

RNIC_EXPORT struct mlx5dv_dek *mlx5dv_dek_create(struct ibv_context *context,
						 struct mlx5dv_dek_init_attr *init_attr)
{
	(void)context;
	(void)init_attr;
	return unsupported_ptr();
}

RNIC_EXPORT int mlx5dv_dek_destroy(struct mlx5dv_dek *dek)
{
	(void)dek;
	return unsupported();
}
