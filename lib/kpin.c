// SPDX-License-Identifier: MIT
/*
 * Kernel pins: the driver pins by ACQUIRE (or ACQUIRE_RELEASE, which drops
 * the caller's previous pins in the same call) and unpins by RELEASE. One
 * of the two pin mechanisms behind client.c's acquire path; fast pins
 * (fastpin.c) use it for a layer with a miss.
 */
#include <errno.h>
#include <string.h>

#include "mc_internal.h"

static void mc_fill_acquire(struct moecache_acquire *arg, uint32_t layer, const uint32_t *experts,
			    uint32_t count, uint32_t *slots, uint32_t flags, uint32_t timeout_ms)
{
	memset(arg, 0, sizeof(*arg));
	arg->layer = layer;
	arg->count = count;
	arg->experts = (uintptr_t)experts;
	arg->slots = (uintptr_t)slots;
	arg->flags = flags;
	arg->timeout_ms = timeout_ms;
}

int mc_kernel_acquire(struct moecache *mc, const uint32_t *release_slots, uint32_t release_count,
		      uint32_t layer, const uint32_t *experts, uint32_t count, uint32_t *slots,
		      uint32_t flags, uint32_t timeout_ms, struct moecache_acquire_result *res)
{
	struct moecache_acquire_release arg;
	int ret;

	memset(&arg, 0, sizeof(arg));
	mc_fill_acquire(&arg.acquire, layer, experts, count, slots, flags, timeout_ms);
	if (release_slots) {
		arg.release_count = release_count;
		arg.release_slots = release_count ? (uintptr_t)release_slots : 0;
		ret = mc_ioctl(mc, MOECACHE_IOC_ACQUIRE_RELEASE, &arg);
	} else {
		ret = mc_ioctl(mc, MOECACHE_IOC_ACQUIRE, &arg.acquire);
	}
	if (!ret && res) {
		res->n_hits = arg.acquire.n_hits;
		res->n_pinned = arg.acquire.n_pinned;
	}
	return ret;
}

int mc_kernel_release(struct moecache *mc, const uint32_t *slots, uint32_t count)
{
	struct moecache_release arg;

	memset(&arg, 0, sizeof(arg));
	arg.count = count;
	arg.slots = (uintptr_t)slots;
	return mc_ioctl(mc, MOECACHE_IOC_RELEASE, &arg);
}

int mc_kernel_release_all(struct moecache *mc)
{
	struct moecache_release arg = {.flags = MOECACHE_REL_ALL};

	return mc_ioctl(mc, MOECACHE_IOC_RELEASE, &arg);
}
