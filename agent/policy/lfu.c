// SPDX-License-Identifier: MIT
/*
 * lfu: evict the resident expert with the fewest accesses since it was
 * inserted (the miss that brought it in counts as one); ties go to the least
 * recently used.
 */
#include <errno.h>
#include <stdlib.h>

#include "policy_impl.h"

struct lfu {
	uint64_t *count; /* id -> accesses since insertion */
};

static int lfu_init(struct moe_policy *p, const struct moe_policy_config *cfg)
{
	struct lfu *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->count = calloc(p->n_ids, sizeof(*l->count));
	if (!l->count) {
		free(l);
		return -ENOMEM;
	}
	p->priv = l;
	return 0;
}

static void lfu_fini(struct moe_policy *p)
{
	struct lfu *l = p->priv;

	free(l->count);
	free(l);
}

static void lfu_access(struct moe_policy *p, uint32_t id, uint32_t count)
{
	struct lfu *l = p->priv;

	if (p->id_slot[id] != MOE_ID_NONE)
		l->count[id] += count;
}

static void lfu_inserted(struct moe_policy *p, uint32_t slot, uint32_t id, bool prefetch)
{
	struct lfu *l = p->priv;

	l->count[id] = prefetch ? 0 : 1;
}

static void lfu_removed(struct moe_policy *p, uint32_t slot, uint32_t id)
{
	struct lfu *l = p->priv;

	l->count[id] = 0;
}

static double lfu_score(struct moe_policy *p, uint32_t id, void *arg)
{
	struct lfu *l = p->priv;

	return -(double)l->count[id];
}

static int lfu_victim(struct moe_policy *p, uint32_t id, bool prefetch,
		      bool (*evictable)(void *ctx, uint32_t slot), void *ctx)
{
	return moe_policy_scan(p, lfu_score, NULL, evictable, ctx);
}

const struct moe_policy_ops moe_policy_lfu_ops = {
    .name = "lfu",
    .init = lfu_init,
    .fini = lfu_fini,
    .access = lfu_access,
    .inserted = lfu_inserted,
    .removed = lfu_removed,
    .victim = lfu_victim,
};
