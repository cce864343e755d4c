// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "slots.h"

int agent_slots_init(struct agent_slots *s, const struct moecache_map *map,
		     struct moe_policy *policy)
{
	if (!map)
		return -EINVAL;
	return agent_slots_init_bank(s, map, policy, 0, map->n_slots);
}

int agent_slots_init_bank(struct agent_slots *s, const struct moecache_map *map,
			  struct moe_policy *policy, uint32_t slot_begin, uint32_t n_slots)
{
	memset(s, 0, sizeof(*s));
	if (!map || !map->hdr || !policy || !n_slots || slot_begin > map->n_slots ||
	    n_slots > map->n_slots - slot_begin)
		return -EINVAL;
	s->map = map;
	s->policy = policy;
	s->slot_begin = slot_begin;
	s->n_slots = n_slots;
	s->n_layers = map->n_layers;
	s->n_local = map->n_local;
	s->n_idx = map->n_layers * map->n_local;
	s->held = malloc(s->n_slots * sizeof(*s->held));
	s->excluded = calloc(s->n_slots, sizeof(*s->excluded));
	s->filling = malloc(s->n_idx * sizeof(*s->filling));
	s->access_seen = calloc(s->n_idx, sizeof(*s->access_seen));
	s->scan = malloc(s->n_idx * sizeof(*s->scan));
	if (!s->held || !s->excluded || !s->filling || !s->access_seen || !s->scan) {
		agent_slots_destroy(s);
		return -ENOMEM;
	}
	memset(s->held, 0xff, s->n_slots * sizeof(*s->held));
	memset(s->filling, 0xff, s->n_idx * sizeof(*s->filling));
	s->round = 1;
	s->maybe_free = true;
	return 0;
}

void agent_slots_destroy(struct agent_slots *s)
{
	free(s->held);
	free(s->excluded);
	free(s->filling);
	free(s->access_seen);
	free(s->scan);
	memset(s, 0, sizeof(*s));
}

uint32_t agent_slots_sync(struct agent_slots *s)
{
	uint32_t resident = 0;

	for (uint32_t slot = 0; slot < s->n_slots; slot++) {
		uint32_t owner = moecache_map_owner(s->map, s->slot_begin + slot);
		uint32_t now;

		if (owner == MOECACHE_NONE)
			now = MOECACHE_NONE;
		else if (owner & MOECACHE_OWNER_FILLING)
			now = owner & MOECACHE_OWNER_IDX_MASK;
		else
			now = owner < s->n_idx ? owner : MOECACHE_NONE;
		if (now == MOECACHE_NONE)
			s->maybe_free = true;
		if (owner != MOECACHE_NONE && !(owner & MOECACHE_OWNER_FILLING) &&
		    now != MOECACHE_NONE)
			resident++;
		if (s->held[slot] == now)
			continue;
		/* A later step of a tier move: the driver sees the old expert until its EVICT. */
		if (s->hold_pending && s->held[slot] != MOECACHE_NONE &&
		    s->filling[s->held[slot]] == slot)
			continue;
		/* The policy only learns of slots this agent did not fill itself. */
		if (s->held[slot] != MOECACHE_NONE) {
			moe_policy_removed(s->policy, slot);
			if (s->filling[s->held[slot]] == slot)
				s->filling[s->held[slot]] = MOECACHE_NONE;
		}
		s->held[slot] = MOECACHE_NONE;
		if (now != MOECACHE_NONE && !(owner & MOECACHE_OWNER_FILLING)) {
			moe_policy_inserted(s->policy, slot, now / s->n_local, now % s->n_local,
					    false);
			s->held[slot] = now;
		}
	}
	return resident;
}

void agent_slots_set_policy(struct agent_slots *s, struct moe_policy *policy)
{
	s->policy = policy;
	for (uint32_t slot = 0; slot < s->n_slots; slot++) {
		uint32_t idx = s->held[slot];

		if (idx != MOECACHE_NONE)
			moe_policy_inserted(policy, slot, idx / s->n_local, idx % s->n_local,
					    false);
	}
}

void agent_slots_reset_access(struct agent_slots *s)
{
	for (uint32_t idx = 0; idx < s->n_idx; idx++)
		s->access_seen[idx] = moecache_map_access(s->map, idx);
}

static int agent_access_cmp(const void *a, const void *b)
{
	const struct agent_access *x = a, *y = b;

	if (x->clock != y->clock)
		return x->clock < y->clock ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

uint64_t agent_slots_scan_access(struct agent_slots *s, uint64_t step)
{
	uint64_t total = 0;
	uint32_t n = 0;

	for (uint32_t idx = 0; idx < s->n_idx; idx++) {
		uint32_t now = moecache_map_access(s->map, idx);
		uint32_t delta = now - s->access_seen[idx]; /* the counters wrap */
		uint32_t slot;

		if (!delta)
			continue;
		s->access_seen[idx] = now;
		/*
		 * The counters say how often, not when. A resident expert's slot
		 * was stamped with the clock of the acquire that pinned it last;
		 * one that is not resident missed in an acquire still waiting,
		 * the newest one. Feeding the policy in that order keeps the
		 * access order of a batch that spans layers or tokens.
		 */
		slot = moecache_map_slot(s->map, idx / s->n_local,
					 s->map->expert_begin + idx % s->n_local);
		s->scan[n].clock = step;
		if (slot != MOECACHE_NONE && moecache_map_last_use(s->map, slot) < step)
			s->scan[n].clock = moecache_map_last_use(s->map, slot);
		s->scan[n].idx = idx;
		s->scan[n].count = delta;
		n++;
		total += delta;
	}
	qsort(s->scan, n, sizeof(*s->scan), agent_access_cmp);
	s->n_scan = n;
	for (uint32_t i = 0; i < n; i++) {
		const struct agent_access *a = &s->scan[i];

		/* Steps never decrease, whatever a late-seen counter says. */
		if (a->clock > s->last_step)
			s->last_step = a->clock;
		moe_policy_access(s->policy, a->idx / s->n_local, a->idx % s->n_local, a->count,
				  s->last_step);
	}
	return total;
}

void agent_slots_new_round(struct agent_slots *s, uint64_t step_start)
{
	s->round++;
	if (s->round == 0) {
		memset(s->excluded, 0, s->n_slots * sizeof(*s->excluded));
		s->round = 1;
	}
	s->step_start = step_start;
}

void agent_slots_exclude(struct agent_slots *s, uint32_t slot)
{
	if (slot < s->n_slots)
		s->excluded[slot] = s->round;
}

int agent_slots_find_free(struct agent_slots *s)
{
	if (!s->maybe_free)
		return -ENOSPC;
	for (uint32_t i = 0; i < s->n_slots; i++) {
		uint32_t slot = (s->free_cursor + i) % s->n_slots;

		if (s->excluded[slot] == s->round || s->held[slot] != MOECACHE_NONE ||
		    moecache_map_owner(s->map, s->slot_begin + slot) != MOECACHE_NONE)
			continue;
		/* A slot a move left keeps its pins until they are released. */
		if (moecache_map_pins(s->map, s->slot_begin + slot))
			continue;
		s->free_cursor = (slot + 1) % s->n_slots;
		return (int)slot;
	}
	s->maybe_free = false;
	return -ENOSPC;
}

static bool agent_slot_evictable(void *ctx, uint32_t slot)
{
	struct agent_slots *s = ctx;
	uint32_t owner;

	if (slot >= s->n_slots || s->excluded[slot] == s->round)
		return false;
	owner = moecache_map_owner(s->map, s->slot_begin + slot);
	if (owner == MOECACHE_NONE || (owner & MOECACHE_OWNER_FILLING))
		return false;
	/* Taken by this agent for a move not started yet (tiers: a plan's later step). */
	if (s->held[slot] != MOECACHE_NONE && s->filling[s->held[slot]] == slot)
		return false;
	if (moecache_map_pins(s->map, s->slot_begin + slot))
		return false;
	if (s->strict && moecache_map_last_use(s->map, s->slot_begin + slot) > s->step_start)
		return false;
	return true;
}

int agent_slots_choose(struct agent_slots *s, uint32_t idx, bool prefetch)
{
	uint32_t layer = idx / s->n_local, expert = idx % s->n_local;
	int slot;

	if (idx >= s->n_idx)
		return -EINVAL;
	slot = agent_slots_find_free(s);
	if (slot >= 0)
		return slot;
	/* A bank that holds every expert always has a free slot for a miss. */
	if (s->n_slots >= s->n_idx)
		return -ENOSPC;
	s->strict = true;
	slot = moe_policy_victim(s->policy, layer, expert, prefetch, agent_slot_evictable, s);
	if (slot == -ENOSPC && !prefetch) {
		s->strict = false;
		slot =
		    moe_policy_victim(s->policy, layer, expert, prefetch, agent_slot_evictable, s);
	}
	/* The policy's answer is checked, not trusted: nothing else would refuse a bad one. */
	if (slot >= 0 && !agent_slot_evictable(s, (uint32_t)slot))
		return -EPROTO;
	return slot;
}

void agent_slots_taken(struct agent_slots *s, uint32_t slot, uint32_t idx, bool prefetch)
{
	if (s->held[slot] != MOECACHE_NONE)
		moe_policy_removed(s->policy, slot);
	s->held[slot] = idx;
	s->filling[idx] = slot;
	moe_policy_inserted(s->policy, slot, idx / s->n_local, idx % s->n_local, prefetch);
}

void agent_slots_committed(struct agent_slots *s, uint32_t slot)
{
	uint32_t idx = s->held[slot];

	if (idx != MOECACHE_NONE && s->filling[idx] == slot)
		s->filling[idx] = MOECACHE_NONE;
}

void agent_slots_aborted(struct agent_slots *s, uint32_t slot)
{
	uint32_t idx = s->held[slot];

	if (idx == MOECACHE_NONE)
		return;
	if (s->filling[idx] == slot)
		s->filling[idx] = MOECACHE_NONE;
	moe_policy_removed(s->policy, slot);
	s->held[slot] = MOECACHE_NONE;
	s->maybe_free = true;
}

bool agent_slots_is_filling(const struct agent_slots *s, uint32_t idx)
{
	return idx < s->n_idx && s->filling[idx] != MOECACHE_NONE;
}
