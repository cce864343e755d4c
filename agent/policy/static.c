// SPDX-License-Identifier: MIT
/*
 * static: the profile's n_slots hottest experts (inside the pool's range)
 * are pinned once resident; everything else is LRU. When every evictable
 * slot holds a pinned expert, a demand miss still has to be admitted, so the
 * coldest pinned expert (by profile rank) goes; a prefetch is refused.
 */
#include <errno.h>
#include <stdlib.h>

#include "policy_impl.h"

struct static_policy {
	uint32_t *rank; /* id -> rank among pinned experts, or MOE_ID_NONE */
	uint32_t n_pinned;
};

static int static_init(struct moe_policy *p, const struct moe_policy_config *cfg)
{
	struct static_policy *s;

	if (!cfg->profile || (cfg->profile->n && !cfg->profile->ranked))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->rank = malloc(sizeof(*s->rank) * p->n_ids);
	if (!s->rank) {
		free(s);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < p->n_ids; i++)
		s->rank[i] = MOE_ID_NONE;
	for (uint32_t i = 0; i < cfg->profile->n && s->n_pinned < p->n_slots; i++) {
		const struct moe_expert_id *e = &cfg->profile->ranked[i];
		uint32_t id;

		if (e->layer >= p->n_layers || e->expert >= p->n_local)
			continue;
		id = moe_policy_id(p, e->layer, e->expert);
		if (s->rank[id] == MOE_ID_NONE)
			s->rank[id] = s->n_pinned++;
	}
	p->priv = s;
	return 0;
}

static void static_fini(struct moe_policy *p)
{
	struct static_policy *s = p->priv;

	free(s->rank);
	free(s);
}

static void static_access(struct moe_policy *p, uint32_t id, uint32_t count)
{
}

static void static_inserted(struct moe_policy *p, uint32_t slot, uint32_t id, bool prefetch)
{
	if (prefetch)
		p->last_tick[id] = ++p->tick;
}

static void static_removed(struct moe_policy *p, uint32_t slot, uint32_t id)
{
}

static double static_score(struct moe_policy *p, uint32_t id, void *arg)
{
	struct static_policy *s = p->priv;

	/*
	 * Unpinned experts all tie above any rank, so the scan's tie-break picks
	 * the least recently used of them; pinned ones go coldest rank first.
	 */
	if (s->rank[id] == MOE_ID_NONE)
		return 1e300;
	return (double)s->rank[id];
}

static int static_victim(struct moe_policy *p, uint32_t id, bool prefetch,
			 bool (*evictable)(void *ctx, uint32_t slot), void *ctx)
{
	struct static_policy *s = p->priv;
	int slot = moe_policy_scan(p, static_score, NULL, evictable, ctx);

	if (slot >= 0 && prefetch && s->rank[p->slot_id[slot]] != MOE_ID_NONE)
		return -ECANCELED;
	return slot;
}

static uint32_t static_hot_count(const struct moe_policy *p)
{
	const struct static_policy *s = p->priv;

	return s->n_pinned;
}

const struct moe_policy_ops moe_policy_static_ops = {
    .name = "static",
    .init = static_init,
    .fini = static_fini,
    .access = static_access,
    .inserted = static_inserted,
    .removed = static_removed,
    .victim = static_victim,
    .hot_count = static_hot_count,
};
