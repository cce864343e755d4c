// SPDX-License-Identifier: MIT
/*
 * The tiered simulation (sim.h, moe_sim_run_tiers): agent/tiers.c over one
 * in-memory map region per tier.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/memmap.h"
#include "sim.h"

struct simt_pin {
	uint32_t tier, slot;
};

struct simt {
	uint32_t n_tiers;
	struct agent_memmap map[AGENT_TIERS_MAX];
	struct agent_slots slots[AGENT_TIERS_MAX];
	struct moe_policy *policy[AGENT_TIERS_MAX];
	bool ready[AGENT_TIERS_MAX];
	struct agent_tiers tiers;
	bool tiers_ready;
	uint64_t stamp;
	struct simt_pin *pins;
	uint32_t n_pins;
};

static void simt_move(void *ctx, uint32_t tier, uint32_t slot, uint32_t idx, uint32_t from,
		      uint32_t from_slot)
{
	struct simt *s = ctx;

	(void)from;
	(void)from_slot;
	agent_memmap_filling(&s->map[tier], idx, slot);
	agent_memmap_publish(&s->map[tier], idx, slot);
	/* Used in this step: the strict pass leaves it alone until the next. */
	s->map[tier].last_use[slot] = s->stamp;
}

static void simt_clear(void *ctx, uint32_t tier, uint32_t slot)
{
	struct simt *s = ctx;

	agent_memmap_clear(&s->map[tier], slot);
}

static const struct agent_tier_ops simt_ops = {.move = simt_move, .clear = simt_clear};

static void simt_pin(struct simt *s, uint32_t tier, uint32_t slot)
{
	agent_memmap_pin(&s->map[tier], slot, s->stamp);
	s->pins[s->n_pins].tier = tier;
	s->pins[s->n_pins++].slot = slot;
}

static void simt_free(struct simt *s)
{
	if (s->tiers_ready)
		agent_tiers_destroy(&s->tiers);
	for (uint32_t i = 0; i < s->n_tiers; i++) {
		if (s->ready[i]) {
			agent_slots_destroy(&s->slots[i]);
			agent_memmap_free(&s->map[i]);
		}
		moe_policy_destroy(s->policy[i]);
	}
	free(s->pins);
}

static int simt_setup(struct simt *s, const struct moe_trace *t,
		      const struct moe_sim_tiers_config *cfg, const struct moe_profile *profile)
{
	struct agent_slots *views[AGENT_TIERS_MAX];
	uint64_t total = 0;
	int err;

	for (uint32_t i = 0; i < cfg->n_tiers; i++) {
		if (!cfg->slots[i])
			return -EINVAL;
		total += cfg->slots[i];
	}
	if (total > (uint64_t)t->n_layers * t->n_experts)
		return -EINVAL;
	s->pins = malloc(sizeof(*s->pins) * (t->top_k ? t->top_k : 1));
	if (!s->pins)
		return -ENOMEM;
	for (uint32_t i = 0; i < cfg->n_tiers; i++) {
		struct moe_policy_config pc = {
		    .n_layers = t->n_layers,
		    .n_local = t->n_experts,
		    .n_slots = cfg->slots[i],
		    .profile = profile,
		    .lookahead_steps = t->n_layers,
		};

		err = moe_policy_create(cfg->policy, &pc, &s->policy[i]);
		s->n_tiers = i + 1;
		if (err)
			return err;
		err = agent_memmap_init(&s->map[i], t->n_layers, t->n_experts, 0, t->n_experts,
					cfg->slots[i]);
		if (err)
			return err;
		err = agent_slots_init(&s->slots[i], &s->map[i].view, s->policy[i]);
		if (err) {
			agent_memmap_free(&s->map[i]);
			return err;
		}
		s->ready[i] = true;
		views[i] = &s->slots[i];
	}
	err = agent_tiers_init(&s->tiers, cfg->n_tiers, views, cfg->placement, &simt_ops, s);
	s->tiers_ready = !err;
	return err;
}

/* A step's cost per tier and on the host (sim.h's model); adds each to out. */
static void simt_time(const struct moe_sim_tiers_config *cfg, const uint32_t *n_in, uint32_t n_cold,
		      struct moe_sim_tiers_result *out)
{
	const struct moe_timing_config *tc = cfg->timing;
	double bytes =
	    (double)(tc->expert_bytes ? tc->expert_bytes : MOE_TIMING_DEFAULT_EXPERT_BYTES);
	double gbps = tc->cpu_gbps > 0 ? tc->cpu_gbps : tc->link_gbps;
	double host = n_cold * bytes / (gbps * 1e3);
	double step = tc->layer_us;

	out->tiers[0].time_us += tc->layer_us;
	for (uint32_t i = 1; i < cfg->n_tiers; i++) {
		double d = n_in[i] * cfg->tier_us;

		out->tiers[i].time_us += d;
		step = d > step ? d : step;
	}
	out->host_us += host;
	out->total_us += host > step ? host : step;
	out->resident_us += tc->layer_us;
}

int moe_sim_run_tiers(const struct moe_trace_view *v, const struct moe_sim_tiers_config *cfg,
		      struct moe_sim_tiers_result *out)
{
	struct simt s = {0};
	struct moe_profile own = {0};
	const struct moe_profile *profile;
	const struct moe_trace *t;
	uint32_t *lower = NULL;
	int err;

	if (!v || !v->trace || !cfg || !out || !cfg->n_tiers || cfg->n_tiers > AGENT_TIERS_MAX)
		return -EINVAL;
	if (moe_policy_reads_future(cfg->policy))
		return -EOPNOTSUPP;
	if (cfg->timing &&
	    (!(cfg->timing->layer_us >= 0) || !(cfg->tier_us >= 0) || !isfinite(cfg->tier_us) ||
	     !(cfg->timing->cpu_gbps > 0 || cfg->timing->link_gbps > 0)))
		return -EINVAL;
	t = v->trace;
	memset(out, 0, sizeof(*out));
	profile = cfg->profile;
	if (!profile && cfg->policy && !strcmp(cfg->policy, "static")) {
		err = moe_sim_profile_from(v, &own);
		if (err)
			return err;
		profile = &own;
	}
	err = simt_setup(&s, t, cfg, profile);
	lower = malloc(sizeof(*lower) * (t->top_k ? t->top_k : 1));
	if (!err && !lower)
		err = -ENOMEM;
	if (err)
		goto out;
	out->policy = moe_policy_name(s.policy[0]);
	out->n_layers = t->n_layers;
	out->n_experts = t->n_experts;
	out->n_tiers = cfg->n_tiers;
	out->tokens = v->n;
	out->timed = cfg->timing != NULL;
	for (uint32_t i = 0; i < cfg->n_tiers; i++)
		out->tiers[i].slots = cfg->slots[i];

	for (uint32_t i = 0; i < v->n; i++) {
		for (uint32_t l = 0; l < t->n_layers; l++) {
			uint64_t step = (uint64_t)i * t->n_layers + l;
			uint32_t n_in[AGENT_TIERS_MAX] = {0};
			uint32_t k, n_lower = 0, n_cold = 0;
			const uint32_t *sel = moe_trace_layer(v->tokens[i], l, &k);

			s.stamp = step + 1;
			out->steps++;
			agent_tiers_new_round(&s.tiers, step);
			/* Where each expert is at the step's start: it runs there. */
			for (uint32_t j = 0; j < k; j++) {
				uint32_t idx = l * t->n_experts + sel[j], slot;
				uint32_t tier = agent_tiers_where(&s.tiers, idx, &slot);

				out->accesses++;
				if (tier == AGENT_TIER_NONE) {
					n_cold++;
				} else {
					out->tiers[tier].hits++;
					n_in[tier]++;
					simt_pin(&s, tier, slot);
					if (tier)
						lower[n_lower++] = idx;
				}
				agent_tiers_access(&s.tiers, idx, step);
			}
			out->cold += n_cold;
			if (out->timed)
				simt_time(cfg, n_in, n_cold, out);
			for (uint32_t j = 0; j < k; j++) {
				uint32_t idx = l * t->n_experts + sel[j];
				int slot;

				if (agent_tiers_where(&s.tiers, idx, NULL) != AGENT_TIER_NONE)
					continue;
				slot = agent_tiers_fill(&s.tiers, idx);
				if (slot == -ENOSPC) {
					out->bypassed++;
					continue;
				}
				if (slot < 0) {
					err = slot;
					goto out;
				}
				simt_pin(&s, 0, (uint32_t)slot);
			}
			for (uint32_t j = 0; j < s.n_pins; j++)
				agent_memmap_unpin(&s.map[s.pins[j].tier], s.pins[j].slot);
			s.n_pins = 0;
			/* The step ran its lower-tier experts where they were; hot ones move up. */
			for (uint32_t j = 0; j < n_lower; j++) {
				int r;

				if (agent_tiers_where(&s.tiers, lower[j], NULL) == 0 ||
				    agent_tiers_where(&s.tiers, lower[j], NULL) == AGENT_TIER_NONE)
					continue;
				r = agent_tiers_promote(&s.tiers, lower[j]);
				if (r == -EPROTO) {
					err = r;
					goto out;
				}
			}
		}
	}
	for (uint32_t i = 0; i < cfg->n_tiers; i++) {
		struct moe_sim_tier *o = &out->tiers[i];
		const struct agent_tier_stats *st = &s.tiers.stats[i];

		out->hits += o->hits;
		o->hit_rate = out->accesses ? (double)o->hits / (double)out->accesses : 0.0;
		o->fills = st->fills;
		o->promotions = st->promotions;
		o->demotions = st->demotions;
		o->drops = st->drops;
	}
	out->hit_rate = out->accesses ? (double)out->hits / (double)out->accesses : 0.0;
	out->modeled_speed = out->total_us > 0 ? out->resident_us / out->total_us : 0.0;
out:
	free(lower);
	simt_free(&s);
	moe_profile_free(&own);
	return err;
}
