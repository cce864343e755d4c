// SPDX-License-Identifier: MIT
/* Client calls: acquire, release, prefetch. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_internal.h"

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

static int mc_check_acquire_flags(uint32_t flags)
{
	if (flags & ~MOECACHE_ACQ_FLAGS_ALL)
		return -EINVAL;
	if ((flags & MOECACHE_ACQ_KEEP_WAITING) && !(flags & MOECACHE_ACQ_WAIT))
		return -EINVAL;
	if ((flags & MOECACHE_ACQ_NO_QUEUE) && (flags & MOECACHE_ACQ_WAIT))
		return -EINVAL;
	return 0;
}

void mc_fill_acquire(struct moecache_acquire *arg, uint32_t layer, const uint32_t *experts,
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

int moecache_acquire(struct moecache *mc, uint32_t layer, const uint32_t *experts, uint32_t count,
		     uint32_t *slots, uint32_t flags, uint32_t timeout_ms,
		     struct moecache_acquire_result *res)
{
	struct moecache_acquire arg;
	int ret;

	ret = mc_check_role(mc, MC_ROLE_BIT(MOECACHE_ROLE_CLIENT));
	if (ret)
		return ret;
	ret = mc_check_experts(mc, layer, experts, count);
	if (ret)
		return ret;
	ret = mc_check_acquire_flags(flags);
	if (ret || !slots)
		return -EINVAL;
	if (mc->fast_pins)
		return mc_fast_acquire(mc, NULL, 0, layer, experts, count, slots, flags, timeout_ms,
				       res);
	mc_fill_acquire(&arg, layer, experts, count, slots, flags, timeout_ms);
	ret = mc_ioctl(mc, MOECACHE_IOC_ACQUIRE, &arg);
	if (!ret && res) {
		res->n_hits = arg.n_hits;
		res->n_pinned = arg.n_pinned;
	}
	return ret;
}

int moecache_acquire_release(struct moecache *mc, const uint32_t *release_slots,
			     uint32_t release_count, uint32_t layer, const uint32_t *experts,
			     uint32_t count, uint32_t *slots, uint32_t flags, uint32_t timeout_ms,
			     struct moecache_acquire_result *res)
{
	struct moecache_acquire_release arg;
	uint32_t stack[64], *pinned = stack;
	uint32_t n_release;
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
	if (mc->fast_pins) {
		ret = mc_fast_acquire(mc, pinned, n_release, layer, experts, count, slots, flags,
				      timeout_ms, res);
		goto out;
	}
	memset(&arg, 0, sizeof(arg));
	mc_fill_acquire(&arg.acquire, layer, experts, count, slots, flags, timeout_ms);
	arg.release_count = n_release;
	arg.release_slots = n_release ? (uintptr_t)pinned : 0;
	ret = mc_ioctl(mc, MOECACHE_IOC_ACQUIRE_RELEASE, &arg);
	if (!ret && res) {
		res->n_hits = arg.acquire.n_hits;
		res->n_pinned = arg.acquire.n_pinned;
	}
out:
	if (pinned != stack)
		free(pinned);
	return ret;
}

int moecache_release(struct moecache *mc, const uint32_t *slots, uint32_t count)
{
	struct moecache_release arg;
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
	if (!ret && n && mc->fast_pins) {
		ret = mc_fast_release(mc, pinned, n);
	} else if (!ret && n) {
		memset(&arg, 0, sizeof(arg));
		arg.count = n;
		arg.slots = (uintptr_t)pinned;
		ret = mc_ioctl(mc, MOECACHE_IOC_RELEASE, &arg);
	}
	if (pinned != stack)
		free(pinned);
	return ret;
}

int moecache_release_all(struct moecache *mc)
{
	struct moecache_release arg = {.flags = MOECACHE_REL_ALL};
	int ret;

	ret = mc_check_role(mc, MC_ROLE_BIT(MOECACHE_ROLE_CLIENT));
	if (ret)
		return ret;
	if (mc->fast_pins)
		return mc_fast_release_all(mc);
	return mc_ioctl(mc, MOECACHE_IOC_RELEASE, &arg);
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
