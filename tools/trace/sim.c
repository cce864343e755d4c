// SPDX-License-Identifier: MIT
/*
 * The trace-driven cache simulator (see sim.h). Each cache is a map region
 * in memory (agent/memmap.h) and the agent's own slot choice over it
 * (agent/slots.h): a free slot, else the policy's victim among the slots
 * that may be taken, so that moecached and the simulator pick the same
 * victims by construction. A step is what one client's acquire does: the
 * step's resident experts are pinned (and stamped with the step's clock),
 * each miss is filled and pinned, the pins are dropped; prefetches follow,
 * stamped but not pinned, and get the strict pass only (never a slot used
 * in this step).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/memmap.h"
#include "agent/slots.h"
#include "hint.h"
#include "sim.h"

#define SIM_NONE UINT32_MAX

struct sim;

struct sim_cache {
	struct sim *sim;
	struct moe_policy *policy;
	uint32_t layer; /* per-layer caches: the layer; else 0 */
	uint32_t n_slots;
	struct agent_memmap map;  /* what the driver would hold */
	struct agent_slots slots; /* the agent's view and slot choice */
	bool ready;		  /* map and slots initialised */
	struct moe_future future;
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
	uint32_t *id_slot; /* global id -> slot in its cache */
	uint32_t *pinned;  /* slots pinned in the current step */
	uint32_t n_pinned;
	bool *pf_pending; /* prefetched and not used yet */
	uint64_t stamp;	  /* the current step's clock: step + 1 */
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
	double *count;
	int err;

	if (!v || !v->trace || !out)
		return -EINVAL;
	out->n = 0;
	out->ranked = NULL;
	t = v->trace;
	count = calloc((size_t)t->n_layers * t->n_experts, sizeof(*count));
	if (!count)
		return -ENOMEM;
	for (uint32_t i = 0; i < v->n; i++) {
		for (uint32_t l = 0; l < t->n_layers; l++) {
			uint32_t k;
			const uint32_t *sel = moe_trace_layer(v->tokens[i], l, &k);

			for (uint32_t j = 0; j < k; j++)
				count[l * t->n_experts + sel[j]] += 1;
		}
	}
	err = moe_profile_rank(count, t->n_layers, t->n_experts, out);
	free(count);
	return err;
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

static struct sim_cache *sim_cache_of(struct sim *s, uint32_t layer)
{
	return &s->caches[s->per_layer ? layer : 0];
}

/* The cache's local index of a global id, and back. */
static uint32_t sim_local(const struct sim *s, uint32_t id)
{
	return s->per_layer ? id % s->n_experts : id;
}

static uint32_t sim_global(const struct sim_cache *c, uint32_t idx)
{
	return c->sim->per_layer ? c->layer * c->sim->n_experts + idx : idx;
}

static void sim_pin(struct sim *s, struct sim_cache *c, uint32_t slot)
{
	agent_memmap_pin(&c->map, slot, s->stamp);
	s->pinned[s->n_pinned++] = slot;
}

/*
 * Brings id into its cache through the agent's slot choice. Returns 0
 * (filled, refused or bypassed) or -EPROTO if the choice broke a rule.
 */
static int sim_fill(struct sim *s, uint32_t id, bool prefetch)
{
	struct sim_cache *c = sim_cache_of(s, id / s->n_experts);
	uint32_t idx = sim_local(s, id), old;
	int slot;

	/* Slots used after step_start are the current step's. */
	agent_slots_new_round(&c->slots, s->stamp - 1);
	slot = agent_slots_choose(&c->slots, idx, prefetch);
	if (slot == -ECANCELED && prefetch) {
		s->res->prefetch_refused++;
		return 0;
	}
	if (slot == -ENOSPC) {
		if (prefetch)
			s->res->prefetch_refused++;
		else
			s->res->bypassed++;
		return 0;
	}
	if (slot < 0)
		return -EPROTO;
	old = c->map.owner[slot];
	if (old != MOECACHE_NONE) {
		uint32_t old_id = sim_global(c, old);

		if (s->pf_pending[old_id]) {
			s->pf_pending[old_id] = false;
			s->res->prefetch_wasted++;
		}
		if (s->tm)
			moe_timing_evicted(s->tm, old_id);
		s->id_slot[old_id] = SIM_NONE;
		s->res->evictions++;
	}
	/* EVICT, the copy, COMMIT: as the agent and the driver do them. */
	agent_memmap_filling(&c->map, idx, (uint32_t)slot);
	agent_slots_taken(&c->slots, (uint32_t)slot, idx, prefetch);
	agent_memmap_publish(&c->map, idx, (uint32_t)slot);
	agent_slots_committed(&c->slots, (uint32_t)slot);
	s->id_slot[id] = (uint32_t)slot;
	if (s->tm)
		moe_timing_filled(s->tm, id, prefetch);
	if (prefetch) {
		/* Stamped, not pinned: a later prefetch of this step must not undo it. */
		c->map.last_use[slot] = s->stamp;
		s->pf_pending[id] = true;
		s->res->prefetch_issued++;
	} else {
		sim_pin(s, c, (uint32_t)slot);
	}
	return 0;
}

/* The step's pins are dropped: every cache's, the one the step used. */
static void sim_unpin_all(struct sim *s, struct sim_cache *c)
{
	for (uint32_t i = 0; i < s->n_pinned; i++)
		agent_memmap_unpin(&c->map, s->pinned[i]);
	s->n_pinned = 0;
}

static void sim_free(struct sim *s)
{
	for (uint32_t i = 0; s->caches && i < s->n_caches; i++) {
		if (s->caches[i].ready) {
			agent_slots_destroy(&s->caches[i].slots);
			agent_memmap_free(&s->caches[i].map);
		}
		moe_policy_destroy(s->caches[i].policy);
	}
	free(s->caches);
	free(s->id_slot);
	free(s->pinned);
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
	s->pinned = malloc(sizeof(*s->pinned) * (cfg->n_slots ? cfg->n_slots : 1));
	s->pf_pending = calloc(s->n_ids, sizeof(*s->pf_pending));
	if (!s->caches || !s->id_slot || !s->pinned || !s->pf_pending)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->n_ids; i++)
		s->id_slot[i] = SIM_NONE;
	/* The policies that read the future. */
	oracle = moe_policy_reads_future(cfg->policy);
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
		    .n_local = t->n_experts,
		    .profile = profile,
		};

		c->sim = s;
		c->layer = cfg->per_layer ? i : 0;
		/* Split evenly; the first layers take the remainder. */
		c->n_slots = cfg->per_layer
				 ? cfg->n_slots / t->n_layers + (i < cfg->n_slots % t->n_layers)
				 : cfg->n_slots;
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
		err = agent_memmap_init(&c->map, pc.n_layers, t->n_experts, 0, t->n_experts,
					c->n_slots);
		if (err)
			return err;
		err = agent_slots_init(&c->slots, &c->map.view, c->policy);
		if (err) {
			agent_memmap_free(&c->map);
			return err;
		}
		c->ready = true;
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
			/* The acquire: hits pinned, then each miss filled and pinned. */
			if (s.tm)
				moe_timing_step_begin(s.tm);
			for (uint32_t j = 0; j < k; j++) {
				uint32_t id = l * t->n_experts + sel[j];

				out->accesses++;
				out->decode_accesses += v->tokens[i]->phase == MOE_TRACE_DECODE;
				if (s.id_slot[id] != SIM_NONE) {
					out->hits++;
					out->decode_hits += v->tokens[i]->phase == MOE_TRACE_DECODE;
					sim_pin(&s, c, s.id_slot[id]);
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
			sim_unpin_all(&s, c);
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
