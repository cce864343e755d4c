// SPDX-License-Identifier: MIT
/* The trace-driven cache simulator (see sim.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hint.h"
#include "sim.h"

#define SIM_NONE UINT32_MAX

struct sim;

struct sim_cache {
	struct sim *sim;
	struct moe_policy *policy;
	uint32_t layer; /* per-layer caches: the layer; else 0 */
	uint32_t n_slots;
	uint32_t *owner; /* slot -> global id or SIM_NONE */
	uint32_t n_used; /* slots [0, n_used) are occupied: nothing here frees a slot */
	struct moe_future future;
	bool prefetching; /* victim request on behalf of a prefetch */
};

/* Accesses of one global id, as steps, for belady's oracle. */
struct sim_future {
	uint32_t *first; /* id -> index into steps; first[n_ids] = total */
	uint64_t *steps;
};

struct sim {
	const struct moe_trace_view *view;
	uint32_t n_layers, n_experts, n_ids;
	bool per_layer;
	struct sim_cache *caches;
	uint32_t n_caches;
	uint32_t *id_slot;    /* global id -> slot in its cache */
	uint64_t *need_stamp; /* global id -> step + 1 when the step needs it */
	uint64_t *pf_stamp;   /* global id -> step + 1 when prefetched in that step */
	bool *pf_pending;     /* prefetched and not used yet */
	uint64_t stamp;
	struct sim_future fut;
	struct moe_sim_result *res;
	struct moe_timing *tm; /* NULL: no time model */
	uint64_t hint_rng;
};

int moe_sim_slots_for(const struct moe_trace *t, double fraction, uint32_t *out)
{
	double n;

	if (!t || !out || !(fraction > 0.0 && fraction <= 1.0))
		return -EINVAL;
	n = fraction * t->n_layers * t->n_experts;
	/* Guard against 0.1 * 1024 = 102.39999... style rounding below the intended floor. */
	*out = (uint32_t)(n + 1e-9);
	if (!*out)
		*out = 1;
	return 0;
}

int moe_sim_profile_from(const struct moe_trace_view *v, struct moe_profile *out)
{
	const struct moe_trace *t;
	uint32_t n_ids, *ids, n = 0;
	double *count;

	if (!v || !v->trace || !out)
		return -EINVAL;
	out->n = 0;
	out->ranked = NULL;
	t = v->trace;
	n_ids = t->n_layers * t->n_experts;
	count = calloc(n_ids, sizeof(*count));
	ids = malloc(sizeof(*ids) * n_ids);
	out->ranked = malloc(sizeof(*out->ranked) * n_ids);
	if (!count || !ids || !out->ranked) {
		free(count);
		free(ids);
		moe_profile_free(out);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < v->n; i++) {
		for (uint32_t l = 0; l < t->n_layers; l++) {
			uint32_t k;
			const uint32_t *sel = moe_trace_layer(v->tokens[i], l, &k);

			for (uint32_t j = 0; j < k; j++)
				count[l * t->n_experts + sel[j]] += 1;
		}
	}
	for (uint32_t id = 0; id < n_ids; id++)
		if (count[id] > 0)
			ids[n++] = id;
	/* Stable order for equal counts: by id. */
	for (uint32_t i = 1; i < n; i++) {
		uint32_t x = ids[i], j = i;

		while (j > 0 && (count[ids[j - 1]] < count[x] ||
				 (count[ids[j - 1]] == count[x] && ids[j - 1] > x))) {
			ids[j] = ids[j - 1];
			j--;
		}
		ids[j] = x;
	}
	for (uint32_t i = 0; i < n; i++) {
		out->ranked[i].layer = ids[i] / t->n_experts;
		out->ranked[i].expert = ids[i] % t->n_experts;
	}
	out->n = n;
	free(count);
	free(ids);
	return 0;
}

static int sim_build_future(struct sim *s)
{
	const struct moe_trace_view *v = s->view;
	uint64_t total = 0;
	uint32_t *fill;

	s->fut.first = calloc((size_t)s->n_ids + 1, sizeof(*s->fut.first));
	fill = calloc(s->n_ids, sizeof(*fill));
	if (!s->fut.first || !fill) {
		free(fill);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < v->n; i++) {
		for (uint32_t l = 0; l < s->n_layers; l++) {
			uint32_t k;
			const uint32_t *sel = moe_trace_layer(v->tokens[i], l, &k);

			for (uint32_t j = 0; j < k; j++)
				s->fut.first[l * s->n_experts + sel[j] + 1]++;
			total += k;
		}
	}
	for (uint32_t id = 0; id < s->n_ids; id++)
		s->fut.first[id + 1] += s->fut.first[id];
	s->fut.steps = malloc(sizeof(*s->fut.steps) * (total ? total : 1));
	if (!s->fut.steps) {
		free(fill);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < v->n; i++) {
		for (uint32_t l = 0; l < s->n_layers; l++) {
			uint32_t k;
			const uint32_t *sel = moe_trace_layer(v->tokens[i], l, &k);

			for (uint32_t j = 0; j < k; j++) {
				uint32_t id = l * s->n_experts + sel[j];

				s->fut.steps[s->fut.first[id] + fill[id]++] =
				    (uint64_t)i * s->n_layers + l;
			}
		}
	}
	free(fill);
	return 0;
}

static uint64_t sim_next_use(const struct moe_future *f, uint32_t layer, uint32_t expert,
			     uint64_t from)
{
	const struct sim_cache *c = f->ctx;
	const struct sim *s = c->sim;
	uint32_t id = (s->per_layer ? c->layer : layer) * s->n_experts + expert;
	uint32_t lo = s->fut.first[id], hi = s->fut.first[id + 1];

	/* First recorded step >= from (steps of one id are increasing). */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (s->fut.steps[mid] < from)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->fut.first[id + 1] ? s->fut.steps[lo] : MOE_FUTURE_NEVER;
}

static bool sim_evictable(void *ctx, uint32_t slot)
{
	struct sim_cache *c = ctx;
	struct sim *s = c->sim;
	uint32_t id;

	if (slot >= c->n_slots)
		return false;
	id = c->owner[slot];
	if (id == SIM_NONE || s->need_stamp[id] == s->stamp)
		return false;
	/* A prefetch must not undo another prefetch of the same step. */
	return !(c->prefetching && s->pf_stamp[id] == s->stamp);
}

static struct sim_cache *sim_cache_of(struct sim *s, uint32_t layer)
{
	return &s->caches[s->per_layer ? layer : 0];
}

/* Brings id into its cache. Returns 0 (filled, refused or bypassed) or -EPROTO. */
static int sim_fill(struct sim *s, uint32_t id, bool prefetch)
{
	uint32_t layer = id / s->n_experts, expert = id % s->n_experts;
	struct sim_cache *c = sim_cache_of(s, layer);
	uint32_t plocal = s->per_layer ? 0 : layer;
	uint32_t slot, old;

	if (c->n_used < c->n_slots) {
		slot = c->n_used++;
	} else {
		int v;

		c->prefetching = prefetch;
		v = moe_policy_victim(c->policy, plocal, expert, prefetch, sim_evictable, c);
		c->prefetching = false;
		if (v == -ECANCELED && prefetch) {
			s->res->prefetch_refused++;
			return 0;
		}
		if (v == -ENOSPC) {
			if (prefetch)
				s->res->prefetch_refused++;
			else
				s->res->bypassed++;
			return 0;
		}
		c->prefetching = prefetch;
		if (v < 0 || !sim_evictable(c, (uint32_t)v)) {
			c->prefetching = false;
			return -EPROTO;
		}
		c->prefetching = false;
		slot = (uint32_t)v;
		old = c->owner[slot];

		if (s->pf_pending[old]) {
			s->pf_pending[old] = false;
			s->res->prefetch_wasted++;
		}
		moe_policy_removed(c->policy, slot);
		if (s->tm)
			moe_timing_evicted(s->tm, old);
		s->id_slot[old] = SIM_NONE;
		s->res->evictions++;
	}
	c->owner[slot] = id;
	s->id_slot[id] = slot;
	moe_policy_inserted(c->policy, slot, plocal, expert, prefetch);
	if (s->tm)
		moe_timing_filled(s->tm, id, prefetch);
	if (prefetch) {
		s->pf_pending[id] = true;
		s->pf_stamp[id] = s->stamp;
		s->res->prefetch_issued++;
	}
	return 0;
}

static void sim_free(struct sim *s)
{
	for (uint32_t i = 0; s->caches && i < s->n_caches; i++) {
		moe_policy_destroy(s->caches[i].policy);
		free(s->caches[i].owner);
	}
	free(s->caches);
	free(s->id_slot);
	free(s->need_stamp);
	free(s->pf_stamp);
	free(s->pf_pending);
	free(s->fut.first);
	free(s->fut.steps);
	moe_timing_destroy(s->tm);
}

static int sim_setup(struct sim *s, const struct moe_sim_config *cfg,
		     const struct moe_profile *profile)
{
	const struct moe_trace *t = s->view->trace;
	bool oracle;
	int err;

	s->n_layers = t->n_layers;
	s->n_experts = t->n_experts;
	s->n_ids = t->n_layers * t->n_experts;
	s->per_layer = cfg->per_layer;
	s->n_caches = cfg->per_layer ? t->n_layers : 1;
	s->caches = calloc(s->n_caches, sizeof(*s->caches));
	s->id_slot = malloc(sizeof(*s->id_slot) * s->n_ids);
	s->need_stamp = calloc(s->n_ids, sizeof(*s->need_stamp));
	s->pf_stamp = calloc(s->n_ids, sizeof(*s->pf_stamp));
	s->pf_pending = calloc(s->n_ids, sizeof(*s->pf_pending));
	if (!s->caches || !s->id_slot || !s->need_stamp || !s->pf_stamp || !s->pf_pending)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->n_ids; i++)
		s->id_slot[i] = SIM_NONE;
	/* The policies that read the future. */
	oracle =
	    cfg->policy && (!strcmp(cfg->policy, "belady") || !strcmp(cfg->policy, "lookahead"));
	if (oracle) {
		err = sim_build_future(s);
		if (err)
			return err;
	}
	for (uint32_t i = 0; i < s->n_caches; i++) {
		struct sim_cache *c = &s->caches[i];
		struct moe_profile sub = {0};
		struct moe_policy_config pc = {
		    .n_layers = cfg->per_layer ? 1 : t->n_layers,
		    .n_experts = t->n_experts,
		    .profile = profile,
		};

		c->sim = s;
		c->layer = cfg->per_layer ? i : 0;
		/* Split evenly; the first layers take the remainder. */
		c->n_slots = cfg->per_layer
				 ? cfg->n_slots / t->n_layers + (i < cfg->n_slots % t->n_layers)
				 : cfg->n_slots;
		c->owner = malloc(sizeof(*c->owner) * c->n_slots);
		if (!c->owner)
			return -ENOMEM;
		for (uint32_t j = 0; j < c->n_slots; j++)
			c->owner[j] = SIM_NONE;
		c->future.next_use = sim_next_use;
		c->future.ctx = c;
		pc.n_slots = c->n_slots;
		pc.future = oracle ? &c->future : NULL;
		/* Steps are one per layer per token, whatever the cache's share. */
		pc.lookahead_steps = (uint64_t)(cfg->lookahead ? cfg->lookahead : 1) * t->n_layers;
		/* Per-layer caches get the profile's entries for their own layer only. */
		if (cfg->per_layer && profile) {
			sub.ranked = malloc(sizeof(*sub.ranked) * (profile->n ? profile->n : 1));
			if (!sub.ranked)
				return -ENOMEM;
			for (uint32_t j = 0; j < profile->n; j++) {
				if (profile->ranked[j].layer != i)
					continue;
				sub.ranked[sub.n].layer = 0;
				sub.ranked[sub.n++].expert = profile->ranked[j].expert;
			}
			pc.profile = &sub;
		}
		err = moe_policy_create(cfg->policy, &pc, &c->policy);
		moe_profile_free(&sub);
		if (err)
			return err;
	}
	return 0;
}

int moe_sim_run(const struct moe_trace_view *v, const struct moe_sim_config *cfg,
		struct moe_sim_result *out)
{
	struct sim s = {.view = v, .res = out};
	struct moe_predictor *pred = NULL;
	struct moe_profile own = {0};
	const struct moe_profile *profile;
	const struct moe_trace *t;
	uint32_t *guess = NULL, *step_ids = NULL;
	bool *resident = NULL;
	int err;

	if (!v || !v->trace || !cfg || !out || !cfg->n_slots)
		return -EINVAL;
	t = v->trace;
	if (cfg->per_layer && cfg->n_slots < t->n_layers)
		return -EINVAL;
	if (!(cfg->hint_accuracy >= 0.0 && cfg->hint_accuracy <= 1.0))
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	profile = cfg->profile;
	if (!profile && cfg->policy && !strcmp(cfg->policy, "static")) {
		err = moe_sim_profile_from(v, &own);
		if (err)
			return err;
		profile = &own;
	}
	err = sim_setup(&s, cfg, profile);
	if (!err && cfg->prefetch) {
		if (!cfg->hint_accuracy)
			err = moe_predictor_create(t->n_layers, t->n_experts, &pred);
		guess = malloc(sizeof(*guess) * t->n_experts);
		if (!err && !guess)
			err = -ENOMEM;
		s.hint_rng = 0x9e3779b97f4a7c15ULL;
	}
	if (!err && cfg->timing) {
		err = moe_timing_create(cfg->timing, t->n_layers, s.n_ids, &s.tm);
		step_ids = malloc(sizeof(*step_ids) * (t->top_k ? t->top_k : 1));
		resident = malloc(sizeof(*resident) * (t->top_k ? t->top_k : 1));
		if (!err && (!step_ids || !resident))
			err = -ENOMEM;
		out->timed = !err;
	}
	if (err)
		goto out;
	out->policy = moe_policy_name(s.caches[0].policy);
	out->slots = cfg->n_slots;
	out->n_layers = t->n_layers;
	out->n_experts = t->n_experts;
	out->tokens = v->n;

	for (uint32_t i = 0; i < v->n; i++) {
		for (uint32_t l = 0; l < t->n_layers; l++) {
			uint64_t step = (uint64_t)i * t->n_layers + l;
			struct sim_cache *c = sim_cache_of(&s, l);
			uint32_t plocal = s.per_layer ? 0 : l;
			uint32_t k;
			const uint32_t *sel = moe_trace_layer(v->tokens[i], l, &k);
			int n;

			s.stamp = step + 1;
			out->steps++;
			if (s.tm)
				moe_timing_step_begin(s.tm);
			for (uint32_t j = 0; j < k; j++) {
				uint32_t id = l * t->n_experts + sel[j];

				s.need_stamp[id] = s.stamp;
				out->accesses++;
				out->decode_accesses += v->tokens[i]->phase == MOE_TRACE_DECODE;
				if (s.id_slot[id] != SIM_NONE) {
					out->hits++;
					out->decode_hits += v->tokens[i]->phase == MOE_TRACE_DECODE;
					if (s.pf_pending[id]) {
						s.pf_pending[id] = false;
						out->prefetch_saved++;
					}
				}
				moe_policy_access(c->policy, plocal, sel[j], 1, step);
			}
			if (s.tm) {
				for (uint32_t j = 0; j < k; j++) {
					step_ids[j] = l * t->n_experts + sel[j];
					resident[j] = s.id_slot[step_ids[j]] != SIM_NONE;
				}
				err = moe_timing_plan(s.tm, step_ids, resident, k);
				if (err)
					goto out;
			}
			for (uint32_t j = 0; j < k; j++) {
				uint32_t id = l * t->n_experts + sel[j];

				if (s.id_slot[id] != SIM_NONE)
					continue;
				out->misses++;
				if (s.tm && !moe_timing_admit(s.tm, id)) {
					out->not_admitted++;
					continue;
				}
				err = sim_fill(&s, id, false);
				if (err)
					goto out;
			}
			n = 0;
			if (pred) {
				moe_predictor_observe(pred, l, sel, k);
				n = moe_predictor_predict(pred, l, sel, k, guess, k);
			} else if (cfg->prefetch) {
				n = (int)moe_hint_next_layer(v->tokens[i], t->n_layers,
							     t->n_experts, l, cfg->hint_accuracy,
							     &s.hint_rng, guess, k);
			}
			for (int j = 0; j < n; j++) {
				uint32_t id = (l + 1) * t->n_experts + guess[j];

				if (s.id_slot[id] != SIM_NONE)
					continue;
				/* Only when it can use link time before it is needed. */
				if (s.tm && !moe_timing_prefetch_useful(s.tm))
					break;
				err = sim_fill(&s, id, true);
				if (err)
					goto out;
			}
			if (s.tm)
				moe_timing_step_end(s.tm);
		}
	}
	if (s.tm)
		moe_timing_result(s.tm, &out->timing);
	for (uint32_t id = 0; id < s.n_ids; id++)
		out->prefetch_unused += s.pf_pending[id];
	out->hit_rate = out->accesses ? (double)out->hits / (double)out->accesses : 0.0;
out:
	free(step_ids);
	free(resident);
	free(guess);
	moe_predictor_destroy(pred);
	sim_free(&s);
	moe_profile_free(&own);
	return err;
}
