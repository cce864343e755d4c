// SPDX-License-Identifier: MIT
/* Agent calls: requests, evict, commit, abort, bank hand-over. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "mc_internal.h"

#define MC_AGENT MC_ROLE_BIT(MOECACHE_ROLE_AGENT)

int moecache_read_requests(struct moecache *mc, struct moecache_request *reqs, uint32_t max)
{
	ssize_t n;
	int ret;

	ret = mc_check_role(mc, MC_AGENT);
	if (ret)
		return ret;
	if (!reqs || max == 0)
		return -EINVAL;
	if (max > INT32_MAX / sizeof(*reqs))
		max = INT32_MAX / sizeof(*reqs);
	do
		n = read(mc->fd, reqs, (size_t)max * sizeof(*reqs));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN ? 0 : -errno;
	if (n % sizeof(*reqs))
		return -EPROTO;
	return (int)(n / sizeof(*reqs));
}

int moecache_evict(struct moecache *mc, uint32_t slot, uint32_t layer, uint32_t expert,
		   uint32_t *old_layer, uint32_t *old_expert)
{
	return moecache_evict_flags(mc, slot, layer, expert, 0, old_layer, old_expert);
}

int moecache_evict_flags(struct moecache *mc, uint32_t slot, uint32_t layer, uint32_t expert,
			 uint32_t flags, uint32_t *old_layer, uint32_t *old_expert)
{
	struct moecache_evict arg;
	int ret;

	ret = mc_check_role(mc, MC_AGENT);
	if (ret)
		return ret;
	if (slot >= mc->pool.n_slots || ((layer == MOECACHE_NONE) != (expert == MOECACHE_NONE)))
		return -EINVAL;
	if (layer != MOECACHE_NONE && moecache_map_idx(&mc->map, layer, expert) == MOECACHE_NONE)
		return -EINVAL;
	memset(&arg, 0, sizeof(arg));
	arg.slot = slot;
	arg.layer = layer;
	arg.expert = expert;
	arg.flags = flags;
	ret = mc_ioctl(mc, MOECACHE_IOC_EVICT, &arg);
	if (ret)
		return ret;
	if (old_layer)
		*old_layer = arg.old_layer;
	if (old_expert)
		*old_expert = arg.old_expert;
	return 0;
}

static int mc_fill_batch(struct moecache *mc, unsigned long req, const struct moecache_fill *fills,
			 uint32_t count)
{
	struct moecache_fill_batch arg;
	int ret;

	ret = mc_check_role(mc, MC_AGENT);
	if (ret)
		return ret;
	ret = mc_check_count(mc, count);
	if (ret)
		return ret;
	if (!fills)
		return -EINVAL;
	for (uint32_t i = 0; i < count; i++)
		if (fills[i].slot >= mc->pool.n_slots ||
		    moecache_map_idx(&mc->map, fills[i].layer, fills[i].expert) == MOECACHE_NONE ||
		    (fills[i].flags & ~MOECACHE_FILL_PREFETCH))
			return -EINVAL;
	memset(&arg, 0, sizeof(arg));
	arg.count = count;
	arg.fills = (uintptr_t)fills;
	return mc_ioctl(mc, req, &arg);
}

int moecache_commit(struct moecache *mc, const struct moecache_fill *fills, uint32_t count)
{
	return mc_fill_batch(mc, MOECACHE_IOC_COMMIT, fills, count);
}

int moecache_abort(struct moecache *mc, const struct moecache_fill *fills, uint32_t count)
{
	return mc_fill_batch(mc, MOECACHE_IOC_ABORT, fills, count);
}

/* The slots of bank index as the map's bank table gives them (the pool's, for one bank). */
static uint32_t mc_bank_slots(const struct moecache *mc, uint32_t index)
{
	const struct moecache_map_header *hdr = mc->map.hdr;
	const struct moecache_map_bank *banks;

	if (!hdr || hdr->n_banks <= 1 || !hdr->bank_off)
		return mc->pool.n_slots;
	if (index >= hdr->n_banks || hdr->bank_off > mc->map_len ||
	    (mc->map_len - hdr->bank_off) / sizeof(*banks) < hdr->n_banks)
		return 0; /* the driver says -EINVAL */
	banks = (const struct moecache_map_bank *)((const char *)hdr + hdr->bank_off);
	return banks[index].n_slots;
}

int moecache_bank_set(struct moecache *mc, const struct moecache_bank *bank)
{
	struct moecache_bank arg;
	int ret;

	ret = mc_check_role(mc, MC_AGENT);
	if (ret)
		return ret;
	if (!bank || bank->fd < 0 || bank->slot_stride < mc->pool.expert_bytes ||
	    bank->slot_stride == 0 ||
	    mc_bank_slots(mc, bank->index) > bank->bank_bytes / bank->slot_stride)
		return -EINVAL;
	arg = *bank;
	return mc_ioctl(mc, MOECACHE_IOC_BANK_SET, &arg);
}

int moecache_bank_get(struct moecache *mc, struct moecache_bank *bank)
{
	return moecache_bank_get_index(mc, 0, bank);
}

int moecache_bank_get_index(struct moecache *mc, uint32_t index, struct moecache_bank *bank)
{
	int ret;

	ret = mc_check_role(mc, ~0u);
	if (ret)
		return ret;
	if (!bank)
		return -EINVAL;
	memset(bank, 0, sizeof(*bank));
	bank->fd = -1;
	bank->index = index;
	ret = mc_ioctl(mc, MOECACHE_IOC_BANK_GET, bank);
	if (ret)
		bank->fd = -1;
	return ret;
}
