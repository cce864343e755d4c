/* SPDX-License-Identifier: MIT */
/* Internal to libmoepolicy: the common state every policy shares, and the ops table. */
#ifndef MOECACHE_AGENT_POLICY_POLICY_IMPL_H
#define MOECACHE_AGENT_POLICY_POLICY_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

#define MOE_ID_NONE UINT32_MAX

struct moe_policy_ops {
	const char *name;
	bool reads_future; /* needs moe_policy_config.future: simulation only */
	/* Sets up p->priv; the common state is ready. Returns 0 or -errno. */
	int (*init)(struct moe_policy *p, const struct moe_policy_config *cfg);
	void (*fini)(struct moe_policy *p);
	/* After the common state recorded the access (id is valid). */
	void (*access)(struct moe_policy *p, uint32_t id, uint32_t count);
	/* After slot_id/id_slot were updated. */
	void (*inserted)(struct moe_policy *p, uint32_t slot, uint32_t id, bool prefetch);
	/* Before slot_id/id_slot are cleared: id is still the slot's owner. */
	void (*removed)(struct moe_policy *p, uint32_t slot, uint32_t id);
	int (*victim)(struct moe_policy *p, uint32_t id, bool prefetch,
		      bool (*evictable)(void *ctx, uint32_t slot), void *ctx);
	uint32_t (*hot_count)(const struct moe_policy *p);
};

/*
 * Experts are numbered id = layer * n_local + expert. Time is kept three
 * ways: tick (one per access call, a total order for recency), step (the
 * caller's logical time) and, per layer, visits: how many distinct steps
 * have accessed the layer. A layer's visits count tokens (or batches) as
 * that layer sees them, whatever the caller's step numbering is.
 */
struct moe_policy {
	const struct moe_policy_ops *ops;
	uint32_t n_layers, n_local, n_slots, n_ids;
	uint32_t *slot_id; /* slot -> id or MOE_ID_NONE */
	uint32_t *id_slot; /* id -> slot or MOE_ID_NONE */
	uint32_t n_resident;
	uint64_t tick;
	uint64_t step;
	uint64_t *last_tick;	/* id -> tick of its latest access (0: never) */
	uint64_t *layer_visits; /* layer -> visits so far */
	uint64_t *layer_step;	/* layer -> step of its latest visit */
	bool *layer_seen;
	uint64_t *last_visit; /* id -> layer visit of its latest access */
	bool *used;	      /* id -> accessed at least once */
	/* Popularity for moe_policy_ranking: decayed uses, per layer visit. */
	double *pop;
	uint64_t *pop_visit;
	void *priv;
};

static inline uint32_t moe_policy_id(const struct moe_policy *p, uint32_t layer, uint32_t expert)
{
	return layer * p->n_local + expert;
}

static inline uint32_t moe_policy_id_layer(const struct moe_policy *p, uint32_t id)
{
	return id / p->n_local;
}

/* Visits of id's layer between id's latest access and the layer's next visit (>= 1). */
static inline uint64_t moe_policy_next_gap(const struct moe_policy *p, uint32_t id)
{
	uint32_t layer = moe_policy_id_layer(p, id);

	return p->layer_visits[layer] + 1 - p->last_visit[id];
}

/*
 * Steps until id's layer runs again while layer now runs: 1 for the next
 * layer, n_layers for the layer now running.
 */
static inline uint32_t moe_policy_layer_distance(const struct moe_policy *p, uint32_t id,
						 uint32_t now)
{
	uint32_t layer = moe_policy_id_layer(p, id);
	uint32_t d = (layer + p->n_layers - now % p->n_layers) % p->n_layers;

	return d ? d : p->n_layers;
}

/*
 * The evictable occupied slot with the highest score(p, id, arg); ties go to
 * the least recently used. Returns the slot or -ENOSPC. Scores are doubles
 * so policies can mix frequency and time.
 */
int moe_policy_scan(struct moe_policy *p,
		    double (*score)(struct moe_policy *p, uint32_t id, void *arg), void *arg,
		    bool (*evictable)(void *ctx, uint32_t slot), void *ctx);

extern const struct moe_policy_ops moe_policy_lru_ops;
extern const struct moe_policy_ops moe_policy_lfu_ops;
extern const struct moe_policy_ops moe_policy_ema_ops;
extern const struct moe_policy_ops moe_policy_arc_ops;
extern const struct moe_policy_ops moe_policy_static_ops;
extern const struct moe_policy_ops moe_policy_belady_ops;
extern const struct moe_policy_ops moe_policy_reuse_ops;
extern const struct moe_policy_ops moe_policy_revisit_ops;
extern const struct moe_policy_ops moe_policy_lookahead_ops;
extern const struct moe_policy_ops moe_policy_duel_ops;
extern const struct moe_policy_ops moe_policy_lrfu_ops;

#endif /* MOECACHE_AGENT_POLICY_POLICY_IMPL_H */
