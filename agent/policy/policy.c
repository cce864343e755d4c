// SPDX-License-Identifier: MIT
/* Policy registry and the state every policy shares. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy_impl.h"

/* Half-life, in visits of the expert's layer, of the popularity behind moe_policy_ranking. */
#define MOE_RANK_HALF_LIFE 64.0

static const struct moe_policy_ops *const moe_policy_table[] = {
    &moe_policy_lru_ops,   &moe_policy_lfu_ops,	    &moe_policy_ema_ops,
    &moe_policy_arc_ops,   &moe_policy_static_ops,  &moe_policy_belady_ops,
    &moe_policy_reuse_ops, &moe_policy_revisit_ops, &moe_policy_lookahead_ops,
    &moe_policy_duel_ops,  &moe_policy_lrfu_ops,
};

#define MOE_N_POLICIES (sizeof(moe_policy_table) / sizeof(moe_policy_table[0]))

static const struct moe_policy_ops *const moe_policy_default_ops = &moe_policy_duel_ops;

static const char *const moe_policy_name_list[] = {
    "lru",     "lfu",	    "ema",  "arc",  "static",		"belady", "reuse",
    "revisit", "lookahead", "duel", "lrfu", MOE_POLICY_DEFAULT, NULL,
};

const char *const *moe_policy_names(void)
{
	return moe_policy_name_list;
}

const char *moe_policy_default_name(void)
{
	return moe_policy_default_ops->name;
}

static const struct moe_policy_ops *moe_policy_lookup(const char *name)
{
	if (!name || !strcmp(name, MOE_POLICY_DEFAULT))
		return moe_policy_default_ops;
	for (size_t i = 0; i < MOE_N_POLICIES; i++)
		if (!strcmp(name, moe_policy_table[i]->name))
			return moe_policy_table[i];
	return NULL;
}

bool moe_policy_exists(const char *name)
{
	return moe_policy_lookup(name) != NULL;
}

bool moe_policy_reads_future(const char *name)
{
	const struct moe_policy_ops *ops = moe_policy_lookup(name);

	return ops && ops->reads_future;
}

static void moe_policy_free_common(struct moe_policy *p)
{
	free(p->slot_id);
	free(p->id_slot);
	free(p->last_tick);
	free(p->layer_visits);
	free(p->layer_step);
	free(p->layer_seen);
	free(p->last_visit);
	free(p->used);
	free(p->pop);
	free(p->pop_visit);
	free(p);
}

int moe_policy_create(const char *name, const struct moe_policy_config *cfg,
		      struct moe_policy **out)
{
	const struct moe_policy_ops *ops;
	struct moe_policy *p;
	int err;

	if (!cfg || !out)
		return -EINVAL;
	*out = NULL;
	ops = moe_policy_lookup(name);
	if (!ops)
		return -ENOENT;
	if (!cfg->n_layers || !cfg->n_local || !cfg->n_slots)
		return -EINVAL;
	/* ids are uint32 with one value kept for "none" */
	if ((uint64_t)cfg->n_layers * cfg->n_local >= MOE_ID_NONE || cfg->n_slots >= MOE_ID_NONE)
		return -EINVAL;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ops = ops;
	p->n_layers = cfg->n_layers;
	p->n_local = cfg->n_local;
	p->n_slots = cfg->n_slots;
	p->n_ids = cfg->n_layers * cfg->n_local;
	p->slot_id = malloc(sizeof(*p->slot_id) * p->n_slots);
	p->id_slot = malloc(sizeof(*p->id_slot) * p->n_ids);
	p->last_tick = calloc(p->n_ids, sizeof(*p->last_tick));
	p->layer_visits = calloc(p->n_layers, sizeof(*p->layer_visits));
	p->layer_step = calloc(p->n_layers, sizeof(*p->layer_step));
	p->layer_seen = calloc(p->n_layers, sizeof(*p->layer_seen));
	p->last_visit = calloc(p->n_ids, sizeof(*p->last_visit));
	p->used = calloc(p->n_ids, sizeof(*p->used));
	p->pop = calloc(p->n_ids, sizeof(*p->pop));
	p->pop_visit = calloc(p->n_ids, sizeof(*p->pop_visit));
	if (!p->slot_id || !p->id_slot || !p->last_tick || !p->layer_visits || !p->layer_step ||
	    !p->layer_seen || !p->last_visit || !p->used || !p->pop || !p->pop_visit) {
		moe_policy_free_common(p);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < p->n_slots; i++)
		p->slot_id[i] = MOE_ID_NONE;
	for (uint32_t i = 0; i < p->n_ids; i++)
		p->id_slot[i] = MOE_ID_NONE;

	err = ops->init(p, cfg);
	if (err) {
		moe_policy_free_common(p);
		return err;
	}
	*out = p;
	return 0;
}

void moe_policy_destroy(struct moe_policy *p)
{
	if (!p)
		return;
	if (p->ops->fini)
		p->ops->fini(p);
	moe_policy_free_common(p);
}

const char *moe_policy_name(const struct moe_policy *p)
{
	return p->ops->name;
}

static double moe_policy_pop_at(const struct moe_policy *p, uint32_t id)
{
	uint64_t now = p->layer_visits[moe_policy_id_layer(p, id)];

	return p->pop[id] * exp2(-(double)(now - p->pop_visit[id]) / MOE_RANK_HALF_LIFE);
}

void moe_policy_access(struct moe_policy *p, uint32_t layer, uint32_t expert, uint32_t count,
		       uint64_t step)
{
	uint32_t id;

	if (layer >= p->n_layers || expert >= p->n_local)
		return;
	if (!count)
		count = 1;
	id = moe_policy_id(p, layer, expert);
	if (step > p->step)
		p->step = step;
	/* A new step for this layer is a new visit: that is how layers count tokens. */
	if (!p->layer_seen[layer] || p->layer_step[layer] != step) {
		p->layer_seen[layer] = true;
		p->layer_step[layer] = step;
		p->layer_visits[layer]++;
	}
	p->tick++;
	p->last_tick[id] = p->tick;
	p->pop[id] = moe_policy_pop_at(p, id) + count;
	p->pop_visit[id] = p->layer_visits[layer];
	p->ops->access(p, id, count);
	/* Policies read last_visit as "before this access" in their access hook. */
	p->last_visit[id] = p->layer_visits[layer];
	p->used[id] = true;
}

void moe_policy_removed(struct moe_policy *p, uint32_t slot)
{
	uint32_t id;

	if (slot >= p->n_slots || p->slot_id[slot] == MOE_ID_NONE)
		return;
	id = p->slot_id[slot];
	p->ops->removed(p, slot, id);
	p->slot_id[slot] = MOE_ID_NONE;
	p->id_slot[id] = MOE_ID_NONE;
	p->n_resident--;
}

void moe_policy_inserted(struct moe_policy *p, uint32_t slot, uint32_t layer, uint32_t expert,
			 bool prefetch)
{
	uint32_t id;

	if (slot >= p->n_slots || layer >= p->n_layers || expert >= p->n_local)
		return;
	id = moe_policy_id(p, layer, expert);
	if (p->slot_id[slot] == id)
		return;
	/* Keep the map one-to-one even if the caller skipped a removal. */
	moe_policy_removed(p, slot);
	if (p->id_slot[id] != MOE_ID_NONE)
		moe_policy_removed(p, p->id_slot[id]);
	p->slot_id[slot] = id;
	p->id_slot[id] = slot;
	p->n_resident++;
	p->ops->inserted(p, slot, id, prefetch);
}

int moe_policy_victim(struct moe_policy *p, uint32_t layer, uint32_t expert, bool prefetch,
		      bool (*evictable)(void *ctx, uint32_t slot), void *ctx)
{
	if (layer >= p->n_layers || expert >= p->n_local || !evictable)
		return -EINVAL;
	return p->ops->victim(p, moe_policy_id(p, layer, expert), prefetch, evictable, ctx);
}

uint32_t moe_policy_hot_count(const struct moe_policy *p)
{
	return p->ops->hot_count ? p->ops->hot_count(p) : 0;
}

int moe_policy_scan(struct moe_policy *p,
		    double (*score)(struct moe_policy *p, uint32_t id, void *arg), void *arg,
		    bool (*evictable)(void *ctx, uint32_t slot), void *ctx)
{
	int best = -ENOSPC;
	double best_score = 0;
	uint64_t best_tick = 0;

	for (uint32_t slot = 0; slot < p->n_slots; slot++) {
		uint32_t id = p->slot_id[slot];
		double s;

		if (id == MOE_ID_NONE || !evictable(ctx, slot))
			continue;
		s = score(p, id, arg);
		if (best < 0 || s > best_score ||
		    (s == best_score && p->last_tick[id] < best_tick)) {
			best = (int)slot;
			best_score = s;
			best_tick = p->last_tick[id];
		}
	}
	return best;
}

int moe_policy_ranking(struct moe_policy *p, struct moe_profile *out)
{
	uint32_t *ids;
	double *key;
	uint32_t n = 0;

	if (!out)
		return -EINVAL;
	out->n = 0;
	out->ranked = NULL;
	ids = malloc(sizeof(*ids) * p->n_ids);
	key = calloc(p->n_ids, sizeof(*key));
	if (!ids || !key) {
		free(ids);
		free(key);
		return -ENOMEM;
	}
	for (uint32_t id = 0; id < p->n_ids; id++) {
		key[id] = moe_policy_pop_at(p, id);
		if (p->used[id])
			ids[n++] = id;
	}
	moe_rank_ids(ids, n, key);
	free(key);
	if (n) {
		out->ranked = malloc(sizeof(*out->ranked) * n);
		if (!out->ranked) {
			free(ids);
			return -ENOMEM;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		out->ranked[i].layer = moe_policy_id_layer(p, ids[i]);
		out->ranked[i].expert = ids[i] % p->n_local;
	}
	out->n = n;
	free(ids);
	return 0;
}
