// SPDX-License-Identifier: MIT
/* Bank import per backend. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mc_internal.h"
#include "gpu/bank.h"

static int mc_cpu_import(struct moecache_bank_map *b)
{
	int prot = PROT_READ | (b->writable ? PROT_WRITE : 0);
	void *p;

	if (b->bytes == 0 || b->bytes > SIZE_MAX)
		return -EINVAL;
	p = mmap(NULL, b->bytes, prot, MAP_SHARED, b->fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	b->base = p;
	return 0;
}

static void mc_cpu_unimport(struct moecache_bank_map *b)
{
	munmap(b->base, b->bytes);
}

static const struct mc_bank_backend mc_bank_backends[] = {
    {MOECACHE_BACKEND_CPU, "cpu", mc_cpu_import, mc_cpu_unimport},
    {MOECACHE_BACKEND_CUDA, "cuda", mc_cuda_bank_import, mc_cuda_bank_unimport},
    {MOECACHE_BACKEND_ROCM, "rocm", mc_rocm_bank_import, mc_rocm_bank_unimport},
};

const struct mc_bank_backend *mc_bank_backend_find(uint32_t id)
{
	for (size_t i = 0; i < sizeof(mc_bank_backends) / sizeof(mc_bank_backends[0]); i++)
		if (mc_bank_backends[i].id == id)
			return &mc_bank_backends[i];
	return NULL;
}

static int mc_bank_import(struct moecache *mc, bool writable, struct moecache_bank_map *out)
{
	const struct mc_bank_backend *be;
	struct moecache_bank desc;
	int ret;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->fd = -1;
	ret = mc_check_role(mc, ~0u);
	if (ret)
		return ret;
	if (writable && mc->pool.role != MOECACHE_ROLE_AGENT)
		return -EPERM;
	ret = moecache_bank_get(mc, &desc);
	if (ret)
		return ret;
	be = mc_bank_backend_find(desc.backend);
	if (!be) {
		ret = -EOPNOTSUPP;
		goto err;
	}
	if (desc.slot_stride < mc->pool.expert_bytes || desc.slot_stride == 0 ||
	    mc->pool.n_slots > desc.bank_bytes / desc.slot_stride) {
		ret = -EPROTO;
		goto err;
	}
	out->backend = desc.backend;
	out->n_slots = mc->pool.n_slots;
	out->fd = desc.fd;
	out->writable = writable;
	out->bytes = desc.bank_bytes;
	out->slot_stride = desc.slot_stride;
	out->expert_bytes = mc->pool.expert_bytes;
	out->desc = desc;
	ret = be->import(out);
	if (ret)
		goto err;
	return 0;
err:
	close(desc.fd);
	memset(out, 0, sizeof(*out));
	out->fd = -1;
	return ret;
}

int moecache_bank_import(struct moecache *mc, struct moecache_bank_map *out)
{
	return mc_bank_import(mc, false, out);
}

int moecache_bank_import_rw(struct moecache *mc, struct moecache_bank_map *out)
{
	return mc_bank_import(mc, true, out);
}

void moecache_bank_unimport(struct moecache_bank_map *b)
{
	const struct mc_bank_backend *be;

	if (!b || b->fd < 0)
		return;
	be = mc_bank_backend_find(b->backend);
	if (be && be->unimport && b->base)
		be->unimport(b);
	close(b->fd);
	memset(b, 0, sizeof(*b));
	b->fd = -1;
}

const void *moecache_bank_slot(const struct moecache_bank_map *b, uint32_t slot)
{
	if (!b || b->backend != MOECACHE_BACKEND_CPU || !b->base || slot >= b->n_slots)
		return NULL;
	return (const char *)b->base + (uint64_t)slot * b->slot_stride;
}
