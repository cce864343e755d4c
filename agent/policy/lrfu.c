// SPDX-License-Identifier: MIT
/*
 * lrfu: the baseline a llama.cpp user compares against, written from the
 * description of llama.cpp's host-to-GPU expert cache: a cache per layer
 * (each layer gets n_slots / n_layers of the bank, the first layers one
 * more when it does not divide) ranking its experts by a decayed count of
 * their uses, the LRFU class between LRU and LFU (Lee et al.):
 *
 *	crf(x) = sum over x's uses i of 2^(-(now - t_i) / half_life)
 *
 * with time in tokens (visits of x's layer) and a half-life of 128 tokens.
 * A miss of a layer at its share evicts that layer's lowest crf; a miss of
 * a layer below its share takes from a layer above its own (the bank fills
 * in whatever order misses come), lowest crf first. Ties go to the least
 * recently used. It has no prefetch: a prefetch is refused.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "policy_impl.h"

#define LRFU_HALF_LIFE_TOKENS 128.0

struct lrfu {
	double *crf;	     /* id -> decayed uses as of crf_visit */
	uint64_t *crf_visit; /* id -> visit of its layer crf was last brought to */
	uint32_t *resident;  /* layer -> experts of the layer in the bank */
	uint32_t *share;     /* layer -> its slots */
};

struct lrfu_pick {
	struct lrfu *l;
	uint32_t layer; /* take from this layer, or from layers over their share */
	bool over_share;
	bool (*evictable)(void *ctx, uint32_t slot);
	void *ctx;
	struct moe_policy *p;
};

static int lrfu_init(struct moe_policy *p, const struct moe_policy_config *cfg)
{
	struct lrfu *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->crf = calloc(p->n_ids, sizeof(*l->crf));
	l->crf_visit = calloc(p->n_ids, sizeof(*l->crf_visit));
	l->resident = calloc(p->n_layers, sizeof(*l->resident));
	l->share = calloc(p->n_layers, sizeof(*l->share));
	if (!l->crf || !l->crf_visit || !l->resident || !l->share) {
		free(l->crf);
		free(l->crf_visit);
		free(l->resident);
		free(l->share);
		free(l);
		return -ENOMEM;
	}
	for (uint32_t layer = 0; layer < p->n_layers; layer++)
		l->share[layer] = p->n_slots / p->n_layers + (layer < p->n_slots % p->n_layers);
	p->priv = l;
	return 0;
}

static void lrfu_fini(struct moe_policy *p)
{
	struct lrfu *l = p->priv;

	free(l->crf);
	free(l->crf_visit);
	free(l->resident);
	free(l->share);
	free(l);
}

static double lrfu_crf_now(const struct moe_policy *p, const struct lrfu *l, uint32_t id)
{
	uint64_t now = p->layer_visits[moe_policy_id_layer(p, id)];

	return l->crf[id] * exp2(-(double)(now - l->crf_visit[id]) / LRFU_HALF_LIFE_TOKENS);
}

static void lrfu_access(struct moe_policy *p, uint32_t id, uint32_t count)
{
	struct lrfu *l = p->priv;

	/* One use per token that routed to it: a batched step counts each. */
	l->crf[id] = lrfu_crf_now(p, l, id) + count;
	l->crf_visit[id] = p->layer_visits[moe_policy_id_layer(p, id)];
}

static void lrfu_inserted(struct moe_policy *p, uint32_t slot, uint32_t id, bool prefetch)
{
	struct lrfu *l = p->priv;

	l->resident[moe_policy_id_layer(p, id)]++;
}

static void lrfu_removed(struct moe_policy *p, uint32_t slot, uint32_t id)
{
	struct lrfu *l = p->priv;

	l->resident[moe_policy_id_layer(p, id)]--;
}

static bool lrfu_may_take(void *arg, uint32_t slot)
{
	struct lrfu_pick *pick = arg;
	uint32_t layer = moe_policy_id_layer(pick->p, pick->p->slot_id[slot]);

	if (pick->over_share) {
		if (pick->l->resident[layer] <= pick->l->share[layer])
			return false;
	} else if (layer != pick->layer) {
		return false;
	}
	return pick->evictable(pick->ctx, slot);
}

static double lrfu_score(struct moe_policy *p, uint32_t id, void *arg)
{
	return -lrfu_crf_now(p, p->priv, id);
}

static int lrfu_victim(struct moe_policy *p, uint32_t id, bool prefetch,
		       bool (*evictable)(void *ctx, uint32_t slot), void *ctx)
{
	struct lrfu *l = p->priv;
	uint32_t layer = moe_policy_id_layer(p, id);
	struct lrfu_pick pick = {
	    .l = l,
	    .layer = layer,
	    .over_share = l->resident[layer] < l->share[layer],
	    .evictable = evictable,
	    .ctx = ctx,
	    .p = p,
	};
	int slot;

	if (prefetch)
		return -ECANCELED;
	slot = moe_policy_scan(p, lrfu_score, NULL, lrfu_may_take, &pick);
	/* A layer whose share is all pinned or needed now takes from anyone. */
	if (slot == -ENOSPC)
		slot = moe_policy_scan(p, lrfu_score, NULL, evictable, ctx);
	return slot;
}

const struct moe_policy_ops moe_policy_lrfu_ops = {
    .name = "lrfu",
    .init = lrfu_init,
    .fini = lrfu_fini,
    .access = lrfu_access,
    .inserted = lrfu_inserted,
    .removed = lrfu_removed,
    .victim = lrfu_victim,
};
