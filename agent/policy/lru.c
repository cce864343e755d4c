// SPDX-License-Identifier: MIT
/* lru: evict the least recently accessed expert. */
#include "policy_impl.h"

static int lru_init(struct moe_policy *p, const struct moe_policy_config *cfg)
{
	return 0;
}

static void lru_access(struct moe_policy *p, uint32_t id, uint32_t count)
{
}

static void lru_inserted(struct moe_policy *p, uint32_t slot, uint32_t id, bool prefetch)
{
	/* A prefetched expert counts as used now, or it would be the next victim. */
	if (prefetch)
		p->last_tick[id] = ++p->tick;
}

static void lru_removed(struct moe_policy *p, uint32_t slot, uint32_t id)
{
}

static double lru_score(struct moe_policy *p, uint32_t id, void *arg)
{
	return -(double)p->last_tick[id];
}

static int lru_victim(struct moe_policy *p, uint32_t id, bool prefetch,
		      bool (*evictable)(void *ctx, uint32_t slot), void *ctx)
{
	return moe_policy_scan(p, lru_score, NULL, evictable, ctx);
}

const struct moe_policy_ops moe_policy_lru_ops = {
    .name = "lru",
    .init = lru_init,
    .access = lru_access,
    .inserted = lru_inserted,
    .removed = lru_removed,
    .victim = lru_victim,
};
