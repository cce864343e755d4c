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

static const char *const mc_backend_names[] = {
    [MOECACHE_BACKEND_NONE] = "auto",
    [MOECACHE_BACKEND_CPU] = "cpu",
    [MOECACHE_BACKEND_CUDA] = "cuda",
    [MOECACHE_BACKEND_ROCM] = "rocm",
};

const char *moecache_backend_name(uint32_t backend)
{
	if (backend < sizeof(mc_backend_names) / sizeof(mc_backend_names[0]))
		return mc_backend_names[backend];
	return NULL;
}

int moecache_backend_parse(const char *name, uint32_t *out)
{
	if (!name || !out)
		return -EINVAL;
	for (uint32_t i = 0; i < sizeof(mc_backend_names) / sizeof(mc_backend_names[0]); i++)
		if (mc_backend_names[i] && !strcmp(name, mc_backend_names[i])) {
			*out = i;
			return 0;
		}
	return -EINVAL;
}

static const struct mc_bank_backend mc_bank_backends[] = {
    {MOECACHE_BACKEND_CPU, mc_cpu_import, mc_cpu_unimport},
    {MOECACHE_BACKEND_CUDA, mc_cuda_bank_import, mc_cuda_bank_unimport},
    {MOECACHE_BACKEND_ROCM, mc_rocm_bank_import, mc_rocm_bank_unimport},
};

const struct mc_bank_backend *mc_bank_backend_find(uint32_t id)
{
	for (size_t i = 0; i < sizeof(mc_bank_backends) / sizeof(mc_bank_backends[0]); i++)
		if (mc_bank_backends[i].id == id)
			return &mc_bank_backends[i];
	return NULL;
}

/*
 * Where bank index lies in the pool's slots: the map's bank table (a
 * handle whose map is not bound, as in tests, has one bank of all slots).
 */
int mc_bank_geometry(const struct moecache *mc, uint32_t index, uint32_t *slot_begin,
		     uint32_t *n_slots, uint32_t *tier)
{
	struct moecache_map_bank mb;
	int ret;

	if (!mc->map.hdr) {
		if (index)
			return -EINVAL;
		*slot_begin = 0;
		*n_slots = mc->pool.n_slots;
		*tier = 0;
		return 0;
	}
	ret = moecache_map_bank(&mc->map, index, &mb);
	if (ret)
		return ret;
	*slot_begin = mb.slot_begin;
	*n_slots = mb.n_slots;
	*tier = mb.tier;
	return 0;
}

static int mc_bank_import(struct moecache *mc, uint32_t index, bool writable,
			  struct moecache_bank_map *out)
{
	const struct mc_bank_backend *be;
	uint32_t slot_begin, n_slots, tier;
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
	ret = mc_bank_geometry(mc, index, &slot_begin, &n_slots, &tier);
	if (ret)
		return ret;
	ret = moecache_bank_get_index(mc, index, &desc);
	if (ret)
		return ret;
	be = mc_bank_backend_find(desc.backend);
	if (!be) {
		ret = -EOPNOTSUPP;
		goto err;
	}
	/* The object holds the bank's own slots; a driver that says where they lie must agree. */
	if (desc.slot_stride < mc->pool.expert_bytes || desc.slot_stride == 0 ||
	    n_slots > desc.bank_bytes / desc.slot_stride ||
	    (desc.n_slots && (desc.n_slots != n_slots || desc.slot_begin != slot_begin))) {
		ret = -EPROTO;
		goto err;
	}
	out->backend = desc.backend;
	out->n_slots = n_slots;
	out->fd = desc.fd;
	out->writable = writable;
	out->bytes = desc.bank_bytes;
	out->slot_stride = desc.slot_stride;
	out->expert_bytes = mc->pool.expert_bytes;
	out->desc = desc;
	out->index = index;
	out->tier = tier;
	out->slot_begin = slot_begin;
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
	return mc_bank_import(mc, 0, false, out);
}

int moecache_bank_import_index(struct moecache *mc, uint32_t index, struct moecache_bank_map *out)
{
	return mc_bank_import(mc, index, false, out);
}

int moecache_bank_import_index_rw(struct moecache *mc, uint32_t index,
				  struct moecache_bank_map *out)
{
	return mc_bank_import(mc, index, true, out);
}

int moecache_bank_import_all(struct moecache *mc, struct moecache_bank_map *out, uint32_t max)
{
	uint32_t n;
	int ret;

	ret = mc_check_role(mc, ~0u);
	if (ret)
		return ret;
	if (!out)
		return -EINVAL;
	n = mc->map.hdr ? mc->map.n_banks : 1;
	if (n > max)
		return -ENOSPC;
	for (uint32_t i = 0; i < n; i++) {
		ret = mc_bank_import(mc, i, false, &out[i]);
		if (ret) {
			while (i--)
				moecache_bank_unimport(&out[i]);
			return ret;
		}
	}
	return (int)n;
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
	/* Below slot_begin wraps round to a large value: out of range too. */
	if (!b || b->backend != MOECACHE_BACKEND_CPU || !b->base ||
	    slot - b->slot_begin >= b->n_slots)
		return NULL;
	return (const char *)b->base + (uint64_t)(slot - b->slot_begin) * b->slot_stride;
}
