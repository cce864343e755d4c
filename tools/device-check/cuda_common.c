// SPDX-License-Identifier: MIT
/* moecache-cuda-check: results, the device, the backend driven directly, the kernel image. */
#include "cuda_check.h"

/* Fails the check with the CUDA error; returns false. */
bool cu_ok(struct check *c, cu_result res, const char *what)
{
	if (res == MC_CU_SUCCESS)
		return true;
	mc_cuda_fail(&c->cu, res, what, c->err, sizeof(c->err));
	dc_record(&c->rep, what, false, "%s", c->err);
	return false;
}

int check_open(struct check *c)
{
	cu_result res;
	int ret;

	ret = mc_cuda_api_load(&c->cu, NULL, c->err, sizeof(c->err));
	if (!ret)
		ret = mc_cuda_init(&c->cu, c->err, sizeof(c->err));
	if (ret) {
		fprintf(stderr, "moecache-cuda-check: %s\n", c->err);
		return ret;
	}
	res = c->cu.cuDeviceGet(&c->dev, c->o.device);
	if (res == MC_CU_SUCCESS)
		res = c->cu.cuDevicePrimaryCtxRetain(&c->ctx, c->dev);
	if (res == MC_CU_SUCCESS)
		res = c->cu.cuCtxSetCurrent(c->ctx);
	if (res != MC_CU_SUCCESS) {
		mc_cuda_fail(&c->cu, res, "opening the device", c->err, sizeof(c->err));
		fprintf(stderr, "moecache-cuda-check: %s\n", c->err);
		return -ENODEV;
	}
	return 0;
}

void check_close(struct check *c)
{
	if (c->ctx)
		c->cu.cuDevicePrimaryCtxRelease(c->dev);
	if (c->cu.lib)
		mc_cuda_api_unload(&c->cu);
}

/* The backend keeps setting its context current: set ours back. */
void own_ctx(struct check *c)
{
	c->cu.cuCtxSetCurrent(c->ctx);
}

/* ---- host pages: what the driver's host region would be ---- */

/* ---- the backend, driven directly ---- */

int be_open_on(struct check *c, struct be *b, int device, uint32_t n_slots, uint64_t expert_bytes,
	       const void *host, uint64_t host_bytes, uint32_t queues)
{
	int ret = dc_bank_open(b, &agent_cuda_backend, agent_cuda_backend_create, device, n_slots,
			       expert_bytes, host, host_bytes, queues, c->err, sizeof(c->err));

	own_ctx(c);
	return ret;
}

int be_open(struct check *c, struct be *b, uint32_t n_slots, uint64_t expert_bytes,
	    const void *host, uint64_t host_bytes, uint32_t queues)
{
	return be_open_on(c, b, c->o.device, n_slots, expert_bytes, host, host_bytes, queues);
}

void be_close(struct check *c, struct be *b)
{
	dc_bank_close(b);
	own_ctx(c);
}

/* What lib/bank.c's import sets up, from a descriptor and a file. */
void bank_map_from(struct moecache_bank_map *m, const struct moecache_bank *desc, uint32_t n_slots,
		   uint64_t expert_bytes)
{
	memset(m, 0, sizeof(*m));
	m->backend = desc->backend;
	m->n_slots = n_slots;
	m->fd = dup(desc->fd);
	m->bytes = desc->bank_bytes;
	m->slot_stride = desc->slot_stride;
	m->expert_bytes = expert_bytes;
	m->desc = *desc;
	m->desc.fd = m->fd;
}

void bank_map_free(struct moecache_bank_map *m)
{
	mc_cuda_bank_unimport(m);
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
}

/* Compares a device range with host bytes. */
bool device_equals(struct check *c, cu_deviceptr dev, const void *host, uint64_t bytes,
		   unsigned char *scratch)
{
	if (c->cu.cuMemcpyDtoH(scratch, dev, bytes) != MC_CU_SUCCESS)
		return false;
	return memcmp(scratch, host, bytes) == 0;
}

/* ---- kernels ---- */

int kernels_load(struct check *c, struct kmod *k)
{
	const void *image;
	size_t size;

	if (moe_kernels_cuda_image(&image, &size))
		return -ENOENT;
	if (!CU(cuModuleLoadData(&k->mod, image)))
		return -EIO;
	if (!CU(cuModuleGetFunction(&k->remap, k->mod, "moe_remap")) ||
	    !CU(cuModuleGetFunction(&k->up_bf16, k->mod, "moe_ffn_up_bf16")) ||
	    !CU(cuModuleGetFunction(&k->down_bf16, k->mod, "moe_ffn_down_bf16")) ||
	    !CU(cuModuleGetFunction(&k->up_f32, k->mod, "moe_ffn_up_f32")) ||
	    !CU(cuModuleGetFunction(&k->down_f32, k->mod, "moe_ffn_down_f32")))
		return -EIO;
	return 0;
}

cu_result launch_ffn(struct check *c, const struct kmod *k, struct moe_ffn_args *a,
		     cu_stream stream)
{
	bool bf16 = a->dtype == MOE_DTYPE_BF16;
	void *params[] = {a};
	uint32_t grid[3];
	cu_result res;

	moe_ffn_up_grid(a, grid);
	if (!grid[0])
		return MC_CU_SUCCESS;
	res = c->cu.cuLaunchKernel(bf16 ? k->up_bf16 : k->up_f32, grid[0], grid[1], grid[2],
				   MOE_FFN_THREADS, 1, 1, 0, stream, params, NULL);
	if (res != MC_CU_SUCCESS)
		return res;
	moe_ffn_down_grid(a, grid);
	return c->cu.cuLaunchKernel(bf16 ? k->down_bf16 : k->down_f32, grid[0], grid[1], grid[2],
				    MOE_FFN_THREADS, 1, 1, 0, stream, params, NULL);
}

cu_deviceptr dev_upload(struct check *c, const void *src, size_t bytes)
{
	cu_deviceptr d = 0;

	if (c->cu.cuMemAlloc(&d, bytes ? bytes : 16) != MC_CU_SUCCESS)
		return 0;
	if (src && bytes)
		c->cu.cuMemcpyHtoD(d, src, bytes);
	return d;
}
