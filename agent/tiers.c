// SPDX-License-Identifier: MIT
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiers.h"

int agent_tiers_parse(const char *spec, double *fractions, uint32_t *n, char *err, size_t err_len)
{
	const char *p = spec;
	double sum = 0.0;

	*n = 0;
	if (!spec || !*spec) {
		snprintf(err, err_len, "empty: give each tier's fraction, fastest first");
		return -EINVAL;
	}
	for (;;) {
		char *end;
		double f = strtod(p, &end);

		if (end == p || (*end && *end != ',') || !isfinite(f) || !(f > 0.0 && f <= 1.0)) {
			snprintf(err, err_len, "\"%s\": tier %u is not a fraction in (0, 1]", spec,
				 *n);
			return -EINVAL;
		}
		if (*n == AGENT_TIERS_MAX) {
			snprintf(err, err_len, "\"%s\": at most %d tiers", spec, AGENT_TIERS_MAX);
			return -EINVAL;
		}
		fractions[(*n)++] = f;
		sum += f;
		if (!*end)
			break;
		p = end + 1;
	}
	/* An expert sits in one tier: slots beyond all experts would never be used. */
	if (sum > 1.0 + 1e-9) {
		snprintf(err, err_len, "\"%s\": the fractions sum to %g, more than 1", spec, sum);
		return -EINVAL;
	}
	return 0;
}

int agent_tiers_init(struct agent_tiers *t, uint32_t n, struct agent_slots *const *tiers,
		     enum agent_tier_placement placement, const struct agent_tier_ops *ops,
		     void *ctx)
{
	uint64_t lower = 0, before = 0;

	memset(t, 0, sizeof(*t));
	if (!n || n > AGENT_TIERS_MAX || !tiers || !ops || !ops->move || !ops->clear)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (!tiers[i] || tiers[i]->n_local != tiers[0]->n_local ||
		    tiers[i]->n_idx != tiers[0]->n_idx)
			return -EINVAL;
		t->tier[i] = tiers[i];
		lower += i ? tiers[i]->n_slots : 0;
	}
	t->n_tiers = n;
	t->placement = placement;
	t->n_local = tiers[0]->n_local;
	t->n_idx = tiers[0]->n_idx;
	t->ops = ops;
	t->ctx = ctx;
	/* Slices in tier order, each in proportion to its slots. */
	for (uint32_t i = 1; placement == AGENT_TIERS_STATIC && i < n; i++) {
		t->slice_begin[i] = (uint32_t)(before * t->n_local / lower);
		before += tiers[i]->n_slots;
		t->slice_end[i] = (uint32_t)(before * t->n_local / lower);
		if (t->slice_end[i] == t->slice_begin[i])
			return -EINVAL;
	}
	t->where_tier = malloc(sizeof(*t->where_tier) * t->n_idx);
	t->where_slot = malloc(sizeof(*t->where_slot) * t->n_idx);
	if (!t->where_tier || !t->where_slot) {
		agent_tiers_destroy(t);
		return -ENOMEM;
	}
	memset(t->where_tier, 0xff, sizeof(*t->where_tier) * t->n_idx);
	memset(t->where_slot, 0xff, sizeof(*t->where_slot) * t->n_idx);
	return 0;
}

void agent_tiers_destroy(struct agent_tiers *t)
{
	free(t->where_tier);
	free(t->where_slot);
	t->where_tier = NULL;
	t->where_slot = NULL;
}

uint32_t agent_tiers_where(const struct agent_tiers *t, uint32_t idx, uint32_t *slot)
{
	if (idx >= t->n_idx)
		return AGENT_TIER_NONE;
	if (slot)
		*slot = t->where_slot[idx];
	return t->where_tier[idx];
}

uint32_t agent_tiers_owner(const struct agent_tiers *t, uint32_t idx)
{
	uint32_t expert = idx % t->n_local;

	if (t->placement != AGENT_TIERS_STATIC || idx >= t->n_idx)
		return AGENT_TIER_NONE;
	for (uint32_t i = 1; i < t->n_tiers; i++)
		if (expert >= t->slice_begin[i] && expert < t->slice_end[i])
			return i;
	return AGENT_TIER_NONE;
}

void agent_tiers_access(struct agent_tiers *t, uint32_t idx, uint64_t step)
{
	for (uint32_t i = 0; i < t->n_tiers; i++)
		moe_policy_access(t->tier[i]->policy, idx / t->n_local, idx % t->n_local, 1, step);
}

void agent_tiers_new_round(struct agent_tiers *t, uint64_t step_start)
{
	for (uint32_t i = 0; i < t->n_tiers; i++)
		agent_slots_new_round(t->tier[i], step_start);
}

static int tiers_place(struct agent_tiers *t, uint32_t tier, uint32_t slot, uint32_t idx,
		       bool prefetch, uint32_t from, uint32_t from_slot);

/* victim leaves slot from_slot of tier from (about to be taken): down a tier, or to the host. */
static int tiers_demote(struct agent_tiers *t, uint32_t from, uint32_t from_slot, uint32_t victim)
{
	uint32_t to;
	int slot;

	t->where_tier[victim] = AGENT_TIER_NONE;
	t->where_slot[victim] = AGENT_TIER_NONE;
	if (t->placement == AGENT_TIERS_DYNAMIC)
		to = from + 1 < t->n_tiers ? from + 1 : AGENT_TIER_NONE;
	else
		to = from == 0 ? agent_tiers_owner(t, victim) : AGENT_TIER_NONE;
	if (to == AGENT_TIER_NONE) {
		t->stats[from].drops++;
		return 0;
	}
	slot = agent_slots_choose(t->tier[to], victim, false);
	if (slot == -ENOSPC) {
		t->stats[from].drops++;
		return 0;
	}
	if (slot < 0)
		return slot;
	t->stats[to].demotions++;
	return tiers_place(t, to, (uint32_t)slot, victim, false, from, from_slot);
}

/* idx into slot of tier (from, from_slot: where it leaves, or NONE from the host pages). */
static int tiers_place(struct agent_tiers *t, uint32_t tier, uint32_t slot, uint32_t idx,
		       bool prefetch, uint32_t from, uint32_t from_slot)
{
	struct agent_slots *s = t->tier[tier];
	uint32_t old = s->held[slot];
	int err;

	if (old != MOECACHE_NONE) {
		err = tiers_demote(t, tier, slot, old);
		if (err)
			return err;
	}
	t->ops->move(t->ctx, tier, slot, idx, from, from_slot);
	agent_slots_taken(s, slot, idx, prefetch);
	if (!t->ops->deferred_commit)
		agent_slots_committed(s, slot);
	t->where_tier[idx] = tier;
	t->where_slot[idx] = slot;
	return 0;
}

int agent_tiers_fill(struct agent_tiers *t, uint32_t idx)
{
	return agent_tiers_fill_as(t, idx, false);
}

int agent_tiers_fill_as(struct agent_tiers *t, uint32_t idx, bool prefetch)
{
	int slot, err;

	if (idx >= t->n_idx)
		return -EINVAL;
	if (t->where_tier[idx] != AGENT_TIER_NONE)
		return -EEXIST;
	slot = agent_slots_choose(t->tier[0], idx, prefetch);
	if (slot < 0)
		return slot;
	err = tiers_place(t, 0, (uint32_t)slot, idx, prefetch, AGENT_TIER_NONE, AGENT_TIER_NONE);
	if (err)
		return err;
	t->stats[0].fills++;
	return slot;
}

int agent_tiers_promote(struct agent_tiers *t, uint32_t idx)
{
	uint32_t from, from_slot;
	int slot, err;

	if (idx >= t->n_idx)
		return -EINVAL;
	from = t->where_tier[idx];
	from_slot = t->where_slot[idx];
	if (from == AGENT_TIER_NONE || from == 0)
		return -EINVAL;
	if (agent_slots_is_filling(t->tier[from], idx))
		return -EBUSY; /* its move there has not finished */
	/* Admitted as a prefetch is: only over a colder victim, never this step's. */
	slot = agent_slots_choose(t->tier[0], idx, true);
	if (slot < 0)
		return slot;
	/* The lower slot is freed first: the victim may be demoted into it. */
	t->ops->clear(t->ctx, from, from_slot);
	agent_slots_aborted(t->tier[from], from_slot);
	t->where_tier[idx] = AGENT_TIER_NONE;
	t->where_slot[idx] = AGENT_TIER_NONE;
	err = tiers_place(t, 0, (uint32_t)slot, idx, true, from, from_slot);
	if (err)
		return err;
	t->stats[0].promotions++;
	return slot;
}

void agent_tiers_committed(struct agent_tiers *t, uint32_t tier, uint32_t slot)
{
	if (tier < t->n_tiers)
		agent_slots_committed(t->tier[tier], slot);
}

uint32_t agent_tiers_sync(struct agent_tiers *t)
{
	uint32_t resident = 0;

	memset(t->where_tier, 0xff, sizeof(*t->where_tier) * t->n_idx);
	memset(t->where_slot, 0xff, sizeof(*t->where_slot) * t->n_idx);
	for (uint32_t i = 0; i < t->n_tiers; i++) {
		struct agent_slots *s = t->tier[i];

		resident += agent_slots_sync(s);
		for (uint32_t slot = 0; slot < s->n_slots; slot++) {
			uint32_t idx = s->held[slot];

			if (idx == MOECACHE_NONE || idx >= t->n_idx)
				continue;
			/* A move under way wins over the slot it leaves. */
			if (t->where_tier[idx] != AGENT_TIER_NONE && s->filling[idx] != slot)
				continue;
			t->where_tier[idx] = i;
			t->where_slot[idx] = slot;
		}
	}
	return resident;
}
