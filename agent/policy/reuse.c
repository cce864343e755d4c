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
 * q = f + r_g * (1 - f) (it comes back if it is popular or because it was
 * used lately); f alone once g is beyond what is measured.
 *
 * reuse measures r_g for g = 1 only (used by the previous token or not);
 * revisit, the default, for g up to REVISIT_GAPS: how fast an expert's
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
};

static int reuse_init_gaps(struct moe_policy *p, uint32_t n_gaps)
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
	if (!r->freq || !r->freq_visit || !r->decay) {
		free(r->freq);
		free(r->freq_visit);
		free(r->decay);
		free(r);
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
	return reuse_init_gaps(p, 1);
}

static int revisit_init(struct moe_policy *p, const struct moe_policy_config *cfg)
{
	return reuse_init_gaps(p, REVISIT_GAPS);
}

static int lookahead_init(struct moe_policy *p, const struct moe_policy_config *cfg)
{
	struct reuse *r;
	int err;

	if (!cfg->future || !cfg->future->next_use)
		return -EINVAL;
	err = reuse_init_gaps(p, REVISIT_GAPS);
	if (err)
		return err;
	r = p->priv;
	r->future = cfg->future;
	r->horizon = cfg->lookahead_steps ? cfg->lookahead_steps : p->n_layers;
	return 0;
}

static void reuse_fini(struct moe_policy *p)
{
	struct reuse *r = p->priv;

	free(r->freq);
	free(r->freq_visit);
	free(r->decay);
	free(r);
}

static double reuse_freq_at(const struct reuse *r, uint32_t id, uint64_t visit)
{
	uint64_t idle = visit - r->freq_visit[id];

	return idle < r->n_decay ? r->freq[id] * r->decay[idle] : 0.0;
}

static void reuse_access(struct moe_policy *p, uint32_t id, uint32_t count)
{
	struct reuse *r = p->priv;
	uint64_t now = p->layer_visits[moe_policy_id_layer(p, id)];
	const double keep = 1.0 - 1.0 / REUSE_LIFT_WINDOW;
	uint64_t gap = p->used[id] ? now - p->last_visit[id] : 0;

	if (p->used[id] && !gap)
		return; /* one use per visit */
	r->uses = r->uses * keep + 1.0;
	for (uint32_t g = 1; g <= r->n_gaps; g++)
		r->again[g] = r->again[g] * keep + (gap == g);
	r->freq[id] = reuse_freq_at(r, id, now) + REUSE_ALPHA;
	r->freq_visit[id] = now;
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
	if (gap <= r->n_gaps && r->uses > 0)
		q = f + (r->again[gap] / r->uses) * (1.0 - f);
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
	uint64_t next = r->future->next_use(r->future, moe_policy_id_layer(p, id),
					    id % p->n_experts, p->step + 1);

	if (next != MOE_FUTURE_NEVER && next - p->step <= r->horizon)
		return (double)(next - p->step);
	return (double)r->horizon + reuse_distance(p, id, arg);
}

static void reuse_inserted(struct moe_policy *p, uint32_t slot, uint32_t id, bool prefetch)
{
}

static void reuse_removed(struct moe_policy *p, uint32_t slot, uint32_t id)
{
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
	int slot = moe_policy_scan(p, reuse_distance, &now, evictable, ctx);

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
    .init = lookahead_init,
    .fini = reuse_fini,
    .access = reuse_access,
    .inserted = reuse_inserted,
    .removed = reuse_removed,
    .victim = lookahead_victim,
};
