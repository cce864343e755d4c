// SPDX-License-Identifier: MIT
/*
 * Client calls: acquire, release, prefetch. One acquire path over the two
 * pin mechanisms: kernel pins (kpin.c) and fast pins (fastpin.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_internal.h"

/*
 * The one acquire path: the checks, the caller's pins to drop made a list
 * of real slots, then the handle's pin mechanism (fast pins or kernel
 * pins). Without release: a plain acquire (ACQUIRE rather than
 * ACQUIRE_RELEASE for kernel pins).
 */
static int mc_acquire(struct moecache *mc, bool release, const uint32_t *release_slots,
		      uint32_t release_count, uint32_t layer, const uint32_t *experts,
		      uint32_t count, uint32_t *slots, uint32_t flags, uint32_t timeout_ms,
		      struct moecache_acquire_result *res)
{
	uint32_t stack[64], *pinned = stack;
	uint32_t n_release = 0;
	int ret;

	ret = mc_check_role(mc, MC_ROLE_BIT(MOECACHE_ROLE_CLIENT));
	if (ret)
		return ret;
	ret = mc_check_experts(mc, layer, experts, count);
	if (ret)
		return ret;
	if (mc_check_acquire_flags(flags) || !slots || (release_count && !release_slots))
		return -EINVAL;
	if (release_count > 64) {
		if (mc_check_count(mc, release_count))
			return -E2BIG;
		pinned = malloc(release_count * sizeof(*pinned));
		if (!pinned)
			return -ENOMEM;
	}
	ret = mc_pinned_slots(mc, release_slots, release_count, pinned, &n_release);
	if (ret)
		goto out;
	if (mc->fast_pins)
		ret = mc_fast_acquire(mc, pinned, n_release, layer, experts, count, slots, flags,
				      timeout_ms, res);
	else
		ret = mc_kernel_acquire(mc, release ? pinned : NULL, n_release, layer, experts,
					count, slots, flags, timeout_ms, res);
out:
	if (pinned != stack)
		free(pinned);
	return ret;
}

int moecache_acquire(struct moecache *mc, uint32_t layer, const uint32_t *experts, uint32_t count,
		     uint32_t *slots, uint32_t flags, uint32_t timeout_ms,
		     struct moecache_acquire_result *res)
{
	return mc_acquire(mc, false, NULL, 0, layer, experts, count, slots, flags, timeout_ms, res);
}

int moecache_acquire_release(struct moecache *mc, const uint32_t *release_slots,
			     uint32_t release_count, uint32_t layer, const uint32_t *experts,
			     uint32_t count, uint32_t *slots, uint32_t flags, uint32_t timeout_ms,
			     struct moecache_acquire_result *res)
{
	return mc_acquire(mc, true, release_slots, release_count, layer, experts, count, slots,
			  flags, timeout_ms, res);
}

int moecache_release(struct moecache *mc, const uint32_t *slots, uint32_t count)
{
	uint32_t stack[64], *pinned = stack;
	uint32_t n = 0;
	int ret;

	ret = mc_check_role(mc, MC_ROLE_BIT(MOECACHE_ROLE_CLIENT));
	if (ret)
		return ret;
	ret = mc_check_count(mc, count);
	if (ret)
		return ret;
	if (!slots)
		return -EINVAL;
	/* Misses of a non-waiting acquire come back as NONE: callers may pass the same array. */
	if (count > 64) {
		pinned = malloc(count * sizeof(*pinned));
		if (!pinned)
			return -ENOMEM;
	}
	ret = mc_pinned_slots(mc, slots, count, pinned, &n);
	if (!ret && n)
		ret = mc->fast_pins ? mc_fast_release(mc, pinned, n)
				    : mc_kernel_release(mc, pinned, n);
	if (pinned != stack)
		free(pinned);
	return ret;
}

int moecache_release_all(struct moecache *mc)
{
	int ret;

	ret = mc_check_role(mc, MC_ROLE_BIT(MOECACHE_ROLE_CLIENT));
	if (ret)
		return ret;
	return mc->fast_pins ? mc_fast_release_all(mc) : mc_kernel_release_all(mc);
}

int moecache_prefetch(struct moecache *mc, uint32_t layer, const uint32_t *experts, uint32_t count,
		      uint32_t *n_queued)
{
	struct moecache_prefetch arg;
	int ret;

	ret = mc_check_role(mc, MC_ROLE_BIT(MOECACHE_ROLE_CLIENT));
	if (ret)
		return ret;
	ret = mc_check_experts(mc, layer, experts, count);
	if (ret)
		return ret;
	memset(&arg, 0, sizeof(arg));
	arg.layer = layer;
	arg.count = count;
	arg.experts = (uintptr_t)experts;
	ret = mc_ioctl(mc, MOECACHE_IOC_PREFETCH, &arg);
	if (ret)
		return ret;
	if (n_queued)
		*n_queued = arg.n_queued;
	return 0;
}
