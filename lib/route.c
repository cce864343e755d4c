// SPDX-License-Identifier: MIT
/*
 * Banks of a pool as the map describes them, and routes: the experts of
 * one acquire grouped by the bank they are resident in. The slot range
 * and tier of a bank are fixed when the pool is created and were checked
 * by moecache_map_bind (map.c); backend, device and flags are the agent's
 * and read with acquire loads.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_atomic.h"
#include "mc_internal.h"

uint32_t moecache_map_n_banks(const struct moecache_map *m)
{
	return m && m->hdr ? m->n_banks : 0;
}

int moecache_map_bank(const struct moecache_map *m, uint32_t index, struct moecache_map_bank *out)
{
	const struct moecache_map_bank *b;

	if (!m || !m->hdr || !out || index >= m->n_banks)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!m->banks) {
		/* A map without a bank table: one bank of every slot, tier 0. */
		out->n_slots = m->n_slots;
		out->backend = MOECACHE_BACKEND_NONE;
		return 0;
	}
	b = &m->banks[index];
	out->slot_begin = b->slot_begin;
	out->n_slots = b->n_slots;
	out->tier = b->tier;
	out->backend = mc_load_acquire_u32(&b->backend);
	out->device = mc_load_acquire_u32(&b->device);
	out->flags = mc_load_acquire_u32(&b->flags);
	return 0;
}

uint32_t moecache_map_slot_bank(const struct moecache_map *m, uint32_t slot)
{
	uint32_t lo = 0, hi;

	if (!m || !m->hdr || slot >= m->n_slots)
		return MOECACHE_NONE;
	if (!m->banks)
		return 0;
	/* The last bank that begins at or before slot: banks are in slot order. */
	hi = m->n_banks;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (m->banks[mid].slot_begin <= slot)
			lo = mid;
		else
			hi = mid;
	}
	return slot - m->banks[lo].slot_begin < m->banks[lo].n_slots ? lo : MOECACHE_NONE;
}

int moecache_route_new(const struct moecache_map *m, uint32_t max, struct moecache_route **out)
{
	struct moecache_route *r;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!m || !m->hdr || max == 0)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->n_banks = m->n_banks;
	r->max = max;
	r->first = calloc((size_t)m->n_banks + 3, sizeof(*r->first));
	r->entries = calloc(max, sizeof(*r->entries));
	if (!r->first || !r->entries) {
		moecache_route_free(r);
		return -ENOMEM;
	}
	*out = r;
	return 0;
}

void moecache_route_free(struct moecache_route *r)
{
	if (!r)
		return;
	free(r->first);
	free(r->entries);
	free(r);
}

/* The group of a slot: its bank, or n_banks for a cold one. */
static uint32_t mc_route_group(const struct moecache_map *m, uint32_t slot)
{
	return slot == MOECACHE_NONE ? m->n_banks : moecache_map_slot_bank(m, slot);
}

int moecache_route_build(const struct moecache_map *m, const uint32_t *experts,
			 const uint32_t *slots, uint32_t count, struct moecache_route *r)
{
	uint32_t n_groups, *first;

	if (!m || !m->hdr || !r || (count && (!experts || !slots)) || r->n_banks != m->n_banks)
		return -EINVAL;
	if (count > r->max)
		return -E2BIG;
	for (uint32_t i = 0; i < count; i++)
		if (slots[i] != MOECACHE_NONE && slots[i] >= m->n_slots)
			return -EINVAL;
	/*
	 * A stable counting sort. Group g's count goes to first[g + 2]; the
	 * prefix sums make first[g + 1] the start of g, which placing
	 * advances to its end, the start of g + 1.
	 */
	n_groups = m->n_banks + 1;
	first = r->first;
	memset(first, 0, ((size_t)n_groups + 2) * sizeof(*first));
	for (uint32_t i = 0; i < count; i++)
		first[mc_route_group(m, slots[i]) + 2]++;
	for (uint32_t g = 2; g < n_groups + 2; g++)
		first[g] += first[g - 1];
	for (uint32_t i = 0; i < count; i++) {
		uint32_t g = mc_route_group(m, slots[i]);
		struct moecache_route_entry *e = &r->entries[first[g + 1]++];

		e->pos = i;
		e->expert = experts[i];
		e->slot = slots[i];
		e->bank = g == m->n_banks ? MOECACHE_NONE : g;
		e->local = g == m->n_banks ? MOECACHE_NONE
					   : slots[i] - (m->banks ? m->banks[g].slot_begin : 0);
	}
	r->count = count;
	return 0;
}

const struct moecache_route_entry *moecache_route_group(const struct moecache_route *r, uint32_t b,
							uint32_t *n)
{
	if (n)
		*n = 0;
	if (!r || b > r->n_banks)
		return NULL;
	if (n)
		*n = r->first[b + 1] - r->first[b];
	return &r->entries[r->first[b]];
}

int moecache_acquire_route(struct moecache *mc, const uint32_t *release_slots,
			   uint32_t release_count, uint32_t layer, const uint32_t *experts,
			   uint32_t count, uint32_t *slots, uint32_t flags, uint32_t timeout_ms,
			   struct moecache_acquire_result *res, struct moecache_route *route)
{
	int ret;

	ret = mc_check_role(mc, MC_ROLE_BIT(MOECACHE_ROLE_CLIENT));
	if (ret)
		return ret;
	if (!route || route->n_banks != mc->map.n_banks)
		return -EINVAL;
	if (count > route->max)
		return -E2BIG;
	ret = release_count
		  ? moecache_acquire_release(mc, release_slots, release_count, layer, experts,
					     count, slots, flags, timeout_ms, res)
		  : moecache_acquire(mc, layer, experts, count, slots, flags, timeout_ms, res);
	if (ret)
		return ret;
	return moecache_route_build(&mc->map, experts, slots, count, route);
}
