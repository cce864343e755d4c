// SPDX-License-Identifier: MIT
/*
 * ema: a hot set chosen by EMA-decayed frequency, with hysteresis.
 *
 * Each expert's score is an exponential moving average, over the visits of
 * its layer, of "was it used in this visit". Once per cycle of layers the
 * experts are ranked by score: the top EMA_HOT_ENTER fraction of the bank
 * becomes hot, and a hot expert stays hot until it falls below the
 * EMA_HOT_LEAVE fraction, so experts near the boundary do not flap in and
 * out. Victims are taken from the cold part first (lowest score, then least
 * recently used); a hot expert is evicted only when nothing cold may be, and
 * never for a prefetch.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "policy_impl.h"

#define EMA_ALPHA (1.0 / 16) /* weight of one visit: half-life about 11 visits */
#define EMA_HOT_ENTER_NUM 1  /* enter the hot set within the top 1/2 of the bank */
#define EMA_HOT_ENTER_DEN 2
#define EMA_HOT_LEAVE_NUM 3 /* leave it below the top 3/4 */
#define EMA_HOT_LEAVE_DEN 4

struct ema {
	double *score; /* id -> EMA as of score_visit */
	uint64_t *score_visit;
	bool *hot;
	uint32_t n_hot;
	uint32_t *order; /* scratch for ranking */
	double *key;
	uint64_t accesses; /* distinct (id, visit) uses, to know when a cycle passed */
	uint64_t ranked_at;
	uint32_t enter, leave;
};

static int ema_init(struct moe_policy *p, const struct moe_policy_config *cfg)
{
	struct ema *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->score = calloc(p->n_ids, sizeof(*e->score));
	e->score_visit = calloc(p->n_ids, sizeof(*e->score_visit));
	e->hot = calloc(p->n_ids, sizeof(*e->hot));
	e->order = malloc(sizeof(*e->order) * p->n_ids);
	e->key = malloc(sizeof(*e->key) * p->n_ids);
	if (!e->score || !e->score_visit || !e->hot || !e->order || !e->key) {
		free(e->score);
		free(e->score_visit);
		free(e->hot);
		free(e->order);
		free(e->key);
		free(e);
		return -ENOMEM;
	}
	e->enter = (uint32_t)((uint64_t)p->n_slots * EMA_HOT_ENTER_NUM / EMA_HOT_ENTER_DEN);
	e->leave = (uint32_t)((uint64_t)p->n_slots * EMA_HOT_LEAVE_NUM / EMA_HOT_LEAVE_DEN);
	p->priv = e;
	return 0;
}

static void ema_fini(struct moe_policy *p)
{
	struct ema *e = p->priv;

	free(e->score);
	free(e->score_visit);
	free(e->hot);
	free(e->order);
	free(e->key);
	free(e);
}

static double ema_score_now(const struct moe_policy *p, const struct ema *e, uint32_t id)
{
	uint64_t now = p->layer_visits[moe_policy_id_layer(p, id)];

	return e->score[id] * pow(1.0 - EMA_ALPHA, (double)(now - e->score_visit[id]));
}

static void ema_rank(struct moe_policy *p, struct ema *e)
{
	for (uint32_t id = 0; id < p->n_ids; id++) {
		e->order[id] = id;
		e->key[id] = ema_score_now(p, e, id);
	}
	moe_rank_ids(e->order, p->n_ids, e->key);
	e->n_hot = 0;
	for (uint32_t r = 0; r < p->n_ids; r++) {
		uint32_t id = e->order[r];
		bool hot = e->key[id] > 0 && (r < e->enter || (e->hot[id] && r < e->leave));

		e->hot[id] = hot;
		e->n_hot += hot;
	}
}

static void ema_access(struct moe_policy *p, uint32_t id, uint32_t count)
{
	struct ema *e = p->priv;
	uint32_t layer = moe_policy_id_layer(p, id);
	uint64_t now = p->layer_visits[layer];

	if (p->used[id] && p->last_visit[id] == now)
		return; /* already counted in this visit */
	e->score[id] = ema_score_now(p, e, id) + EMA_ALPHA;
	e->score_visit[id] = now;
	/* Re-rank about once per cycle of layers: cheap, and enough to follow drift. */
	if (++e->accesses - e->ranked_at >= (uint64_t)p->n_layers * 8 || !e->ranked_at) {
		e->ranked_at = e->accesses;
		ema_rank(p, e);
	}
}

static void ema_inserted(struct moe_policy *p, uint32_t slot, uint32_t id, bool prefetch)
{
}

static void ema_removed(struct moe_policy *p, uint32_t slot, uint32_t id)
{
}

static double ema_victim_score(struct moe_policy *p, uint32_t id, void *arg)
{
	struct ema *e = p->priv;

	/* Cold before hot; inside each, lowest score first. Scores are in [0, 1]. */
	return (e->hot[id] ? 0.0 : 2.0) - ema_score_now(p, e, id);
}

static int ema_victim(struct moe_policy *p, uint32_t id, bool prefetch,
		      bool (*evictable)(void *ctx, uint32_t slot), void *ctx)
{
	struct ema *e = p->priv;
	int slot = moe_policy_scan(p, ema_victim_score, NULL, evictable, ctx);

	if (slot >= 0 && prefetch && e->hot[p->slot_id[slot]])
		return -ECANCELED;
	return slot;
}

static uint32_t ema_hot_count(const struct moe_policy *p)
{
	const struct ema *e = p->priv;

	return e->n_hot;
}

const struct moe_policy_ops moe_policy_ema_ops = {
    .name = "ema",
    .init = ema_init,
    .fini = ema_fini,
    .access = ema_access,
    .inserted = ema_inserted,
    .removed = ema_removed,
    .victim = ema_victim,
    .hot_count = ema_hot_count,
};
