// SPDX-License-Identifier: MIT
/*
 * arc: Adaptive Replacement Cache (Megiddo and Modha, FAST 2003). Resident
 * experts sit on T1 (seen once recently) or T2 (seen at least twice); ghost
 * lists B1 and B2 remember what was evicted from each. A hit on a ghost
 * moves the target size of T1 towards the list that would have kept it, so
 * the cache adapts between recency and frequency. Victims come from the LRU
 * end of T1 or T2; the first evictable entry from that end is taken, since
 * the caller may forbid some slots. Prefetches only displace T1 entries.
 */
#include <errno.h>
#include <stdlib.h>

#include "policy_impl.h"

enum arc_list { ARC_NONE, ARC_T1, ARC_T2, ARC_B1, ARC_B2, ARC_NLISTS };

struct arc {
	uint32_t *prev, *next; /* id -> neighbours in its list (towards MRU, towards LRU) */
	uint8_t *list;	       /* id -> enum arc_list */
	bool *to_t2;	       /* id -> its latest access was a ghost hit */
	bool *from_b2;	       /* id -> that ghost hit was on B2 */
	uint32_t head[ARC_NLISTS], tail[ARC_NLISTS], len[ARC_NLISTS];
	double target; /* wanted size of T1 ("p" in the paper) */
};

static void arc_unlink(struct arc *a, uint32_t id)
{
	uint8_t l = a->list[id];

	if (l == ARC_NONE)
		return;
	if (a->prev[id] != MOE_ID_NONE)
		a->next[a->prev[id]] = a->next[id];
	else
		a->head[l] = a->next[id];
	if (a->next[id] != MOE_ID_NONE)
		a->prev[a->next[id]] = a->prev[id];
	else
		a->tail[l] = a->prev[id];
	a->len[l]--;
	a->list[id] = ARC_NONE;
}

static void arc_push_mru(struct arc *a, uint32_t id, uint8_t l)
{
	arc_unlink(a, id);
	a->list[id] = l;
	a->prev[id] = MOE_ID_NONE;
	a->next[id] = a->head[l];
	if (a->head[l] != MOE_ID_NONE)
		a->prev[a->head[l]] = id;
	else
		a->tail[l] = id;
	a->head[l] = id;
	a->len[l]++;
}

static void arc_trim_ghosts(struct moe_policy *p, struct arc *a)
{
	uint32_t c = p->n_slots;

	while (a->len[ARC_T1] + a->len[ARC_B1] > c && a->len[ARC_B1])
		arc_unlink(a, a->tail[ARC_B1]);
	while (a->len[ARC_T1] + a->len[ARC_T2] + a->len[ARC_B1] + a->len[ARC_B2] >
	       2 * (uint64_t)c) {
		if (a->len[ARC_B2])
			arc_unlink(a, a->tail[ARC_B2]);
		else if (a->len[ARC_B1])
			arc_unlink(a, a->tail[ARC_B1]);
		else
			break;
	}
}

static int arc_init(struct moe_policy *p, const struct moe_policy_config *cfg)
{
	struct arc *a = calloc(1, sizeof(*a));

	if (!a)
		return -ENOMEM;
	a->prev = malloc(sizeof(*a->prev) * p->n_ids);
	a->next = malloc(sizeof(*a->next) * p->n_ids);
	a->list = calloc(p->n_ids, sizeof(*a->list));
	a->to_t2 = calloc(p->n_ids, sizeof(*a->to_t2));
	a->from_b2 = calloc(p->n_ids, sizeof(*a->from_b2));
	if (!a->prev || !a->next || !a->list || !a->to_t2 || !a->from_b2) {
		free(a->prev);
		free(a->next);
		free(a->list);
		free(a->to_t2);
		free(a->from_b2);
		free(a);
		return -ENOMEM;
	}
	for (int l = 0; l < ARC_NLISTS; l++)
		a->head[l] = a->tail[l] = MOE_ID_NONE;
	p->priv = a;
	return 0;
}

static void arc_fini(struct moe_policy *p)
{
	struct arc *a = p->priv;

	free(a->prev);
	free(a->next);
	free(a->list);
	free(a->to_t2);
	free(a->from_b2);
	free(a);
}

static double arc_max(double x, double y)
{
	return x > y ? x : y;
}

static void arc_access(struct moe_policy *p, uint32_t id, uint32_t count)
{
	struct arc *a = p->priv;
	double c = p->n_slots;

	switch (a->list[id]) {
	case ARC_T1:
	case ARC_T2:
		arc_push_mru(a, id, ARC_T2);
		break;
	case ARC_B1:
		/* B1 would have kept it: give recency more room. */
		a->target += arc_max((double)a->len[ARC_B2] / a->len[ARC_B1], 1.0);
		if (a->target > c)
			a->target = c;
		arc_unlink(a, id);
		a->to_t2[id] = true;
		a->from_b2[id] = false;
		break;
	case ARC_B2:
		a->target -= arc_max((double)a->len[ARC_B1] / a->len[ARC_B2], 1.0);
		if (a->target < 0)
			a->target = 0;
		arc_unlink(a, id);
		a->to_t2[id] = true;
		a->from_b2[id] = true;
		break;
	default:
		if (p->id_slot[id] == MOE_ID_NONE) {
			a->to_t2[id] = false;
			a->from_b2[id] = false;
		}
		break;
	}
}

static void arc_inserted(struct moe_policy *p, uint32_t slot, uint32_t id, bool prefetch)
{
	struct arc *a = p->priv;

	arc_push_mru(a, id, a->to_t2[id] && !prefetch ? ARC_T2 : ARC_T1);
	a->to_t2[id] = false;
	a->from_b2[id] = false;
	arc_trim_ghosts(p, a);
}

static void arc_removed(struct moe_policy *p, uint32_t slot, uint32_t id)
{
	struct arc *a = p->priv;

	arc_push_mru(a, id, a->list[id] == ARC_T2 ? ARC_B2 : ARC_B1);
	arc_trim_ghosts(p, a);
}

static int arc_lru_evictable(struct moe_policy *p, struct arc *a, uint8_t l,
			     bool (*evictable)(void *ctx, uint32_t slot), void *ctx)
{
	for (uint32_t id = a->tail[l]; id != MOE_ID_NONE; id = a->prev[id]) {
		uint32_t slot = p->id_slot[id];

		if (slot != MOE_ID_NONE && evictable(ctx, slot))
			return (int)slot;
	}
	return -ENOSPC;
}

static int arc_victim(struct moe_policy *p, uint32_t id, bool prefetch,
		      bool (*evictable)(void *ctx, uint32_t slot), void *ctx)
{
	struct arc *a = p->priv;
	uint32_t t1 = a->len[ARC_T1];
	bool from_t1;
	int slot;

	if (prefetch) {
		slot = arc_lru_evictable(p, a, ARC_T1, evictable, ctx);
		return slot == -ENOSPC ? -ECANCELED : slot;
	}
	/* REPLACE from the paper: T1 when it is over its target size. */
	from_t1 = t1 && (t1 > a->target || (a->from_b2[id] && t1 == (uint32_t)a->target));
	slot = arc_lru_evictable(p, a, from_t1 ? ARC_T1 : ARC_T2, evictable, ctx);
	if (slot < 0)
		slot = arc_lru_evictable(p, a, from_t1 ? ARC_T2 : ARC_T1, evictable, ctx);
	return slot;
}

static uint32_t arc_hot_count(const struct moe_policy *p)
{
	const struct arc *a = p->priv;

	return a->len[ARC_T2];
}

const struct moe_policy_ops moe_policy_arc_ops = {
    .name = "arc",
    .init = arc_init,
    .fini = arc_fini,
    .access = arc_access,
    .inserted = arc_inserted,
    .removed = arc_removed,
    .victim = arc_victim,
    .hot_count = arc_hot_count,
};
