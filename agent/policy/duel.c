// SPDX-License-Identifier: MIT
/*
 * duel: revisit, kept from ever doing much worse than LRU by measuring both
 * online (the default).
 *
 * revisit's estimates are learned from the routing; where the routing gives
 * them little to learn (near-uniform popularity, weak repetition, drift) its
 * ranking can be slightly worse than plain recency. duel runs two shadow
 * caches of the bank's size beside the real one, fed the same demand
 * accesses, every miss admitted:
 *   a shadow LRU   a recency list of ids, O(1) per access;
 *   a shadow revisit  a second revisit instance with a simulated bank
 *                  (its victims are found as revisit finds them, indexed).
 * Each counts its hits in a decayed window of DUEL_WINDOW_SLOTS x n_slots
 * accesses (at least DUEL_MIN_WINDOW). The real bank takes its victims
 * from revisit (an instance that tracks the real bank) until the shadow
 * LRU is ahead, then from its own recency list until the shadow revisit
 * leads again by DUEL_MARGIN of the window's accesses: like set dueling
 * (DIP) and ARC, the policy follows whichever choice has been winning on
 * this very routing, with the same constants on every model. Leaving
 * recency takes clear evidence, since every switch costs the hits of a bank
 * filled for the other order; while neither shadow hits (a bank far too
 * small for the working set), revisit's layer order is kept, which is what
 * the plan of a layer relies on. Because the shadows run the whole time,
 * switching back needs no probing.
 *
 * Memory: three times a policy's common state and two revisits, all O(ids).
 * An access costs two revisit accesses and O(1) for the lists; a victim one
 * revisit victim (indexed, O(n_layers x (gaps x top-k + log n_slots))) for
 * the shadow and one for the real bank, or the recency list's tail.
 */
#include <errno.h>
#include <stdlib.h>

#include "policy_impl.h"

#define DUEL_WINDOW_SLOTS 16.0 /* hits are compared over about 16 x n_slots accesses */
#define DUEL_MIN_WINDOW 4096.0 /* accesses */
#define DUEL_MARGIN 0.01       /* revisit must lead by this share of the window's accesses */

/* A recency list over ids: most recent at head. */
struct duel_list {
	uint32_t *next, *prev;
	bool *in;
	uint32_t head, tail, n;
};

struct duel {
	struct moe_policy *real;   /* revisit over the real bank */
	struct moe_policy *shadow; /* revisit over a simulated bank */
	struct duel_list lru;	   /* shadow LRU: the n_slots most recent ids */
	struct duel_list bank;	   /* the real bank by recency */
	uint64_t shadow_step;	   /* the step shadow_tick0 belongs to */
	uint64_t shadow_tick0;	   /* shadow's tick before that step's first access */
	double keep;		   /* decay of the hit counts per access */
	double hits_lru, hits_revisit, accesses;
	bool follow_lru;
};

static int duel_list_init(struct duel_list *l, uint32_t n_ids)
{
	l->next = malloc(sizeof(*l->next) * n_ids);
	l->prev = malloc(sizeof(*l->prev) * n_ids);
	l->in = calloc(n_ids, sizeof(*l->in));
	l->head = l->tail = MOE_ID_NONE;
	l->n = 0;
	return l->next && l->prev && l->in ? 0 : -ENOMEM;
}

static void duel_list_free(struct duel_list *l)
{
	free(l->next);
	free(l->prev);
	free(l->in);
}

static void duel_list_unlink(struct duel_list *l, uint32_t id)
{
	if (!l->in[id])
		return;
	if (l->prev[id] != MOE_ID_NONE)
		l->next[l->prev[id]] = l->next[id];
	else
		l->head = l->next[id];
	if (l->next[id] != MOE_ID_NONE)
		l->prev[l->next[id]] = l->prev[id];
	else
		l->tail = l->prev[id];
	l->in[id] = false;
	l->n--;
}

static void duel_list_push(struct duel_list *l, uint32_t id)
{
	duel_list_unlink(l, id);
	l->prev[id] = MOE_ID_NONE;
	l->next[id] = l->head;
	if (l->head != MOE_ID_NONE)
		l->prev[l->head] = id;
	else
		l->tail = id;
	l->head = id;
	l->in[id] = true;
	l->n++;
}

static void duel_fini(struct moe_policy *p)
{
	struct duel *d = p->priv;

	if (!d)
		return;
	moe_policy_destroy(d->real);
	moe_policy_destroy(d->shadow);
	duel_list_free(&d->lru);
	duel_list_free(&d->bank);
	free(d);
	p->priv = NULL;
}

static int duel_init(struct moe_policy *p, const struct moe_policy_config *cfg)
{
	struct moe_policy_config inner = {
	    .n_layers = cfg->n_layers, .n_local = cfg->n_local, .n_slots = cfg->n_slots};
	struct duel *d = calloc(1, sizeof(*d));
	double window = DUEL_WINDOW_SLOTS * cfg->n_slots;
	int err;

	if (!d)
		return -ENOMEM;
	p->priv = d;
	err = moe_policy_create("revisit", &inner, &d->real);
	if (!err)
		err = moe_policy_create("revisit", &inner, &d->shadow);
	if (!err)
		err = duel_list_init(&d->lru, p->n_ids);
	if (!err)
		err = duel_list_init(&d->bank, p->n_ids);
	if (err) {
		duel_fini(p);
		return err;
	}
	if (window < DUEL_MIN_WINDOW)
		window = DUEL_MIN_WINDOW;
	d->keep = 1.0 - 1.0 / window;
	return 0;
}

/* The shadow may not evict what its current step already accessed. */
static bool duel_shadow_evictable(void *ctx, uint32_t slot)
{
	const struct duel *d = ctx;
	uint32_t id = d->shadow->slot_id[slot];

	return id != MOE_ID_NONE && d->shadow->last_tick[id] <= d->shadow_tick0;
}

/* One demand access through the shadow revisit, its miss admitted at once. */
static bool duel_shadow_access(struct duel *d, uint32_t layer, uint32_t expert, uint64_t step)
{
	struct moe_policy *s = d->shadow;
	uint32_t id = moe_policy_id(s, layer, expert);
	bool hit = s->id_slot[id] != MOE_ID_NONE;
	int slot;

	if (step != d->shadow_step || !s->tick) {
		d->shadow_step = step;
		d->shadow_tick0 = s->tick;
	}
	moe_policy_access(s, layer, expert, 1, step);
	if (hit)
		return true;
	if (s->n_resident < s->n_slots) {
		/* Slots fill in order and are only ever reused: the first free is n_resident. */
		moe_policy_inserted(s, s->n_resident, layer, expert, false);
		return false;
	}
	slot = moe_policy_victim(s, layer, expert, false, duel_shadow_evictable, d);
	if (slot >= 0) {
		moe_policy_removed(s, (uint32_t)slot);
		moe_policy_inserted(s, (uint32_t)slot, layer, expert, false);
	}
	return false;
}

/* One demand access through the shadow LRU, its miss admitted at once. */
static bool duel_lru_access(struct duel *d, uint32_t id, uint32_t n_slots)
{
	bool hit = d->lru.in[id];

	duel_list_push(&d->lru, id);
	if (d->lru.n > n_slots)
		duel_list_unlink(&d->lru, d->lru.tail);
	return hit;
}

static void duel_access(struct moe_policy *p, uint32_t id, uint32_t count)
{
	struct duel *d = p->priv;
	uint32_t layer = moe_policy_id_layer(p, id), expert = id % p->n_local;
	uint64_t step = p->layer_step[layer];
	bool lru_hit, revisit_hit, follow_lru;

	moe_policy_access(d->real, layer, expert, count, step);
	if (d->bank.in[id])
		duel_list_push(&d->bank, id);
	/* Repeated accesses within one visit are one use, as revisit counts them. */
	if (p->used[id] && p->last_visit[id] == p->layer_visits[layer])
		return;
	lru_hit = duel_lru_access(d, id, p->n_slots);
	revisit_hit = duel_shadow_access(d, layer, expert, step);
	d->hits_lru = d->hits_lru * d->keep + lru_hit;
	d->hits_revisit = d->hits_revisit * d->keep + revisit_hit;
	d->accesses = d->accesses * d->keep + 1.0;
	follow_lru = d->follow_lru ? d->hits_revisit <= d->hits_lru + DUEL_MARGIN * d->accesses
				   : d->hits_lru > d->hits_revisit;
	d->follow_lru = follow_lru;
}

static void duel_inserted(struct moe_policy *p, uint32_t slot, uint32_t id, bool prefetch)
{
	struct duel *d = p->priv;

	moe_policy_inserted(d->real, slot, moe_policy_id_layer(p, id), id % p->n_local, prefetch);
	duel_list_push(&d->bank, id);
}

static void duel_removed(struct moe_policy *p, uint32_t slot, uint32_t id)
{
	struct duel *d = p->priv;

	moe_policy_removed(d->real, slot);
	duel_list_unlink(&d->bank, id);
}

static int duel_victim(struct moe_policy *p, uint32_t id, bool prefetch,
		       bool (*evictable)(void *ctx, uint32_t slot), void *ctx)
{
	struct duel *d = p->priv;

	if (!d->follow_lru)
		return moe_policy_victim(d->real, moe_policy_id_layer(p, id), id % p->n_local,
					 prefetch, evictable, ctx);
	/* Recency is winning: the routing gives no signal to prefetch on either. */
	if (prefetch)
		return -ECANCELED;
	/* The least recently used evictable expert; what may not go is recent or pinned. */
	for (uint32_t v = d->bank.tail; v != MOE_ID_NONE; v = d->bank.prev[v])
		if (evictable(ctx, p->id_slot[v]))
			return (int)p->id_slot[v];
	return -ENOSPC;
}

const struct moe_policy_ops moe_policy_duel_ops = {
    .name = "duel",
    .init = duel_init,
    .fini = duel_fini,
    .access = duel_access,
    .inserted = duel_inserted,
    .removed = duel_removed,
    .victim = duel_victim,
};
