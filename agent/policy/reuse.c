// SPDX-License-Identifier: MIT
/*
 * reuse and revisit: evict the expert whose next use is expected furthest
 * away.
 *
 * Layers run in a fixed cycle, so an expert of layer l can next be used only
 * when l runs again: d steps from now (1 for the next layer, n_layers for
 * the layer now running). Whether it is used then is a coin with probability
 * q. Counting each later visit of its layer as another toss, the expected
 * distance to its next use is
 *
 *	T = d + n_layers * (1 - q) / q
 *
 * and the victim is the evictable expert with the largest T.
 *
 * q comes from two estimates, both learned online:
 *   f    the expert's popularity: an EMA, over its layer's visits, of "was it
 *        used in this visit";
 *   r_g  the share of uses whose expert is used again exactly g visits of
 *        its layer later (and not before), measured over all experts; r_1
 *        is the chance that a use is followed by one at the next visit.
 * An expert whose latest use is g visits before its layer's next visit gets
 * q = f + h_g * (1 - f) (it comes back if it is popular or because it was
 * used lately), where h_g = r_g / (1 - r_1 - ... - r_{g-1}) is the chance
 * of a return at gap g for a use not followed by one at gaps 1 .. g-1,
 * which is what such an expert is; f alone once g is beyond what is
 * measured.
 *
 * reuse measures r_g for g = 1 only (used by the previous token or not);
 * revisit (the ranking of the default, duel.c) for g up to REVISIT_GAPS: how fast an expert's
 * chance of return fades with the tokens since its use differs between
 * models (the expert sets of a few tokens back return well above chance on
 * some, barely on others), and the measured rates follow that.
 *
 * lookahead is revisit with an oracle: it knows exactly which experts the
 * next few tokens use and keeps those by their true next use, ranking the
 * rest as revisit does. It is for simulation, to measure what a perfect
 * next-token predictor would be worth (docs/policy.md).
 *
 * Recency alone (LRU) evicts the expert whose layer runs next, the wrong one
 * when a token touches more experts than there are slots; frequency alone
 * keeps what was hot long ago. docs/policy.md has the figures.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "policy_impl.h"

#define REUSE_ALPHA 0.05	 /* EMA weight of one visit: half-life about 14 visits */
#define REUSE_LIFT_WINDOW 1000.0 /* uses over which r is measured (exponential window) */
#define REUSE_Q_MIN 1e-4	 /* floor for q: a never-seen expert is not infinitely far */
#define REVISIT_GAPS 8		 /* revisit measures r_g for g = 1 .. REVISIT_GAPS */

/*
 * The victim without a scan of the bank (reuse and revisit). Within one
 * layer every expert shares d, so the layer's best victim is its expert
 * with the smallest q (then the least recently used, then the lowest
 * slot, as moe_policy_scan breaks ties), and the victim is the best of the
 * n_layers layers' bests. A layer's resident experts are in one of three
 * places:
 *   recent  used in the layer's last n_gaps visits: q depends on the
 *           measured r_g, which move with every access; at most n_gaps
 *           visits' worth of experts, scanned;
 *   live    used before that, q = f > REUSE_Q_MIN: f decays by the same
 *           factor for every expert of the layer, so their order by f
 *           never changes: a min-heap by f;
 *   floor   q = REUSE_Q_MIN (f decayed below it, or never used): ties,
 *           broken by recency: a min-heap by the latest access.
 * An expert moves recent -> live when its layer's visits pass it, live ->
 * floor when the top of the heap decays below REUSE_Q_MIN, and back to
 * recent when accessed. A victim costs O(n_layers x (n_gaps x top-k +
 * log n_slots)), independent of the bank's size.
 */
enum reuse_place {
	REUSE_NOWHERE = 0, /* not resident, or resident and recent */
	REUSE_LIVE = 1,
	REUSE_FLOOR = 2,
};

struct reuse_heap {
	uint32_t *ids;
	uint32_t n;
};

struct reuse {
	double *freq; /* id -> EMA as of freq_visit */
	uint64_t *freq_visit;
	double *decay; /* decay[k] = (1 - REUSE_ALPHA)^k for k < n_decay */
	uint32_t n_decay;
	uint32_t n_gaps; /* r_g is measured for g = 1 .. n_gaps */
	/* again[g]: decayed count of uses g visits after the expert's previous use */
	double again[REVISIT_GAPS + 1];
	double uses; /* decayed count of uses (each one a chance of a later "again") */
	/* lookahead only */
	const struct moe_future *future;
	uint64_t horizon; /* steps it sees ahead */
	/* the indexed victim (not for lookahead, which scans) */
	bool indexed;
	uint32_t *recent_next, *recent_prev; /* id -> neighbours in its recent list */
	uint32_t *recent_head;		 /* layer x n_gaps: ids last used at visit v, v % n_gaps */
	bool *recent;			 /* id -> in a recent list */
	uint64_t *seen_visit;		 /* layer -> visits accounted for */
	struct reuse_heap *live, *floor; /* per layer */
	uint32_t *heap_pos;		 /* id -> index in its heap */
	uint8_t *place;			 /* id -> enum reuse_place */
	uint32_t *stash;		 /* n_local: heap tops that may not be taken */
};

static void reuse_free(struct reuse *r)
{
	if (!r)
		return;
	free(r->freq);
	free(r->freq_visit);
	free(r->decay);
	free(r->recent_next);
	free(r->recent_prev);
	free(r->recent_head);
	free(r->recent);
	free(r->seen_visit);
	free(r->heap_pos);
	free(r->place);
	free(r->stash);
	free(r->live ? r->live[0].ids : NULL);
	free(r->floor ? r->floor[0].ids : NULL);
	free(r->live);
	free(r->floor);
	free(r);
}

/* The structures of the indexed victim: O(n_ids) in all. */
static int reuse_index_init(struct moe_policy *p, struct reuse *r)
{
	uint32_t *live_ids, *floor_ids;

	r->indexed = true;
	r->recent_next = malloc(sizeof(*r->recent_next) * p->n_ids);
	r->recent_prev = malloc(sizeof(*r->recent_prev) * p->n_ids);
	r->recent_head = malloc(sizeof(*r->recent_head) * p->n_layers * r->n_gaps);
	r->recent = calloc(p->n_ids, sizeof(*r->recent));
	r->seen_visit = calloc(p->n_layers, sizeof(*r->seen_visit));
	r->heap_pos = calloc(p->n_ids, sizeof(*r->heap_pos));
	r->place = calloc(p->n_ids, sizeof(*r->place));
	r->stash = malloc(sizeof(*r->stash) * p->n_local);
	r->live = calloc(p->n_layers, sizeof(*r->live));
	r->floor = calloc(p->n_layers, sizeof(*r->floor));
	live_ids = malloc(sizeof(*live_ids) * p->n_ids);
	floor_ids = malloc(sizeof(*floor_ids) * p->n_ids);
	if (r->live)
		r->live[0].ids = live_ids;
	else
		free(live_ids);
	if (r->floor)
		r->floor[0].ids = floor_ids;
	else
		free(floor_ids);
	if (!r->recent_next || !r->recent_prev || !r->recent_head || !r->recent || !r->seen_visit ||
	    !r->heap_pos || !r->place || !r->stash || !r->live || !r->floor || !live_ids ||
	    !floor_ids)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->n_layers * r->n_gaps; i++)
		r->recent_head[i] = MOE_ID_NONE;
	/* Each layer's heaps hold at most its n_local ids. */
	for (uint32_t l = 0; l < p->n_layers; l++) {
		r->live[l].ids = live_ids + (size_t)l * p->n_local;
		r->floor[l].ids = floor_ids + (size_t)l * p->n_local;
	}
	return 0;
}

static int reuse_init_gaps(struct moe_policy *p, uint32_t n_gaps, bool indexed)
{
	struct reuse *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->n_gaps = n_gaps;
	/* Beyond this many idle visits the EMA is below 1e-9: treat it as 0. */
	r->n_decay = (uint32_t)ceil(log(1e-9) / log(1.0 - REUSE_ALPHA));
	r->freq = calloc(p->n_ids, sizeof(*r->freq));
	r->freq_visit = calloc(p->n_ids, sizeof(*r->freq_visit));
	r->decay = malloc(sizeof(*r->decay) * r->n_decay);
	if (!r->freq || !r->freq_visit || !r->decay || (indexed && reuse_index_init(p, r))) {
		reuse_free(r);
		return -ENOMEM;
	}
	r->decay[0] = 1.0;
	for (uint32_t k = 1; k < r->n_decay; k++)
		r->decay[k] = r->decay[k - 1] * (1.0 - REUSE_ALPHA);
	p->priv = r;
	return 0;
}

static int reuse_init(struct moe_policy *p, const struct moe_policy_config *cfg)
{
	return reuse_init_gaps(p, 1, true);
}

static int revisit_init(struct moe_policy *p, const struct moe_policy_config *cfg)
{
	return reuse_init_gaps(p, REVISIT_GAPS, true);
}

static int lookahead_init(struct moe_policy *p, const struct moe_policy_config *cfg)
{
	struct reuse *r;
	int err;

	if (!cfg->future || !cfg->future->next_use)
		return -EINVAL;
	err = reuse_init_gaps(p, REVISIT_GAPS, false);
	if (err)
		return err;
	r = p->priv;
	r->future = cfg->future;
	r->horizon = cfg->lookahead_steps ? cfg->lookahead_steps : p->n_layers;
	return 0;
}

static void reuse_fini(struct moe_policy *p)
{
	reuse_free(p->priv);
}

static double reuse_freq_at(const struct reuse *r, uint32_t id, uint64_t visit)
{
	uint64_t idle = visit - r->freq_visit[id];

	return idle < r->n_decay ? r->freq[id] * r->decay[idle] : 0.0;
}

/* Whether a comes before b as a victim in layer l's heap of kind (smaller q, older, lower slot). */
static bool reuse_heap_before(const struct moe_policy *p, const struct reuse *r,
			      enum reuse_place kind, uint32_t a, uint32_t b)
{
	if (kind == REUSE_LIVE) {
		uint64_t now = p->layer_visits[moe_policy_id_layer(p, a)];
		double fa = reuse_freq_at(r, a, now), fb = reuse_freq_at(r, b, now);

		if (fa != fb)
			return fa < fb;
	}
	if (p->last_tick[a] != p->last_tick[b])
		return p->last_tick[a] < p->last_tick[b];
	return p->id_slot[a] < p->id_slot[b];
}

static struct reuse_heap *reuse_heap_of(struct reuse *r, enum reuse_place kind, uint32_t layer)
{
	return kind == REUSE_LIVE ? &r->live[layer] : &r->floor[layer];
}

static void reuse_heap_set(struct reuse *r, struct reuse_heap *h, uint32_t i, uint32_t id)
{
	h->ids[i] = id;
	r->heap_pos[id] = i;
}

static void reuse_heap_sift(const struct moe_policy *p, struct reuse *r, enum reuse_place kind,
			    struct reuse_heap *h, uint32_t i)
{
	uint32_t id = h->ids[i];

	while (i > 0 && reuse_heap_before(p, r, kind, id, h->ids[(i - 1) / 2])) {
		reuse_heap_set(r, h, i, h->ids[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && reuse_heap_before(p, r, kind, h->ids[c + 1], h->ids[c]))
			c++;
		if (!reuse_heap_before(p, r, kind, h->ids[c], id))
			break;
		reuse_heap_set(r, h, i, h->ids[c]);
		i = c;
	}
	reuse_heap_set(r, h, i, id);
}

static void reuse_heap_push(const struct moe_policy *p, struct reuse *r, enum reuse_place kind,
			    uint32_t id)
{
	struct reuse_heap *h = reuse_heap_of(r, kind, moe_policy_id_layer(p, id));

	r->place[id] = kind;
	reuse_heap_set(r, h, h->n++, id);
	reuse_heap_sift(p, r, kind, h, h->n - 1);
}

static void reuse_heap_remove(const struct moe_policy *p, struct reuse *r, uint32_t id)
{
	enum reuse_place kind = r->place[id];
	struct reuse_heap *h;
	uint32_t i, last;

	if (kind == REUSE_NOWHERE)
		return;
	h = reuse_heap_of(r, kind, moe_policy_id_layer(p, id));
	i = r->heap_pos[id];
	last = h->ids[--h->n];
	r->place[id] = REUSE_NOWHERE;
	if (i < h->n) {
		reuse_heap_set(r, h, i, last);
		reuse_heap_sift(p, r, kind, h, i);
	}
}

/* A resident expert that is not recent goes to the heap its q says. */
static void reuse_place(const struct moe_policy *p, struct reuse *r, uint32_t id)
{
	uint64_t now = p->layer_visits[moe_policy_id_layer(p, id)];

	if (r->recent[id] || r->place[id] != REUSE_NOWHERE)
		return;
	if (p->used[id] && reuse_freq_at(r, id, now) > REUSE_Q_MIN)
		reuse_heap_push(p, r, REUSE_LIVE, id);
	else
		reuse_heap_push(p, r, REUSE_FLOOR, id);
}

static void reuse_recent_unlink(const struct moe_policy *p, struct reuse *r, uint32_t id)
{
	uint32_t *head = &r->recent_head[moe_policy_id_layer(p, id) * r->n_gaps +
					 (uint32_t)(p->last_visit[id] % r->n_gaps)];

	if (r->recent_prev[id] != MOE_ID_NONE)
		r->recent_next[r->recent_prev[id]] = r->recent_next[id];
	else
		*head = r->recent_next[id];
	if (r->recent_next[id] != MOE_ID_NONE)
		r->recent_prev[r->recent_next[id]] = r->recent_prev[id];
	r->recent[id] = false;
}

/*
 * Layer reached visit now: the experts last used n_gaps visits before it
 * are no longer recent.
 */
static void reuse_layer_visit(const struct moe_policy *p, struct reuse *r, uint32_t layer,
			      uint64_t now)
{
	while (r->seen_visit[layer] < now) {
		uint64_t v = ++r->seen_visit[layer];
		uint32_t *head = &r->recent_head[layer * r->n_gaps + (uint32_t)(v % r->n_gaps)];
		uint32_t id = *head;

		*head = MOE_ID_NONE;
		while (id != MOE_ID_NONE) {
			uint32_t next = r->recent_next[id];

			r->recent[id] = false;
			if (p->id_slot[id] != MOE_ID_NONE)
				reuse_place(p, r, id);
			id = next;
		}
	}
}

/* id is accessed at its layer's visit now: it becomes recent. */
static void reuse_index_access(const struct moe_policy *p, struct reuse *r, uint32_t id)
{
	uint32_t layer = moe_policy_id_layer(p, id);
	uint64_t now = p->layer_visits[layer];
	uint32_t *head = &r->recent_head[layer * r->n_gaps + (uint32_t)(now % r->n_gaps)];

	reuse_layer_visit(p, r, layer, now);
	reuse_heap_remove(p, r, id);
	if (r->recent[id])
		reuse_recent_unlink(p, r, id); /* last_visit still says where it is */
	r->recent[id] = true;
	r->recent_prev[id] = MOE_ID_NONE;
	r->recent_next[id] = *head;
	if (*head != MOE_ID_NONE)
		r->recent_prev[*head] = id;
	*head = id;
}

static void reuse_access(struct moe_policy *p, uint32_t id, uint32_t count)
{
	struct reuse *r = p->priv;
	uint64_t now = p->layer_visits[moe_policy_id_layer(p, id)];
	const double keep = 1.0 - 1.0 / REUSE_LIFT_WINDOW;
	uint64_t gap = p->used[id] ? now - p->last_visit[id] : 0;

	if (r->indexed)
		reuse_index_access(p, r, id);
	if (p->used[id] && !gap)
		return; /* one use per visit */
	r->uses = r->uses * keep + 1.0;
	for (uint32_t g = 1; g <= r->n_gaps; g++)
		r->again[g] = r->again[g] * keep + (gap == g);
	r->freq[id] = reuse_freq_at(r, id, now) + REUSE_ALPHA;
	r->freq_visit[id] = now;
}

/*
 * Of the uses whose expert has not been used again within g - 1 visits of
 * its layer, the share used again at visit g: r_g / (1 - r_1 - ... - r_{g-1}),
 * the chance of return of an expert last used g visits ago and not since.
 */
static double reuse_hazard(const struct reuse *r, uint64_t g)
{
	double left = r->uses;

	if (g > r->n_gaps || r->uses <= 0)
		return 0.0;
	for (uint64_t k = 1; k < g; k++)
		left -= r->again[k];
	if (left <= 0)
		return 0.0;
	return r->again[g] >= left ? 1.0 : r->again[g] / left;
}

/* Probability that id is used at its layer's next visit. */
static double reuse_q(const struct moe_policy *p, const struct reuse *r, uint32_t id)
{
	uint64_t gap;
	double f, q;

	if (!p->used[id])
		return REUSE_Q_MIN;
	f = reuse_freq_at(r, id, p->layer_visits[moe_policy_id_layer(p, id)]);
	q = f;
	gap = moe_policy_next_gap(p, id);
	if (gap <= r->n_gaps)
		q = f + reuse_hazard(r, gap) * (1.0 - f);
	if (q < REUSE_Q_MIN)
		q = REUSE_Q_MIN;
	return q > 1.0 ? 1.0 : q;
}

/* arg: the layer running now. */
static double reuse_distance(struct moe_policy *p, uint32_t id, void *arg)
{
	const struct reuse *r = p->priv;
	double q = reuse_q(p, r, id);

	return moe_policy_layer_distance(p, id, *(const uint32_t *)arg) +
	       p->n_layers * (1.0 - q) / q;
}

/* arg: the layer running now. Known uses first, by their true distance. */
static double lookahead_distance(struct moe_policy *p, uint32_t id, void *arg)
{
	const struct reuse *r = p->priv;
	uint64_t next = r->future->next_use(r->future, moe_policy_id_layer(p, id), id % p->n_local,
					    p->step + 1);

	if (next != MOE_FUTURE_NEVER && next - p->step <= r->horizon)
		return (double)(next - p->step);
	return (double)r->horizon + reuse_distance(p, id, arg);
}

static void reuse_inserted(struct moe_policy *p, uint32_t slot, uint32_t id, bool prefetch)
{
	struct reuse *r = p->priv;

	if (r->indexed)
		reuse_place(p, r, id);
}

static void reuse_removed(struct moe_policy *p, uint32_t slot, uint32_t id)
{
	struct reuse *r = p->priv;

	if (r->indexed)
		reuse_heap_remove(p, r, id);
}

/* The victim order of moe_policy_scan: larger score, then older, then lower slot. */
static bool reuse_better(const struct moe_policy *p, double s, uint32_t id, double best_s,
			 uint32_t best)
{
	if (best == MOE_ID_NONE || s > best_s)
		return true;
	if (s < best_s)
		return false;
	if (p->last_tick[id] != p->last_tick[best])
		return p->last_tick[id] < p->last_tick[best];
	return p->id_slot[id] < p->id_slot[best];
}

/* The first evictable expert of a heap, in heap order; the skipped ones are put back. */
static uint32_t reuse_heap_first(struct moe_policy *p, struct reuse *r, enum reuse_place kind,
				 uint32_t layer, bool (*evictable)(void *ctx, uint32_t slot),
				 void *ctx)
{
	struct reuse_heap *h = reuse_heap_of(r, kind, layer);
	uint32_t n = 0, found = MOE_ID_NONE, *stash = r->stash;

	while (h->n) {
		uint32_t id = h->ids[0];

		if (evictable(ctx, p->id_slot[id])) {
			found = id;
			break;
		}
		reuse_heap_remove(p, r, id);
		stash[n++] = id;
	}
	while (n--)
		reuse_heap_push(p, r, kind, stash[n]);
	return found;
}

/*
 * The slot moe_policy_scan(p, reuse_distance, &now, ...) would return,
 * without scanning the bank (see the top of this file).
 */
static int reuse_indexed_victim(struct moe_policy *p, struct reuse *r, uint32_t now,
				bool (*evictable)(void *ctx, uint32_t slot), void *ctx)
{
	uint32_t best = MOE_ID_NONE;
	double best_s = 0;

	for (uint32_t l = 0; l < p->n_layers; l++) {
		struct reuse_heap *live = &r->live[l];
		uint32_t cand[2];

		reuse_layer_visit(p, r, l, p->layer_visits[l]);
		/* The live heap's least popular have decayed to the floor. */
		while (live->n &&
		       reuse_freq_at(r, live->ids[0], p->layer_visits[l]) <= REUSE_Q_MIN) {
			uint32_t id = live->ids[0];

			reuse_heap_remove(p, r, id);
			reuse_heap_push(p, r, REUSE_FLOOR, id);
		}
		cand[0] = reuse_heap_first(p, r, REUSE_LIVE, l, evictable, ctx);
		cand[1] = reuse_heap_first(p, r, REUSE_FLOOR, l, evictable, ctx);
		for (unsigned int i = 0; i < 2; i++) {
			double sc;

			if (cand[i] == MOE_ID_NONE)
				continue;
			sc = reuse_distance(p, cand[i], &now);
			if (reuse_better(p, sc, cand[i], best_s, best)) {
				best = cand[i];
				best_s = sc;
			}
		}
		for (uint32_t g = 0; g < r->n_gaps; g++) {
			for (uint32_t id = r->recent_head[l * r->n_gaps + g]; id != MOE_ID_NONE;
			     id = r->recent_next[id]) {
				double sc;

				if (p->id_slot[id] == MOE_ID_NONE ||
				    !evictable(ctx, p->id_slot[id]))
					continue;
				sc = reuse_distance(p, id, &now);
				if (reuse_better(p, sc, id, best_s, best)) {
					best = id;
					best_s = sc;
				}
			}
		}
	}
	return best == MOE_ID_NONE ? -ENOSPC : (int)p->id_slot[best];
}

static int reuse_victim(struct moe_policy *p, uint32_t id, bool prefetch,
			bool (*evictable)(void *ctx, uint32_t slot), void *ctx)
{
	/*
	 * A demand miss is for the layer running now; a prefetch is for the
	 * layer after it. Taking the layer from the request, not from the
	 * latest access, keeps the distance right when accesses arrive batched.
	 */
	uint32_t layer = moe_policy_id_layer(p, id);
	uint32_t now = prefetch ? (layer + p->n_layers - 1) % p->n_layers : layer;
	int slot = reuse_indexed_victim(p, p->priv, now, evictable, ctx);

	/*
	 * A predicted expert is taken as a coin flip for the next layer
	 * (T = 1 + n_layers); evicting something expected back sooner than that
	 * would cost more than the prefetch can save.
	 */
	if (slot >= 0 && prefetch && reuse_distance(p, p->slot_id[slot], &now) <= 1.0 + p->n_layers)
		return -ECANCELED;
	return slot;
}

static int lookahead_victim(struct moe_policy *p, uint32_t id, bool prefetch,
			    bool (*evictable)(void *ctx, uint32_t slot), void *ctx)
{
	uint32_t layer = moe_policy_id_layer(p, id);
	uint32_t now = prefetch ? (layer + p->n_layers - 1) % p->n_layers : layer;
	int slot = moe_policy_scan(p, lookahead_distance, &now, evictable, ctx);

	/* As belady: a prefetch only of something needed before the victim. */
	if (slot >= 0 && prefetch &&
	    lookahead_distance(p, p->slot_id[slot], &now) <= lookahead_distance(p, id, &now))
		return -ECANCELED;
	return slot;
}

const struct moe_policy_ops moe_policy_reuse_ops = {
    .name = "reuse",
    .init = reuse_init,
    .fini = reuse_fini,
    .access = reuse_access,
    .inserted = reuse_inserted,
    .removed = reuse_removed,
    .victim = reuse_victim,
};

const struct moe_policy_ops moe_policy_revisit_ops = {
    .name = "revisit",
    .init = revisit_init,
    .fini = reuse_fini,
    .access = reuse_access,
    .inserted = reuse_inserted,
    .removed = reuse_removed,
    .victim = reuse_victim,
};

const struct moe_policy_ops moe_policy_lookahead_ops = {
    .name = "lookahead",
    .reads_future = true,
    .init = lookahead_init,
    .fini = reuse_fini,
    .access = reuse_access,
    .inserted = reuse_inserted,
    .removed = reuse_removed,
    .victim = lookahead_victim,
};
