// SPDX-License-Identifier: MIT
/* The handle: open, attach, administration, host pages, stats. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mc_internal.h"

static void mc_init(struct moecache *mc)
{
	memset(mc, 0, sizeof(*mc));
	mc->fd = -1;
}

int moecache_open(const char *path, struct moecache **out)
{
	struct moecache_info info;
	struct moecache *mc;
	int ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	mc = malloc(sizeof(*mc));
	if (!mc)
		return -ENOMEM;
	mc_init(mc);
	mc->fd = open(path ? path : MOECACHE_DEVICE, O_RDWR | O_CLOEXEC);
	if (mc->fd < 0) {
		ret = -errno;
		free(mc);
		return ret;
	}
	ret = moecache_get_info(mc, &info);
	if (ret) {
		moecache_close(mc);
		return ret;
	}
	if (info.abi_version != MOECACHE_ABI_VERSION) {
		moecache_close(mc);
		return -EPROTO;
	}
	mc->max_batch = info.max_batch;
	*out = mc;
	return 0;
}

void moecache_close(struct moecache *mc)
{
	if (!mc)
		return;
	mc_fast_teardown(mc);
	if (mc->host_base)
		munmap(mc->host_base, mc->host_len);
	if (mc->map_base)
		munmap(mc->map_base, mc->map_len);
	if (mc->fd >= 0)
		close(mc->fd);
	free(mc);
}

int moecache_fd(const struct moecache *mc)
{
	return mc ? mc->fd : -EINVAL;
}

int moecache_get_info(struct moecache *mc, struct moecache_info *out)
{
	if (!mc || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	return mc_ioctl(mc, MOECACHE_IOC_GET_INFO, out);
}

/* 1..63 characters of [A-Za-z0-9._-], as the driver accepts. */
static int mc_check_name(const char *name)
{
	size_t len;

	if (!name)
		return -EINVAL;
	len = strnlen(name, MOECACHE_NAME_LEN);
	if (len == 0 || len >= MOECACHE_NAME_LEN)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return -EINVAL;
	}
	return 0;
}

int moecache_pool_create(struct moecache *mc, const struct moecache_pool_create *req)
{
	struct moecache_pool_create arg;

	if (!mc || !req)
		return -EINVAL;
	arg = *req;
	if (mc_check_name(arg.name))
		return -EINVAL;
	return mc_ioctl(mc, MOECACHE_IOC_POOL_CREATE, &arg);
}

int moecache_pool_destroy(struct moecache *mc, const char *name)
{
	struct moecache_pool_name arg;

	if (!mc || mc_check_name(name))
		return -EINVAL;
	memset(&arg, 0, sizeof(arg));
	strcpy(arg.name, name);
	return mc_ioctl(mc, MOECACHE_IOC_POOL_DESTROY, &arg);
}

int moecache_attach(struct moecache *mc, const char *pool, enum moecache_role role)
{
	return moecache_attach_flags(mc, pool, role, 0);
}

int moecache_attach_flags(struct moecache *mc, const char *pool, enum moecache_role role,
			  uint32_t flags)
{
	struct moecache_attach arg;
	struct moecache_pool_info *pi;
	void *map;
	int ret;

	if (!mc || mc_check_name(pool))
		return -EINVAL;
	if (role != MOECACHE_ROLE_CLIENT && role != MOECACHE_ROLE_AGENT &&
	    role != MOECACHE_ROLE_LOADER)
		return -EINVAL;
	if ((flags & ~MOECACHE_ATTACH_FLAGS_ALL) ||
	    ((flags & MOECACHE_ATTACH_FAST_PINS) && role != MOECACHE_ROLE_CLIENT))
		return -EINVAL;
	if (mc->attached)
		return -EALREADY;
	memset(&arg, 0, sizeof(arg));
	strcpy(arg.name, pool);
	arg.role = role;
	arg.flags = flags;
	ret = mc_ioctl(mc, MOECACHE_IOC_ATTACH, &arg);
	/*
	 * Fast pins are the pool owner's and CAP_SYS_ADMIN's (docs/abi.md,
	 * "Security model"): anybody else pins with ACQUIRE, as without them.
	 */
	if (ret == -EPERM && (flags & MOECACHE_ATTACH_FAST_PINS)) {
		flags &= ~MOECACHE_ATTACH_FAST_PINS;
		arg.flags = flags;
		ret = mc_ioctl(mc, MOECACHE_IOC_ATTACH, &arg);
	}
	if (ret)
		return ret;

	pi = &mc->pool;
	memset(pi, 0, sizeof(*pi));
	strcpy(pi->name, pool);
	pi->role = role;
	pi->n_layers = arg.n_layers;
	pi->n_experts = arg.n_experts;
	pi->expert_begin = arg.expert_begin;
	pi->expert_end = arg.expert_end;
	pi->n_local = arg.expert_end - arg.expert_begin;
	pi->n_slots = arg.n_slots;
	pi->pool_flags = arg.pool_flags;
	pi->expert_bytes = arg.expert_bytes;
	pi->off = arg.off;

	/* The file stays bound to the pool whatever happens below; the handle
	 * records it so that close() is the only way out. */
	mc->attached = true;
	map =
	    mmap(NULL, arg.off.map_size, PROT_READ, MAP_SHARED, mc->fd, (off_t)arg.off.map_offset);
	if (map == MAP_FAILED)
		return -errno;
	ret = moecache_map_bind(&mc->map, map, arg.off.map_size);
	if (ret) {
		munmap(map, arg.off.map_size);
		return ret;
	}
	mc->map_base = map;
	mc->map_len = arg.off.map_size;
	if (flags & MOECACHE_ATTACH_FAST_PINS) {
		ret = mc_fast_setup(mc);
		if (ret)
			return ret;
	}

	if (role == MOECACHE_ROLE_AGENT) {
		int fl = fcntl(mc->fd, F_GETFL);

		if (fl < 0 || fcntl(mc->fd, F_SETFL, fl | O_NONBLOCK) < 0)
			return -errno;
	}
	return 0;
}

int moecache_open_attach(const char *pool, enum moecache_role role, struct moecache **out)
{
	return moecache_open_attach_flags(pool, role, 0, out);
}

int moecache_open_attach_flags(const char *pool, enum moecache_role role, uint32_t flags,
			       struct moecache **out)
{
	struct moecache *mc;
	int ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	ret = moecache_open(NULL, &mc);
	if (ret)
		return ret;
	ret = moecache_attach_flags(mc, pool, role, flags);
	if (ret) {
		moecache_close(mc);
		return ret;
	}
	*out = mc;
	return 0;
}

const struct moecache_pool_info *moecache_pool(const struct moecache *mc)
{
	return mc && mc->attached ? &mc->pool : NULL;
}

const struct moecache_map *moecache_map(const struct moecache *mc)
{
	return mc && mc->map_base ? &mc->map : NULL;
}

/* STATS of layer (or MOECACHE_NONE), with flags (MOECACHE_STATS_BANK: of bank). */
static int mc_stats(struct moecache *mc, uint32_t layer, uint32_t flags, uint32_t bank,
		    struct moecache_stats *out)
{
	int ret;

	if (!out)
		return -EINVAL;
	ret = mc_check_role(mc, ~0u);
	if (ret)
		return ret;
	if (layer != MOECACHE_NONE && layer >= mc->pool.n_layers)
		return -EINVAL;
	/* This handle's own hits count too. */
	if (mc->fast_pins)
		moecache_report_flush(mc);
	memset(out, 0, sizeof(*out));
	out->layer = layer;
	out->flags = flags;
	out->bank = bank;
	return mc_ioctl(mc, MOECACHE_IOC_STATS, out);
}

int moecache_stats(struct moecache *mc, uint32_t layer, struct moecache_stats *out)
{
	return mc_stats(mc, layer, 0, 0, out);
}

int moecache_stats_bank(struct moecache *mc, uint32_t bank, struct moecache_stats *out)
{
	return mc_stats(mc, MOECACHE_NONE, MOECACHE_STATS_BANK, bank, out);
}

int moecache_host_map(struct moecache *mc, bool writable, void **base, size_t *size)
{
	void *p;
	int ret;

	ret = mc_check_role(mc, ~0u);
	if (ret)
		return ret;
	if (writable && mc->pool.role == MOECACHE_ROLE_CLIENT)
		return -EPERM;
	if (mc->host_base && writable && !mc->host_writable)
		return -EBUSY;
	if (!mc->host_base) {
		int prot = PROT_READ | (writable ? PROT_WRITE : 0);

		p = mmap(NULL, mc->pool.off.host_size, prot, MAP_SHARED, mc->fd,
			 (off_t)mc->pool.off.host_offset);
		if (p == MAP_FAILED)
			return -errno;
		mc->host_base = p;
		mc->host_len = mc->pool.off.host_size;
		mc->host_writable = writable;
	}
	if (base)
		*base = mc->host_base;
	if (size)
		*size = mc->host_len;
	return 0;
}

const void *moecache_host_expert(const struct moecache *mc, uint32_t layer, uint32_t expert)
{
	uint32_t idx;

	if (!mc || !mc->host_base)
		return NULL;
	idx = moecache_map_idx(&mc->map, layer, expert);
	if (idx == MOECACHE_NONE || (uint64_t)(idx + 1) * mc->pool.expert_bytes > mc->host_len)
		return NULL;
	return (const char *)mc->host_base + (uint64_t)idx * mc->pool.expert_bytes;
}

void *moecache_host_expert_rw(const struct moecache *mc, uint32_t layer, uint32_t expert)
{
	if (!mc || !mc->host_writable)
		return NULL;
	return (void *)moecache_host_expert(mc, layer, expert);
}

int moecache_load(struct moecache *mc, uint32_t op)
{
	struct moecache_load arg = {.op = op};
	int ret;

	ret =
	    mc_check_role(mc, MC_ROLE_BIT(MOECACHE_ROLE_LOADER) | MC_ROLE_BIT(MOECACHE_ROLE_AGENT));
	if (ret)
		return ret;
	if (op != MOECACHE_LOAD_BEGIN && op != MOECACHE_LOAD_DONE)
		return -EINVAL;
	return mc_ioctl(mc, MOECACHE_IOC_LOAD, &arg);
}
