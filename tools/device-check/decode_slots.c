// SPDX-License-Identifier: MIT
/* bench-decode's residency through moecached's slot choice (decode_slots.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "decode_slots.h"

int decode_slots_init(struct decode_slots *d, const char *policy, uint32_t n_layers,
		      uint32_t n_experts, uint32_t n_slots, uint32_t top_k)
{
	struct moe_policy_config pc = {
	    .n_layers = n_layers, .n_local = n_experts, .n_slots = n_slots};
	int ret;

	memset(d, 0, sizeof(*d));
	if (!n_layers || !n_experts || !n_slots || !top_k)
		return -EINVAL;
	d->n_experts = n_experts;
	d->top_k = top_k;
	d->pinned = calloc(top_k, sizeof(*d->pinned));
	if (!d->pinned)
		return -ENOMEM;
	ret = moe_policy_create(policy, &pc, &d->policy);
	if (ret)
		goto err;
	ret = agent_memmap_init(&d->map, n_layers, n_experts, 0, n_experts, n_slots);
	if (ret)
		goto err_policy;
	ret = agent_slots_init(&d->slots, &d->map.view, d->policy);
	if (ret)
		goto err_map;
	return 0;
err_map:
	agent_memmap_free(&d->map);
err_policy:
	moe_policy_destroy(d->policy);
err:
	free(d->pinned);
	memset(d, 0, sizeof(*d));
	return ret;
}

void decode_slots_free(struct decode_slots *d)
{
	if (!d->policy)
		return;
	agent_slots_destroy(&d->slots);
	agent_memmap_free(&d->map);
	moe_policy_destroy(d->policy);
	free(d->pinned);
	memset(d, 0, sizeof(*d));
}

static void decode_pin(struct decode_slots *d, uint32_t slot)
{
	agent_memmap_pin(&d->map, slot, d->step);
	d->pinned[d->n_pinned++] = slot;
}

int decode_slots_layer(struct decode_slots *d, uint32_t layer, const uint32_t *ids, uint32_t k,
		       uint32_t *slots, uint32_t *missed)
{
	int n_missed = 0;

	if (k > d->top_k)
		return -EINVAL;
	for (uint32_t i = 0; i < d->n_pinned; i++)
		agent_memmap_unpin(&d->map, d->pinned[i]);
	d->n_pinned = 0;
	d->step++;
	/* The hits first, pinned, so that no miss of this layer takes one of them. */
	for (uint32_t i = 0; i < k; i++) {
		slots[i] = MOECACHE_NONE;
		if (ids[i] == MOECACHE_NONE)
			continue;
		moe_policy_access(d->policy, layer, ids[i], 1, d->step);
		slots[i] = moecache_map_slot(&d->map.view, layer, ids[i]);
		if (slots[i] != MOECACHE_NONE) {
			d->hits++;
			decode_pin(d, slots[i]);
		}
	}
	for (uint32_t i = 0; i < k; i++) {
		uint32_t idx = layer * d->n_experts + ids[i];
		int slot;

		if (ids[i] == MOECACHE_NONE || slots[i] != MOECACHE_NONE)
			continue;
		/* A repeat of a miss already taken in this layer is its hit. */
		slots[i] = moecache_map_slot(&d->map.view, layer, ids[i]);
		if (slots[i] != MOECACHE_NONE)
			continue;
		agent_slots_new_round(&d->slots, d->step - 1);
		slot = agent_slots_choose(&d->slots, idx, false);
		if (slot == -ENOSPC)
			continue; /* more distinct experts than slots: left out */
		if (slot < 0)
			return -EPROTO;
		/* EVICT, the copy (the caller's), COMMIT: as the agent and the driver do them. */
		agent_memmap_filling(&d->map, idx, (uint32_t)slot);
		agent_slots_taken(&d->slots, (uint32_t)slot, idx, false);
		agent_memmap_publish(&d->map, idx, (uint32_t)slot);
		agent_slots_committed(&d->slots, (uint32_t)slot);
		decode_pin(d, (uint32_t)slot);
		slots[i] = (uint32_t)slot;
		missed[n_missed++] = i;
		d->misses++;
	}
	return n_missed;
}
