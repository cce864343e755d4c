// SPDX-License-Identifier: MIT
/*
 * The bottom of libmoecache: the ioctl and the argument checks every call
 * makes before it (handle.c, client.c, the pin mechanisms kpin.c and
 * fastpin.c). Nothing here calls another file of the library.
 */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

#include "mc_internal.h"

/* No retry on EINTR: an interrupted WAIT has dropped its pins and must be the caller's call. */
int mc_ioctl(const struct moecache *mc, unsigned long req, void *arg)
{
	int ret = ioctl(mc->fd, req, arg);

	return ret < 0 ? -errno : ret;
}

int mc_check_role(const struct moecache *mc, uint32_t role_mask)
{
	if (!mc)
		return -EINVAL;
	if (!mc->attached)
		return -ENOTCONN;
	if (!(role_mask & MC_ROLE_BIT(mc->pool.role)))
		return -EPERM;
	return 0;
}

int mc_check_count(const struct moecache *mc, uint32_t count)
{
	if (count == 0)
		return -EINVAL;
	if (mc->max_batch && count > mc->max_batch)
		return -E2BIG;
	return 0;
}

/* Lists longer than this are left to the driver's duplicate check. */
#define MC_DUP_CHECK_MAX_LOCAL 4096

int mc_check_experts(const struct moecache *mc, uint32_t layer, const uint32_t *experts,
		     uint32_t count)
{
	const struct moecache_pool_info *pi = &mc->pool;
	uint64_t seen[MC_DUP_CHECK_MAX_LOCAL / 64];
	bool check_dup = pi->n_local <= MC_DUP_CHECK_MAX_LOCAL;
	int ret;

	ret = mc_check_count(mc, count);
	if (ret)
		return ret;
	if (!experts || layer >= pi->n_layers)
		return -EINVAL;
	if (check_dup)
		memset(seen, 0, (pi->n_local + 63) / 64 * sizeof(seen[0]));
	for (uint32_t i = 0; i < count; i++) {
		uint32_t local = experts[i] - pi->expert_begin;

		if (experts[i] < pi->expert_begin || experts[i] >= pi->expert_end)
			return -EINVAL;
		if (!check_dup)
			continue;
		if (seen[local / 64] & (1ull << (local % 64)))
			return -EINVAL;
		seen[local / 64] |= 1ull << (local % 64);
	}
	return 0;
}

int mc_check_acquire_flags(uint32_t flags)
{
	if (flags & ~MOECACHE_ACQ_FLAGS_ALL)
		return -EINVAL;
	if ((flags & MOECACHE_ACQ_KEEP_WAITING) && !(flags & MOECACHE_ACQ_WAIT))
		return -EINVAL;
	if ((flags & MOECACHE_ACQ_NO_QUEUE) && (flags & MOECACHE_ACQ_WAIT))
		return -EINVAL;
	if ((flags & MOECACHE_ACQ_CPU) && (flags & MOECACHE_ACQ_WAIT))
		return -EINVAL;
	return 0;
}

int mc_pinned_slots(const struct moecache *mc, const uint32_t *slots, uint32_t count, uint32_t *out,
		    uint32_t *n_out)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < count; i++) {
		if (slots[i] == MOECACHE_NONE)
			continue;
		if (slots[i] >= mc->pool.n_slots)
			return -EINVAL;
		out[n++] = slots[i];
	}
	*n_out = n;
	return 0;
}
