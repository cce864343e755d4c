// SPDX-License-Identifier: MIT
/*
 * belady: the offline optimum for demand paging. Evicts the resident expert
 * whose next access is furthest in the future, asking the caller's oracle.
 * The current step's experts are never offered (evictable says so), so
 * "future" starts at the next step.
 */
#include <errno.h>
#include <stddef.h>

#include "policy_impl.h"

static int belady_init(struct moe_policy *p, const struct moe_policy_config *cfg)
{
	if (!cfg->future || !cfg->future->next_use)
		return -EINVAL;
	p->priv = (void *)cfg->future;
	return 0;
}

static void belady_access(struct moe_policy *p, uint32_t id, uint32_t count)
{
}

static void belady_inserted(struct moe_policy *p, uint32_t slot, uint32_t id, bool prefetch)
{
}

static void belady_removed(struct moe_policy *p, uint32_t slot, uint32_t id)
{
}

static uint64_t belady_next_use(struct moe_policy *p, uint32_t id)
{
	const struct moe_future *f = p->priv;

	return f->next_use(f, moe_policy_id_layer(p, id), id % p->n_local, p->step + 1);
}

static double belady_score(struct moe_policy *p, uint32_t id, void *arg)
{
	uint64_t next = belady_next_use(p, id);

	/* Never-used-again beats any finite distance, and all of them tie. */
	return next == MOE_FUTURE_NEVER ? 1e300 : (double)next;
}

static int belady_victim(struct moe_policy *p, uint32_t id, bool prefetch,
			 bool (*evictable)(void *ctx, uint32_t slot), void *ctx)
{
	int slot = moe_policy_scan(p, belady_score, NULL, evictable, ctx);

	/* A prefetch is worth it only if the victim is needed later than the newcomer. */
	if (slot >= 0 && prefetch &&
	    belady_score(p, p->slot_id[slot], NULL) <= belady_score(p, id, NULL))
		return -ECANCELED;
	return slot;
}

const struct moe_policy_ops moe_policy_belady_ops = {
    .name = "belady",
    .reads_future = true,
    .init = belady_init,
    .access = belady_access,
    .inserted = belady_inserted,
    .removed = belady_removed,
    .victim = belady_victim,
};
