/* SPDX-License-Identifier: MIT */
/*
 * Trace-driven simulation of an expert cache: moecached's own slot choice
 * (agent/slots.c, over a map region in memory) and policies.
 *
 * A step is one layer of one token. The step's experts are accessed first
 * (hits counted), then every miss is filled: into a free slot, or over a
 * victim the policy picks among resident experts the step does not need.
 * The cache starts empty and those first misses count. With prefetch on,
 * after each step the predictor guesses the next layer's experts and each
 * guess that is not resident is filled as a prefetch, which the policy may
 * refuse and which never evicts the current step's experts.
 */
#ifndef MOECACHE_TOOLS_TRACE_SIM_H
#define MOECACHE_TOOLS_TRACE_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/policy/policy.h"
#include "agent/tiers.h"
#include "timing.h"
#include "trace.h"

struct moe_sim_config {
	const char *policy; /* a moe_policy_names() entry; NULL: default */
	uint32_t n_slots;   /* whole cache */
	bool per_layer;	    /* one cache per layer, n_slots split evenly */
	bool prefetch;
	const struct moe_profile *profile; /* for static; NULL: ranked from the view itself */
	uint32_t lookahead;		   /* for lookahead: tokens it sees ahead (0: 1) */
	/* The decode time model (timing.h); NULL: hit counts only. */
	const struct moe_timing_config *timing;
	/*
	 * With prefetch: 0 uses the next-layer predictor; P in (0, 1] emulates
	 * an engine's hint of the next layer (a pre-gating router), each of the
	 * next layer's experts named with probability P, else a wrong one.
	 * 1 is the oracle prefetch that prices the bound.
	 */
	double hint_accuracy;
};

struct moe_sim_result {
	const char *policy; /* the policy's own name (static storage) */
	uint32_t slots;
	uint32_t n_layers, n_experts;
	uint64_t tokens, steps;
	uint64_t accesses, hits, misses, evictions;
	uint64_t bypassed; /* misses no slot could take: fewer slots than a step's experts */
	double hit_rate;   /* hits / accesses */
	uint64_t decode_accesses, decode_hits; /* those of decode tokens */
	/* prefetch */
	uint64_t prefetch_issued;  /* copies started on a prediction */
	uint64_t prefetch_refused; /* predictions the policy would not admit */
	uint64_t prefetch_saved; /* demand accesses that hit on a prefetched, still unused expert */
	uint64_t prefetch_wasted; /* prefetched, then evicted before any use */
	uint64_t prefetch_unused; /* prefetched and never used by the end */
	/* with timing */
	bool timed;
	uint64_t not_admitted; /* misses computed on the CPU and left out of the bank */
	struct moe_timing_result timing;
};

/* floor(fraction * n_layers * n_experts), at least 1; -EINVAL for a fraction outside (0, 1]. */
int moe_sim_slots_for(const struct moe_trace *t, double fraction, uint32_t *out);

/* Experts of the view ranked by how often it accesses them (for static without a profile). */
int moe_sim_profile_from(const struct moe_trace_view *v, struct moe_profile *out);

/*
 * Runs the view through a cache. Returns 0, -ENOENT for an unknown policy,
 * -EINVAL for a bad config (no slots; per-layer with fewer slots than
 * layers; a bad timing config or hint accuracy), -ENOMEM, or -EPROTO if the
 * policy returned a slot it must not.
 *
 * With timing, each step's experts that are not ready are planned
 * (libmoecache.h, lib/plan.c): a miss the plan computes on the CPU without
 * admitting it is counted a miss and not filled; the rest are filled as
 * above.
 */
int moe_sim_run(const struct moe_trace_view *v, const struct moe_sim_config *cfg,
		struct moe_sim_result *out);

/*
 * Tiers (agent/tiers.h, the code an agent runs): each tier a map region in
 * memory with the agent's slot choice and its own instance of the policy.
 * A step locates its experts (a hit in the tier holding it, or cold: a
 * miss everywhere, computed from the host pages), pins them where they
 * are, fills each cold one into tier 0 (its victim demoted), drops the
 * pins, then offers tier 0 each of its experts found in a lower tier
 * (promoted if tier 0's policy admits it). No prefetch, per-layer caches
 * or oracle policies.
 *
 * The time model (with timing): the tiers and the host run a step's
 * experts in parallel and the step takes the longest of
 *
 *	tier 0:       layer_us (attention, the router and its experts)
 *	lower tier i: n_i x tier_us (its experts, one after another)
 *	host:         n_cold x expert_bytes / cpu_gbps (or over the link
 *	              when cpu_gbps is 0)
 *
 * Copies for fills, promotions and demotions run in the background and
 * are not priced. The reference is every expert in tier 0: layer_us a step.
 */
struct moe_sim_tiers_config {
	const char *policy; /* for every tier; NULL: default */
	uint32_t n_tiers;
	uint32_t slots[AGENT_TIERS_MAX];
	enum agent_tier_placement placement;
	const struct moe_profile *profile;	/* for static; NULL: ranked from the view */
	const struct moe_timing_config *timing; /* NULL: no time model */
	double tier_us;				/* with timing: a lower tier's time per expert */
};

struct moe_sim_tier {
	uint32_t slots;
	uint64_t hits;			       /* accesses that found the expert in this tier */
	double hit_rate;		       /* hits / all accesses */
	uint64_t fills;			       /* cold experts brought in (tier 0) */
	uint64_t promotions, demotions, drops; /* agent_tier_stats */
	double time_us; /* with timing: the tier's busy time summed over steps */
};

struct moe_sim_tiers_result {
	const char *policy;
	uint32_t n_layers, n_experts, n_tiers;
	uint64_t tokens, steps, accesses, hits, cold, bypassed;
	double hit_rate; /* hits in any tier / accesses */
	struct moe_sim_tier tiers[AGENT_TIERS_MAX];
	bool timed;
	double host_us, total_us, resident_us, modeled_speed;
};

/*
 * Returns 0, -EINVAL (no tier, a tier without slots, more slots than
 * experts in all, a static slice left empty, bad timing), -ENOENT (unknown
 * policy), -EOPNOTSUPP (an oracle policy), -ENOMEM or -EPROTO.
 */
int moe_sim_run_tiers(const struct moe_trace_view *v, const struct moe_sim_tiers_config *cfg,
		      struct moe_sim_tiers_result *out);

#endif /* MOECACHE_TOOLS_TRACE_SIM_H */
