// SPDX-License-Identifier: MIT
/* The simulator on generated traces, and the default policy on the tree's traces (tests/traces). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "agent/slots.h"
#include "tools/trace/batch.h"
#include "tools/trace/sim.h"

/* Builds a JSON-lines trace: tokens x layers selections from sel(t, l, out) -> count. */
static struct moe_trace *gen_trace(uint32_t n_tokens, uint32_t n_layers,
				   uint32_t (*sel)(uint32_t t, uint32_t l, uint32_t *out))
{
	size_t cap = 1 << 20, len = 0;
	char *text = malloc(cap);
	struct moe_trace *t;
	char err[256];

	cr_assert_not_null(text);
	for (uint32_t i = 0; i < n_tokens; i++) {
		len += (size_t)snprintf(text + len, cap - len, "{\"tok\": %u, \"layers\": [", i);
		for (uint32_t l = 0; l < n_layers; l++) {
			uint32_t ids[16], n = sel(i, l, ids);

			len += (size_t)snprintf(text + len, cap - len, "%s[", l ? ", " : "");
			for (uint32_t j = 0; j < n; j++)
				len += (size_t)snprintf(text + len, cap - len, "%s%u",
							j ? ", " : "", ids[j]);
			len += (size_t)snprintf(text + len, cap - len, "]");
		}
		len += (size_t)snprintf(text + len, cap - len, "]}\n");
		cr_assert_lt(len, cap - 256);
	}
	cr_assert_eq(moe_trace_parse("gen", text, len, &t, err, sizeof(err)), 0, "%s", err);
	free(text);
	return t;
}

static void sim(const struct moe_trace *t, const char *policy, uint32_t slots, bool per_layer,
		bool prefetch, struct moe_sim_result *r)
{
	struct moe_trace_view v;
	struct moe_sim_config cfg = {
	    .policy = policy, .n_slots = slots, .per_layer = per_layer, .prefetch = prefetch};
	int ret;

	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	ret = moe_sim_run(&v, &cfg, r);
	cr_assert_eq(ret, 0, "%s: %d", policy ? policy : "default", ret);
	moe_trace_view_free(&v);
}

static const uint32_t lru_seq[] = {0, 1, 0, 2, 0, 1};
static uint32_t sel_lru_seq(uint32_t t, uint32_t l, uint32_t *out)
{
	out[0] = lru_seq[t];
	return 1;
}

static const uint32_t textbook[] = {7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1};
static uint32_t sel_textbook(uint32_t t, uint32_t l, uint32_t *out)
{
	out[0] = textbook[t];
	return 1;
}

static uint32_t sel_pair(uint32_t t, uint32_t l, uint32_t *out)
{
	out[0] = 0;
	out[1] = 1;
	return 2;
}

/* Layer 0 takes two new experts each token; layer 1 always expert 0. */
static uint32_t sel_churn(uint32_t t, uint32_t l, uint32_t *out)
{
	if (l == 1) {
		out[0] = 0;
		return 1;
	}
	out[0] = (2 * t) % 16;
	out[1] = (2 * t + 1) % 16;
	return 2;
}

/* Layer 1's expert follows from layer 0's: a transition the predictor can learn. */
static uint32_t sel_chain(uint32_t t, uint32_t l, uint32_t *out)
{
	out[0] = (t * 5 + 3) % 8;
	if (l == 1)
		out[0] = (out[0] + 3) % 8;
	return 1;
}

/* Every layer alternates between experts {0, 1} and {2, 3}: each returns two tokens after use. */
static uint32_t sel_alternate(uint32_t t, uint32_t l, uint32_t *out)
{
	out[0] = (t % 2) * 2;
	out[1] = (t % 2) * 2 + 1;
	return 2;
}

/* A deterministic pseudo-random top-4 of 16 experts per layer. */
static uint32_t sel_random(uint32_t t, uint32_t l, uint32_t *out)
{
	uint32_t x = t * 2654435761u + l * 40503u + 1, n = 0;

	while (n < 4) {
		bool dup = false;

		x = x * 1103515245u + 12345u;
		for (uint32_t j = 0; j < n; j++)
			dup |= out[j] == (x >> 16) % 16;
		if (!dup)
			out[n++] = (x >> 16) % 16;
	}
	return n;
}

Test(sim, basic_lru_counts,
     .description = "LRU with 2 slots on 0 1 0 2 0 1: 2 hits, 4 misses, 2 evictions")
{
	struct moe_trace *t = gen_trace(6, 1, sel_lru_seq);
	struct moe_sim_result r;

	sim(t, "lru", 2, false, false, &r);
	cr_assert_eq(r.accesses, 6);
	cr_assert_eq(r.hits, 2);
	cr_assert_eq(r.misses, 4);
	cr_assert_eq(r.evictions, 2);
	cr_assert_float_eq(r.hit_rate, 2.0 / 6.0, 1e-12);
	moe_trace_free(t);
}

Test(sim, basic_belady_textbook,
     .description = "belady through the simulator on the textbook string with 3 slots: 9 misses")
{
	struct moe_trace *t = gen_trace(sizeof(textbook) / sizeof(textbook[0]), 1, sel_textbook);
	struct moe_sim_result r;

	sim(t, "belady", 3, false, false, &r);
	cr_assert_eq(r.misses, 9);
	moe_trace_free(t);
}

Test(sim, basic_bypass_when_step_exceeds_slots,
     .description =
	 "with fewer slots than a step's experts, the rest is not admitted and is counted")
{
	struct moe_trace *t = gen_trace(2, 1, sel_pair);
	struct moe_sim_result r;

	sim(t, "lru", 1, false, false, &r);
	cr_assert_eq(r.hits, 1);
	cr_assert_eq(r.misses, 3);
	cr_assert_eq(r.bypassed, 2);
	moe_trace_free(t);
}

Test(sim, basic_per_layer_isolates_layers,
     .description = "per-layer caches keep one layer's churn from evicting another layer")
{
	struct moe_trace *t = gen_trace(20, 2, sel_churn);
	struct moe_sim_result global, split;

	sim(t, "lru", 2, false, false, &global);
	sim(t, "lru", 2, true, false, &split);
	cr_assert_eq(global.hits, 0);
	cr_assert_eq(split.hits, 19); /* layer 1, every token but the first */
	moe_trace_free(t);
}

Test(sim, bad_input_per_layer_too_few_slots,
     .description = "per-layer needs at least one slot per layer")
{
	struct moe_trace *t = gen_trace(2, 3, sel_random);
	struct moe_trace_view v;
	struct moe_sim_config cfg = {.policy = "lru", .n_slots = 2, .per_layer = true};
	struct moe_sim_result r;

	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	cr_assert_eq(moe_sim_run(&v, &cfg, &r), -EINVAL);
	moe_trace_view_free(&v);
	moe_trace_free(t);
}

Test(sim, bad_input_unknown_policy, .description = "an unknown policy is -ENOENT")
{
	struct moe_trace *t = gen_trace(2, 1, sel_pair);
	struct moe_trace_view v;
	struct moe_sim_config cfg = {.policy = "nope", .n_slots = 2};
	struct moe_sim_result r;

	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	cr_assert_eq(moe_sim_run(&v, &cfg, &r), -ENOENT);
	moe_trace_view_free(&v);
	moe_trace_free(t);
}

Test(sim, basic_slots_for_fraction,
     .description = "capacity fractions round down to whole slots, at least one")
{
	struct moe_trace t = {.n_layers = 16, .n_experts = 64};
	uint32_t n;

	cr_assert_eq(moe_sim_slots_for(&t, 0.10, &n), 0);
	cr_assert_eq(n, 102);
	cr_assert_eq(moe_sim_slots_for(&t, 0.25, &n), 0);
	cr_assert_eq(n, 256);
	cr_assert_eq(moe_sim_slots_for(&t, 1e-6, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(moe_sim_slots_for(&t, 0.0, &n), -EINVAL);
	cr_assert_eq(moe_sim_slots_for(&t, 1.5, &n), -EINVAL);
}

Test(sim, basic_revisit_learns_return_after_two_tokens,
     .description = "on routing that alternates between two expert sets per layer, revisit "
		    "keeps the set due back and comes within 1% of Belady")
{
	struct moe_trace *t = gen_trace(100, 4, sel_alternate);
	struct moe_sim_result revisit, belady;

	/* 12 slots for the 16 experts the 4 layers use over two tokens. */
	sim(t, "revisit", 12, false, false, &revisit);
	sim(t, "belady", 12, false, false, &belady);
	cr_assert_geq(revisit.hit_rate, belady.hit_rate - 0.01, "revisit %.3f belady %.3f",
		      revisit.hit_rate, belady.hit_rate);
	moe_trace_free(t);
}

Test(sim, basic_prefetch_saves_misses,
     .description = "a learnable layer-to-layer transition lets prefetch turn misses into hits")
{
	struct moe_trace *t = gen_trace(64, 2, sel_chain);
	struct moe_sim_result off, on;

	sim(t, "lru", 2, false, false, &off);
	sim(t, "lru", 2, false, true, &on);
	cr_assert_gt(on.prefetch_saved, 0);
	cr_assert_lt(on.misses, off.misses);
	cr_assert_eq(on.misses + on.hits, off.misses + off.hits);
	moe_trace_free(t);
}

Test(sim, basic_prefetch_respects_current_step,
     .description = "no policy's prefetch victim is an expert the current step needs (the "
		    "simulator checks every victim)")
{
	struct moe_trace *t = gen_trace(200, 4, sel_random);

	for (const char *const *name = moe_policy_names(); *name; name++) {
		struct moe_sim_result r;

		/* 8 slots for 4 experts per step: prefetch always competes with the step. */
		sim(t, *name, 8, false, true, &r);
		cr_assert_gt(r.prefetch_issued + r.prefetch_refused, 0, "%s", *name);
	}
	moe_trace_free(t);
}

/*
 * A trace of tests/traces, the tree's own: a missing one fails the test (the
 * tree is incomplete), it is never skipped.
 */
static struct moe_trace *load_tree_trace(const char *name)
{
	char path[PATH_MAX], err[512];
	struct moe_trace *t;
	int n = snprintf(path, sizeof(path), "%s/%s", MOE_TREE_TRACES, name);

	cr_assert(n > 0 && (size_t)n < sizeof(path));
	cr_assert_eq(moe_trace_load(path, &t, err, sizeof(err)), 0, "%s", err);
	return t;
}

static double hit_rate(const struct moe_trace *t, const char *prompt, const char *policy,
		       double fraction)
{
	struct moe_trace_view v;
	struct moe_sim_config cfg = {.policy = policy};
	struct moe_sim_result r;

	cr_assert_eq(moe_sim_slots_for(t, fraction, &cfg.n_slots), 0);
	cr_assert_eq(moe_trace_select(t, prompt, MOE_TRACE_ALL, &v), 0);
	cr_assert_eq(moe_sim_run(&v, &cfg, &r), 0);
	moe_trace_view_free(&v);
	return r.hit_rate;
}

static const double capacities[] = {0.10, 0.25, 0.50};

static void check_default_vs_lru(const struct moe_trace *t, const char *prompt)
{
	for (unsigned int i = 0; i < 3; i++) {
		double lru = hit_rate(t, prompt, "lru", capacities[i]);
		double def = hit_rate(t, prompt, MOE_POLICY_DEFAULT, capacities[i]);

		cr_expect_geq(def, lru, "%s %s at %.0f%%: default %.3f below lru %.3f", t->path,
			      prompt ? prompt : "(whole)", capacities[i] * 100, def, lru);
	}
}

Test(sim, perf_default_at_least_lru_olmoe,
     .description =
	 "the default policy hits at least as often as LRU on the OLMoE trace at 10/25/50%")
{
	struct moe_trace *t = load_tree_trace("olmoe-1b-7b.decode.jsonl");

	check_default_vs_lru(t, NULL);
	moe_trace_free(t);
}

Test(sim, perf_default_at_least_lru_granite,
     .description = "the default policy hits at least as often as LRU on each granite prompt and "
		    "the whole file at 10/25/50%")
{
	struct moe_trace *t = load_tree_trace("granite-3.0-1b-a400m.prefill-decode.json");

	for (uint32_t p = 0; p < t->n_prompts; p++)
		check_default_vs_lru(t, t->prompts[p]);
	check_default_vs_lru(t, NULL);
	moe_trace_free(t);
}

/* At least half of the LRU-to-Belady gap at fraction, on the view of prompt (NULL: all). */
static void check_default_half_gap(const struct moe_trace *t, const char *prompt, double fraction)
{
	double lru = hit_rate(t, prompt, "lru", fraction);
	double bel = hit_rate(t, prompt, "belady", fraction);
	double def = hit_rate(t, prompt, MOE_POLICY_DEFAULT, fraction);

	cr_expect_geq(def - lru, (bel - lru) / 2,
		      "%s %s at %.0f%%: lru %.3f default %.3f belady %.3f", t->path,
		      prompt ? prompt : "(whole)", fraction * 100, lru, def, bel);
}

Test(sim, perf_default_closes_half_gap_at_10pct_olmoe,
     .description = "at 10% capacity the default closes at least half of the LRU-to-Belady gap "
		    "on the OLMoE trace")
{
	struct moe_trace *t = load_tree_trace("olmoe-1b-7b.decode.jsonl");

	check_default_half_gap(t, NULL, 0.10);
	moe_trace_free(t);
}

Test(sim, perf_default_closes_half_gap_at_10pct_granite,
     .description = "at 10% capacity the default closes at least half of the LRU-to-Belady gap "
		    "on each granite prompt and the whole file")
{
	struct moe_trace *t = load_tree_trace("granite-3.0-1b-a400m.prefill-decode.json");

	for (uint32_t p = 0; p < t->n_prompts; p++)
		check_default_half_gap(t, t->prompts[p], 0.10);
	check_default_half_gap(t, NULL, 0.10);
	moe_trace_free(t);
}

Test(sim, perf_next_token_oracle_short_of_half_gap_at_25pct_olmoe,
     .description = "on OLMoE at 25% even lookahead 1 (the next token known exactly) closes less "
		    "than half of the LRU-to-Belady gap, and more than the default")
{
	struct moe_trace *t = load_tree_trace("olmoe-1b-7b.decode.jsonl");
	struct moe_sim_config cfg = {.policy = "lookahead", .lookahead = 1};
	struct moe_trace_view v;
	struct moe_sim_result r;
	double lru, bel, def;

	lru = hit_rate(t, NULL, "lru", 0.25);
	bel = hit_rate(t, NULL, "belady", 0.25);
	def = hit_rate(t, NULL, MOE_POLICY_DEFAULT, 0.25);
	cr_assert_eq(moe_sim_slots_for(t, 0.25, &cfg.n_slots), 0);
	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	cr_assert_eq(moe_sim_run(&v, &cfg, &r), 0);
	cr_expect_gt(r.hit_rate, def, "lookahead 1 %.3f, default %.3f", r.hit_rate, def);
	cr_expect_lt(r.hit_rate - lru, (bel - lru) / 2, "lookahead 1 %.3f: lru %.3f belady %.3f",
		     r.hit_rate, lru, bel);
	moe_trace_view_free(&v);
	moe_trace_free(t);
}

Test(sim, basic_reference_figures_olmoe,
     .description = "LRU and Belady on the OLMoE trace match the figures its README publishes")
{
	/* tests/traces/README.md: LRU 0.000/0.568/0.785, Belady 0.533/0.765/0.913. */
	const double lru_ref[] = {0.000, 0.568, 0.785}, bel_ref[] = {0.533, 0.765, 0.913};
	struct moe_trace *t = load_tree_trace("olmoe-1b-7b.decode.jsonl");

	for (unsigned int i = 0; i < 3; i++) {
		cr_expect_float_eq(hit_rate(t, NULL, "lru", capacities[i]), lru_ref[i], 0.0005);
		cr_expect_float_eq(hit_rate(t, NULL, "belady", capacities[i]), bel_ref[i], 0.0005);
	}
	moe_trace_free(t);
}

/* The time model (tools/trace/timing.h) through the simulator. */

struct timed {
	const char *policy;
	bool cpu;      /* the host computes experts (else: every miss waited for) */
	bool prefetch; /* the next-layer predictor, or the hint below */
	double hint;   /* hint accuracy with prefetch; 0: the predictor */
};

static const struct timed lru_demand = {.policy = "lru"};
static const struct timed default_plan = {.policy = MOE_POLICY_DEFAULT, .cpu = true};
static const struct timed default_plan_prefetch = {
    .policy = MOE_POLICY_DEFAULT, .cpu = true, .prefetch = true};

/* The view of prompt, batch sequences at a time (1: as it is), through the time model. */
static struct moe_sim_result run_timed(const struct moe_trace *t, const char *prompt,
				       const struct timed *how, uint32_t slots, const char *preset,
				       uint32_t batch)
{
	struct moe_timing_config tc;
	struct moe_trace_view v, vb;
	struct moe_sim_result r;
	struct moe_trace *b = NULL;
	struct moe_sim_config cfg = {.policy = how->policy,
				     .n_slots = slots,
				     .prefetch = how->prefetch,
				     .hint_accuracy = how->hint,
				     .timing = &tc};

	cr_assert_eq(moe_timing_preset_get(preset, &tc), 0);
	if (!how->cpu)
		tc.cpu_gbps = 0;
	tc.ref_experts = t->top_k;
	cr_assert_eq(moe_trace_select(t, prompt, MOE_TRACE_ALL, &v), 0);
	if (batch > 1) {
		cr_assert_eq(moe_trace_batch(&v, batch, &b), 0);
		cr_assert_eq(moe_trace_select(b, NULL, MOE_TRACE_ALL, &vb), 0);
		cr_assert_eq(moe_sim_run(&vb, &cfg, &r), 0);
		moe_trace_view_free(&vb);
	} else {
		cr_assert_eq(moe_sim_run(&v, &cfg, &r), 0);
	}
	cr_assert(r.timed);
	moe_trace_view_free(&v);
	moe_trace_free(b);
	return r;
}

static double speed(const struct moe_trace *t, const char *prompt, const struct timed *how,
		    double fraction, const char *preset)
{
	uint32_t slots;

	cr_assert_eq(moe_sim_slots_for(t, fraction, &slots), 0);
	return run_timed(t, prompt, how, slots, preset, 1).timing.modeled_speed;
}

/* A layer always needs experts 0 and 1: after the cold start everything hits. */
Test(sim, basic_timing_all_hits_run_at_resident_speed,
     .description = "once every expert is resident each step costs layer_us; the cold start "
		    "is the only stall")
{
	struct moe_trace *t = gen_trace(10, 2, sel_pair);
	struct moe_sim_result r = run_timed(t, NULL, &lru_demand, 4, "h200", 1);
	double copy = MOE_TIMING_DEFAULT_EXPERT_BYTES / 50e3;

	/* Step 0: two copies on one link; step 1: two more; then 18 steps of 45 us. */
	cr_expect_float_eq(r.timing.total_us, 2 * copy + 2 * copy + 18 * 45.0, 1e-6);
	cr_expect_eq(r.timing.copies, 4);
	cr_expect_float_eq(r.timing.modeled_speed, 20 * 45.0 / r.timing.total_us, 1e-12);
	moe_trace_free(t);
}

/* Layer 0 cycles through 8 experts, one a token; layers 1 to 3 always use expert 0. */
static uint32_t sel_one_new_per_token(uint32_t t, uint32_t l, uint32_t *out)
{
	out[0] = l ? 0 : t % 8;
	return 1;
}

Test(sim, basic_timing_cpu_split_keeps_hits_on_idle_link,
     .description = "regression (a greedy split that left CPU experts out lost hits): one "
		    "miss a token leaves the link room, so every CPU expert is admitted and the "
		    "hits are the demand-only ones")
{
	struct moe_trace *t = gen_trace(100, 4, sel_one_new_per_token);
	struct moe_timing_config tc;
	struct moe_trace_view v;
	struct moe_sim_result only, plan;
	struct moe_sim_config cfg = {.policy = "lru", .n_slots = 7};

	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	cr_assert_eq(moe_sim_run(&v, &cfg, &only), 0);
	cr_assert_eq(moe_timing_preset_get("h200", &tc), 0);
	/*
	 * A 150 us layer with 126 us on the CPU beats a 252 us copy; a token
	 * (600 us) drains the one copy it adds, and each of the cold start's
	 * four copies starts within a token of being queued.
	 */
	tc.layer_us = 150;
	cfg.timing = &tc;
	cr_assert_eq(moe_sim_run(&v, &cfg, &plan), 0);
	cr_expect_geq(plan.timing.cpu_experts, 90);
	cr_expect_eq(plan.not_admitted, 0);
	cr_expect_eq(plan.timing.late, 0);
	cr_expect_eq(plan.hits, only.hits);
	cr_expect_eq(plan.misses, only.misses);
	moe_trace_view_free(&v);
	moe_trace_free(t);
}

Test(sim, bad_input_hint_accuracy, .description = "a hint accuracy outside [0, 1] is -EINVAL")
{
	struct moe_trace *t = gen_trace(4, 2, sel_pair);
	struct moe_trace_view v;
	struct moe_sim_result r;
	struct moe_sim_config cfg = {.n_slots = 4, .prefetch = true, .hint_accuracy = 1.5};

	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	cr_expect_eq(moe_sim_run(&v, &cfg, &r), -EINVAL);
	cfg.hint_accuracy = -0.1;
	cr_expect_eq(moe_sim_run(&v, &cfg, &r), -EINVAL);
	moe_trace_view_free(&v);
	moe_trace_free(t);
}

Test(sim, basic_hint_oracle_prefetch_is_always_right,
     .description = "a hint of accuracy 1 names exactly the next layer's experts: every "
		    "prefetch is used")
{
	struct moe_trace *t = gen_trace(50, 3, sel_random);
	struct moe_trace_view v;
	struct moe_sim_result r;
	struct moe_sim_config cfg = {
	    .policy = "lru", .n_slots = 48, .prefetch = true, .hint_accuracy = 1.0};

	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	cr_assert_eq(moe_sim_run(&v, &cfg, &r), 0);
	cr_expect_gt(r.prefetch_issued, 0);
	cr_expect_eq(r.prefetch_wasted + r.prefetch_unused, 0);
	moe_trace_view_free(&v);
	moe_trace_free(t);
}

static const char *const names[] = {"olmoe-1b-7b.decode.jsonl",
				    "granite-3.0-1b-a400m.prefill-decode.json"};
static const double timed_capacities[] = {0.05, 0.10, 0.25, 0.50, 0.75, 1.0};
static const char *const presets[] = {"h200", "slow-link"};

/* The bar of the default with the h200 preset, and never below LRU anywhere. */
static double check_timed_default(const struct moe_trace *t, const char *prompt)
{
	const char *name = prompt ? prompt : "(whole)";
	double at25 = 0;

	for (unsigned int p = 0; p < 2; p++) {
		for (unsigned int i = 0; i < 6; i++) {
			double f = timed_capacities[i];
			double lru = speed(t, prompt, &lru_demand, f, presets[p]);
			double def = speed(t, prompt, &default_plan_prefetch, f, presets[p]);

			cr_expect_geq(def, lru, "%s %s %s at %.0f%%: default %.4f below lru %.4f",
				      t->path, name, presets[p], f * 100, def, lru);
			if (p == 0 && f == 0.10)
				cr_expect_geq(def, 2 * lru, "%s %s at 10%%: %.4f < 2 x lru %.4f",
					      t->path, name, def, lru);
			if (p == 0 && f == 0.25)
				at25 = def / lru;
		}
	}
	return at25;
}

static const struct timed lrfu_plan = {.policy = "lrfu", .cpu = true};

Test(sim, perf_default_over_lrfu_on_shipped_traces,
     .description = "on tests/traces at 10%, 25% and 50% the default's demand hit rate is at "
		    "least lrfu's (the llama.cpp-style baseline) - 0.002 and its h200 modeled "
		    "speed at least lrfu's with the same plan")
{
	static const char *const traces[] = {"olmoe-1b-7b.decode.jsonl",
					     "granite-3.0-1b-a400m.prefill-decode.json"};
	static const double fractions[] = {0.10, 0.25, 0.50};

	for (unsigned int n = 0; n < 2; n++) {
		struct moe_trace *t = load_tree_trace(traces[n]);

		for (unsigned int i = 0; i < 3; i++) {
			struct moe_sim_result base, def;
			uint32_t slots;
			double sb, sd;

			cr_assert_eq(moe_sim_slots_for(t, fractions[i], &slots), 0);
			sim(t, "lrfu", slots, false, false, &base);
			sim(t, NULL, slots, false, false, &def);
			cr_expect_geq(def.hit_rate, base.hit_rate - 0.002,
				      "%s %.0f%%: %.4f < lrfu %.4f - 0.002", traces[n],
				      fractions[i] * 100, def.hit_rate, base.hit_rate);
			sb = speed(t, NULL, &lrfu_plan, fractions[i], "h200");
			sd = speed(t, NULL, &default_plan, fractions[i], "h200");
			cr_expect_geq(sd, sb, "%s %.0f%%: speed %.4f < lrfu %.4f", traces[n],
				      fractions[i] * 100, sd, sb);
		}
		moe_trace_free(t);
	}
}

Test(sim, perf_timing_default_doubles_lru_at_10pct,
     .description = "h200: the default plan is at least 2x LRU demand-only's modeled speed at "
		    "10% on every trace of tests/traces and prompt, 1.5x on average at 25%, and never below "
		    "LRU at any capacity or preset")
{
	struct moe_trace *o = load_tree_trace("olmoe-1b-7b.decode.jsonl");
	struct moe_trace *g = load_tree_trace("granite-3.0-1b-a400m.prefill-decode.json");
	double sum = 0;

	sum += check_timed_default(o, NULL);
	for (uint32_t p = 0; p < g->n_prompts; p++)
		check_timed_default(g, g->prompts[p]);
	sum += check_timed_default(g, NULL);
	cr_expect_geq(sum / 2, 1.5, "average over the two traces at 25%%: %.3f", sum / 2);
	moe_trace_free(o);
	moe_trace_free(g);
}

Test(sim, perf_timing_prefetch_never_slower,
     .description = "with the time model, prefetch on (the predictor, or a hint of accuracy "
		    "0.5, 0.8, 0.95) is never slower than prefetch off, at any capacity or preset")
{
	static const double hints[] = {0, 0.5, 0.8, 0.95};

	for (unsigned int n = 0; n < 2; n++) {
		struct moe_trace *t = load_tree_trace(names[n]);

		for (unsigned int p = 0; p < 2; p++) {
			for (unsigned int i = 0; i < 6; i += 2) {
				double f = timed_capacities[i + 1];
				double off = speed(t, NULL, &default_plan, f, presets[p]);

				for (unsigned int h = 0; h < 4; h++) {
					struct timed how = default_plan_prefetch;
					double on;

					how.hint = hints[h];
					on = speed(t, NULL, &how, f, presets[p]);
					cr_expect_geq(on, off - 1e-12,
						      "%s %s at %.0f%% hint %.2f: %.5f < %.5f",
						      names[n], presets[p], f * 100, hints[h], on,
						      off);
				}
			}
		}
		moe_trace_free(t);
	}
}

Test(sim, basic_batch_is_the_union_of_stretches,
     .description = "--batch 2 of 4 tokens: step i of a layer is the union of tokens i and 2 + i, "
		    "each expert once")
{
	struct moe_trace *t = gen_trace(4, 2, sel_lru_seq), *b;
	struct moe_trace_view v;
	uint32_t k;
	const uint32_t *ids;

	/* sel_lru_seq: tokens 0..3 select 0, 1, 0, 2 in every layer. */
	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	cr_assert_eq(moe_trace_batch(&v, 2, &b), 0);
	cr_expect_eq(b->n_tokens, 2);
	cr_expect_eq(b->top_k, 2);
	ids = moe_trace_layer(&b->tokens[0], 1, &k);
	cr_assert_eq(k, 1, "tokens 0 and 2 both select 0");
	cr_expect_eq(ids[0], 0);
	ids = moe_trace_layer(&b->tokens[1], 0, &k);
	cr_assert_eq(k, 2);
	cr_expect_eq(ids[0], 1);
	cr_expect_eq(ids[1], 2);
	{
		struct moe_trace *none = NULL;

		cr_expect_eq(moe_trace_batch(&v, 5, &none), -EINVAL);
		cr_expect_eq(moe_trace_batch(&v, 0, &none), -EINVAL);
		cr_expect_null(none);
	}
	moe_trace_view_free(&v);
	moe_trace_free(b);
	moe_trace_free(t);
}

/* Token t selects expert 3 - t in every layer: stretch order is falling. */
static uint32_t sel_falling(uint32_t t, uint32_t l, uint32_t *out)
{
	(void)l;
	out[0] = 3 - t % 4;
	return 1;
}

Test(sim, basic_batch_union_listed_by_id,
     .description = "--batch 2 of 4 tokens selecting 3, 2, 1, 0: a step's union is listed by id "
		    "(the order the agent hears of it), not in stretch order")
{
	struct moe_trace *t = gen_trace(4, 2, sel_falling), *b;
	struct moe_trace_view v;
	uint32_t k;
	const uint32_t *ids;

	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	cr_assert_eq(moe_trace_batch(&v, 2, &b), 0);
	for (uint32_t l = 0; l < 2; l++) {
		ids = moe_trace_layer(&b->tokens[0], l, &k);
		cr_assert_eq(k, 2);
		cr_expect(ids[0] == 1 && ids[1] == 3, "step 0, layer %u: %u %u", l, ids[0], ids[1]);
		ids = moe_trace_layer(&b->tokens[1], l, &k);
		cr_assert_eq(k, 2);
		cr_expect(ids[0] == 0 && ids[1] == 2, "step 1, layer %u: %u %u", l, ids[0], ids[1]);
	}
	/* Sequence 1's token at step 1 is the view's token 3, which selects 0. */
	cr_expect_eq(moe_trace_batch_member(v.n, 2, 1, 1), 3);
	cr_expect_eq(moe_trace_batch_member(v.n, 2, 0, 0), 0);
	moe_trace_view_free(&v);
	moe_trace_free(b);
	moe_trace_free(t);
}

Test(sim, perf_timing_batch_default_at_least_lru_and_stream,
     .description = "h200, B = 1, 4, 16, 32 sequences at 10/25/50%: the default plan is at or "
		    "above LRU demand-only and above streaming every expert (a one-slot bank)")
{
	static const uint32_t batches[] = {1, 4, 16, 32};

	for (unsigned int n = 0; n < 2; n++) {
		struct moe_trace *t = load_tree_trace(names[n]);

		for (unsigned int b = 0; b < 4; b++) {
			double stream = run_timed(t, NULL, &default_plan, 1, "h200", batches[b])
					    .timing.modeled_speed;

			for (unsigned int i = 0; i < 3; i++) {
				uint32_t slots;
				double lru, def;

				cr_assert_eq(moe_sim_slots_for(t, capacities[i], &slots), 0);
				lru = run_timed(t, NULL, &lru_demand, slots, "h200", batches[b])
					  .timing.modeled_speed;
				def = run_timed(t, NULL, &default_plan_prefetch, slots, "h200",
						batches[b])
					  .timing.modeled_speed;
				cr_expect_geq(def, lru, "%s B=%u %.0f%%: %.4f < lru %.4f", names[n],
					      batches[b], capacities[i] * 100, def, lru);
				cr_expect_geq(def, stream, "%s B=%u %.0f%%: %.4f < stream %.4f",
					      names[n], batches[b], capacities[i] * 100, def,
					      stream);
			}
		}
		moe_trace_free(t);
	}
}

/* The decode tokens' hit rate of prompt, phase decode alone or after its prefill. */
static double decode_hit_rate(const struct moe_trace *t, const char *prompt,
			      enum moe_trace_phase phase, bool prefill_batched, double fraction)
{
	struct moe_trace_view v, vb;
	struct moe_sim_config cfg = {.policy = MOE_POLICY_DEFAULT};
	struct moe_sim_result r;
	struct moe_trace *b = NULL;

	cr_assert_eq(moe_sim_slots_for(t, fraction, &cfg.n_slots), 0);
	cr_assert_eq(moe_trace_select(t, prompt, phase, &v), 0);
	if (prefill_batched) {
		cr_assert_eq(moe_trace_prefill_batched(&v, &b), 0);
		cr_assert_lt(b->n_tokens, v.n, "the prefill became one step");
		cr_assert_eq(moe_trace_select(b, NULL, MOE_TRACE_ALL, &vb), 0);
		cr_assert_eq(moe_sim_run(&vb, &cfg, &r), 0);
		moe_trace_view_free(&vb);
	} else {
		cr_assert_eq(moe_sim_run(&v, &cfg, &r), 0);
	}
	moe_trace_view_free(&v);
	moe_trace_free(b);
	cr_assert_gt(r.decode_accesses, 0);
	return (double)r.decode_hits / (double)r.decode_accesses;
}

Test(sim, perf_prefill_does_not_flush_decode_granite,
     .description = "on each granite prompt at 10/25/50%, the default's decode-phase hit rate "
		    "after the prompt's prefill (token by token, or as one batched step) is within "
		    "0.02 of the same decode without it, or above")
{
	struct moe_trace *t = load_tree_trace("granite-3.0-1b-a400m.prefill-decode.json");

	for (uint32_t p = 0; p < t->n_prompts; p++) {
		for (unsigned int i = 0; i < 3; i++) {
			double f = capacities[i];
			double alone =
			    decode_hit_rate(t, t->prompts[p], MOE_TRACE_DECODE, false, f);
			double after = decode_hit_rate(t, t->prompts[p], MOE_TRACE_ALL, false, f);
			double batched = decode_hit_rate(t, t->prompts[p], MOE_TRACE_ALL, true, f);

			cr_expect_geq(after, alone - 0.02,
				      "%s %.0f%%: %.3f after prefill, %.3f alone", t->prompts[p],
				      f * 100, after, alone);
			cr_expect_geq(batched, alone - 0.02,
				      "%s %.0f%%: %.3f after batched prefill, %.3f alone",
				      t->prompts[p], f * 100, batched, alone);
		}
	}
	moe_trace_free(t);
}

/*
 * Routing of models not in tests/traces, generated: per layer a skewed
 * popularity over a layer-specific order of the experts, each expert of
 * the previous token kept with some probability, and an order that drifts.
 * The default's properties must hold on all of them with the same code.
 */
struct synth_shape {
	uint32_t layers, experts, top_k, tokens;
	double skew;	/* popularity ~ u^skew: 1 is uniform */
	double keep;	/* chance an expert of the previous token is used again */
	uint32_t drift; /* every drift tokens a layer's order rotates by one; 0: never */
	uint32_t phase; /* every phase tokens the order jumps by a third; 0: never */
	uint64_t seed;	/* of the routing; 0: the fixed one */
};

static const struct synth_shape synth_shapes[] = {
    {26, 256, 8, 200, 2.0, 0.3, 10, 0, 0}, /* the held-out shape of the issue */
    {48, 128, 4, 150, 3.0, 0.5, 0, 0, 0},  /* many layers, hot experts */
    {16, 64, 8, 200, 1.2, 0.1, 5, 0, 0},   /* near-uniform, drifting */
};

#define SYNTH_MAX_IDS (200 * 48 * 8)
static uint32_t synth_sel[SYNTH_MAX_IDS], synth_k;
static uint32_t synth_layers;

static uint32_t sel_synth(uint32_t t, uint32_t l, uint32_t *out)
{
	memcpy(out, &synth_sel[((size_t)t * synth_layers + l) * synth_k], sizeof(*out) * synth_k);
	return synth_k;
}

static struct moe_trace *synth_trace(const struct synth_shape *sh)
{
	uint64_t x = sh->seed ? sh->seed : 0x853c49e6748fea9bULL;

	cr_assert_leq((size_t)sh->tokens * sh->layers * sh->top_k, SYNTH_MAX_IDS);
	synth_k = sh->top_k;
	synth_layers = sh->layers;
	for (uint32_t t = 0; t < sh->tokens; t++) {
		for (uint32_t l = 0; l < sh->layers; l++) {
			uint32_t *sel = &synth_sel[((size_t)t * sh->layers + l) * sh->top_k], n = 0;
			const uint32_t *prev = t ? sel - (size_t)sh->layers * sh->top_k : NULL;
			uint32_t rot = sh->drift ? t / sh->drift : 0;

			if (sh->phase)
				rot += t / sh->phase * (sh->experts / 3 + 1);

			for (uint32_t j = 0; prev && j < sh->top_k; j++) {
				x = x * 6364136223846793005ULL + 1442695040888963407ULL;
				if ((double)(x >> 11) / 9007199254740992.0 < sh->keep)
					sel[n++] = prev[j];
			}
			while (n < sh->top_k) {
				double u;
				uint32_t e;
				bool dup = false;

				x = x * 6364136223846793005ULL + 1442695040888963407ULL;
				u = (double)(x >> 11) / 9007199254740992.0;
				/* rank -> expert: a per-layer stride, rotated by the drift */
				e = ((uint32_t)(pow(u, sh->skew) * sh->experts) * 37u + l * 11u +
				     rot) %
				    sh->experts;
				for (uint32_t j = 0; j < n; j++)
					dup |= sel[j] == e;
				if (!dup)
					sel[n++] = e;
			}
		}
	}
	return gen_trace(sh->tokens, sh->layers, sel_synth);
}

Test(sim, perf_default_generalises_to_generated_models,
     .description = "on generated routing of three other shapes (26x256 top-8, 48x128 top-4, "
		    "16x64 top-8), with both presets, the default plan is never slower than LRU "
		    "demand-only, nor prefetch than none, at 5% to 100%")
{
	static const double fractions[] = {0.05, 0.10, 0.25, 0.50, 0.75, 1.0};

	for (unsigned int s = 0; s < sizeof(synth_shapes) / sizeof(synth_shapes[0]); s++) {
		struct moe_trace *t = synth_trace(&synth_shapes[s]);

		for (unsigned int i = 0; i < 6; i++) {
			double f = fractions[i];

			for (unsigned int p = 0; p < 2; p++) {
				double sl = speed(t, NULL, &lru_demand, f, presets[p]);
				double sd = speed(t, NULL, &default_plan, f, presets[p]);
				double sp = speed(t, NULL, &default_plan_prefetch, f, presets[p]);

				cr_expect_geq(sd, sl, "shape %u %s %.0f%%: %.4f < lru %.4f", s,
					      presets[p], f * 100, sd, sl);
				cr_expect_geq(sp, sd - 1e-12,
					      "shape %u %s %.0f%%: prefetch %.5f < none %.5f", s,
					      presets[p], f * 100, sp, sd);
			}
		}
		moe_trace_free(t);
	}
}

static double synth_uniform(uint64_t *x)
{
	*x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(*x >> 11) / 9007199254740992.0;
}

/* A shape drawn from a seeded generator: layers 8-64, experts 32-512, top-k 2-8. */
static struct synth_shape synth_draw(uint64_t *x)
{
	static const uint32_t experts[] = {32, 64, 128, 256, 512}, top_k[] = {2, 4, 6, 8};
	struct synth_shape sh = {
	    .layers = 8 + (uint32_t)(synth_uniform(x) * 57),
	    .experts = experts[(uint32_t)(synth_uniform(x) * 5)],
	    .top_k = top_k[(uint32_t)(synth_uniform(x) * 4)],
	    .tokens = 150,
	    .skew = 1.0 + 3.0 * synth_uniform(x),
	    .keep = 0.6 * synth_uniform(x),
	};

	sh.drift = synth_uniform(x) < 0.5 ? 0 : 2 + (uint32_t)(synth_uniform(x) * 20);
	sh.phase = synth_uniform(x) < 0.3 ? 30 + (uint32_t)(synth_uniform(x) * 60) : 0;
	sh.seed = *x | 1;
	if ((size_t)sh.tokens * sh.layers * sh.top_k > SYNTH_MAX_IDS)
		sh.tokens = SYNTH_MAX_IDS / (sh.layers * sh.top_k);
	return sh;
}

#define SYNTH_N_DRAWN 16

Test(sim, perf_default_hit_rate_floor_on_generated_shapes,
     .description = "on the three fixed generated shapes and 16 drawn by a seeded generator "
		    "(skew, repetition, drift, phase changes), the default's demand hit rate is "
		    "at least LRU's - 0.002 at 5%, 10%, 25%, 50% and 75%")
{
	static const double fractions[] = {0.05, 0.10, 0.25, 0.50, 0.75};
	const unsigned int n_fixed = sizeof(synth_shapes) / sizeof(synth_shapes[0]);
	uint64_t x = 20261201;

	for (unsigned int s = 0; s < n_fixed + SYNTH_N_DRAWN; s++) {
		struct synth_shape sh = s < n_fixed ? synth_shapes[s] : synth_draw(&x);
		struct moe_trace *t = synth_trace(&sh);

		for (unsigned int i = 0; i < sizeof(fractions) / sizeof(fractions[0]); i++) {
			uint32_t slots = (uint32_t)(fractions[i] * sh.layers * sh.experts);
			struct moe_sim_result lru, def;

			sim(t, "lru", slots, false, false, &lru);
			sim(t, NULL, slots, false, false, &def);
			cr_expect_geq(def.hit_rate, lru.hit_rate - 0.002,
				      "shape %u (%ux%u top-%u, skew %.2f, keep %.2f, drift %u, "
				      "phase %u) %.0f%%: %.4f < lru %.4f - 0.002",
				      s, sh.layers, sh.experts, sh.top_k, sh.skew, sh.keep,
				      sh.drift, sh.phase, fractions[i] * 100, def.hit_rate,
				      lru.hit_rate);
		}
		moe_trace_free(t);
	}
}

/* Two experts of 16 a step, drifting over tokens, 4 layers. */
static uint32_t sel_drift(uint32_t t, uint32_t l, uint32_t *out)
{
	out[0] = (t / 7 + l) % 16;
	out[1] = (t * 5 + 3 * l) % 16;
	if (out[1] == out[0])
		out[1] = (out[1] + 1) % 16;
	return 2;
}

static void sim_tiers(const struct moe_trace *t, uint32_t n, const uint32_t *slots,
		      enum agent_tier_placement placement, struct moe_sim_tiers_result *r)
{
	struct moe_trace_view v;
	struct moe_sim_tiers_config cfg = {.policy = "lru", .n_tiers = n, .placement = placement};
	int ret;

	memcpy(cfg.slots, slots, sizeof(*slots) * n);
	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	ret = moe_sim_run_tiers(&v, &cfg, r);
	cr_assert_eq(ret, 0, "%d", ret);
	moe_trace_view_free(&v);
}

Test(sim, basic_one_tier_is_the_one_bank_simulator,
     .description = "--tiers with one tier hits exactly as the one-bank simulator does")
{
	struct moe_trace *t = gen_trace(200, 4, sel_drift);
	const uint32_t slots[] = {9};
	struct moe_sim_tiers_result rt;
	struct moe_sim_result r;

	sim(t, "lru", 9, false, false, &r);
	sim_tiers(t, 1, slots, AGENT_TIERS_DYNAMIC, &rt);
	cr_expect_eq(rt.tiers[0].hits, r.hits);
	cr_expect_eq(rt.cold, r.misses);
	moe_trace_free(t);
}

Test(sim, basic_lower_tiers_catch_tier_zero_victims,
     .description = "with lower tiers fewer accesses are cold: demoted experts hit below")
{
	struct moe_trace *t = gen_trace(200, 4, sel_drift);
	const uint32_t one[] = {9}, three[] = {9, 12, 12};
	struct moe_sim_tiers_result r1, r3;

	sim_tiers(t, 1, one, AGENT_TIERS_DYNAMIC, &r1);
	sim_tiers(t, 3, three, AGENT_TIERS_DYNAMIC, &r3);
	cr_expect_eq(r3.accesses, r3.hits + r3.cold);
	cr_expect_lt(r3.cold, r1.cold);
	cr_expect_gt(r3.tiers[1].hits + r3.tiers[2].hits, 0);
	cr_expect_gt(r3.tiers[1].demotions, 0);
	cr_expect_gt(r3.tiers[0].promotions, 0);
	moe_trace_free(t);
}

Test(sim, bad_input_tiers,
     .description = "tiers without slots, over all experts, or with an oracle policy are "
		    "refused")
{
	struct moe_trace *t = gen_trace(10, 4, sel_drift);
	struct moe_trace_view v;
	struct moe_sim_tiers_config cfg = {.n_tiers = 2, .slots = {4, 0}};
	struct moe_sim_tiers_result r;

	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	cr_expect_eq(moe_sim_run_tiers(&v, &cfg, &r), -EINVAL);
	cfg.slots[1] = 61; /* 4 + 61 > 4 x 16 */
	cr_expect_eq(moe_sim_run_tiers(&v, &cfg, &r), -EINVAL);
	cfg.slots[1] = 4;
	cfg.n_tiers = 0;
	cr_expect_eq(moe_sim_run_tiers(&v, &cfg, &r), -EINVAL);
	cfg.n_tiers = 2;
	cfg.policy = "belady";
	cr_expect_eq(moe_sim_run_tiers(&v, &cfg, &r), -EOPNOTSUPP);
	cfg.policy = "nope";
	cr_expect_eq(moe_sim_run_tiers(&v, &cfg, &r), -ENOENT);
	moe_trace_view_free(&v);
	moe_trace_free(t);
}

Test(sim, basic_tiers_static_drops_below_dynamic_cascades,
     .description = "static placement drops a lower tier's victims; dynamic cascades tier 1's "
		    "into tier 2")
{
	struct moe_trace *t = gen_trace(200, 4, sel_drift);
	const uint32_t slots[] = {9, 6, 6};
	struct moe_sim_tiers_result rd, rs;

	sim_tiers(t, 3, slots, AGENT_TIERS_DYNAMIC, &rd);
	sim_tiers(t, 3, slots, AGENT_TIERS_STATIC, &rs);
	cr_expect_eq(rd.tiers[1].drops, 0);
	cr_expect_gt(rd.tiers[2].drops, 0);
	cr_expect_gt(rs.tiers[1].drops, 0);
	cr_expect_gt(rs.tiers[2].demotions, 0);
	/* Every expert has an owner: tier 0 never drops under static placement. */
	cr_expect_eq(rs.tiers[0].drops, 0);
	moe_trace_free(t);
}

Test(sim, basic_tiers_time_model,
     .description = "per-tier time is layer_us a step on tier 0, hits x tier_us below, "
		    "cold x the CPU cost on the host")
{
	struct moe_trace *t = gen_trace(100, 4, sel_drift);
	struct moe_timing_config tc = {.link_gbps = 50,
				       .copy_engines = 1,
				       .cpu_gbps = 100,
				       .layer_us = 10,
				       .expert_bytes = 1000000};
	struct moe_sim_tiers_config cfg = {
	    .policy = "lru", .n_tiers = 3, .slots = {9, 6, 6}, .timing = &tc, .tier_us = 3.5};
	struct moe_sim_tiers_result r;
	struct moe_trace_view v;

	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	cr_assert_eq(moe_sim_run_tiers(&v, &cfg, &r), 0);
	cr_expect_float_eq(r.tiers[0].time_us, 10.0 * (double)r.steps, 1e-6);
	for (uint32_t i = 1; i < 3; i++)
		cr_expect_float_eq(r.tiers[i].time_us, 3.5 * (double)r.tiers[i].hits, 1e-6);
	cr_expect_float_eq(r.host_us, 10.0 * (double)r.cold, 1e-6); /* 1 MB at 100 GB/s */
	cr_expect_geq(r.total_us, r.resident_us);
	cr_expect_leq(r.total_us, r.tiers[0].time_us + r.tiers[1].time_us + r.tiers[2].time_us +
				      r.host_us + 1e-6);
	moe_trace_view_free(&v);
	moe_trace_free(t);
}

/*
 * The simulator's slot choice is the agent's (agent/slots.c), so
 * `moecache-trace sim` and moecached choose the same victims by
 * construction: agent_slots_choose is wrapped at link time
 * (-Wl,--wrap, tests/unit/trace/build.mk) to count its answers, and every
 * fill and every eviction the simulator reports must be one of them. A
 * simulator with a slot choice of its own fails here.
 */
static struct {
	uint64_t chosen;  /* slots handed out */
	uint64_t victims; /* of them, slots that held an expert */
} sim_choices;

int __real_agent_slots_choose(struct agent_slots *s, uint32_t idx, bool prefetch);
int __wrap_agent_slots_choose(struct agent_slots *s, uint32_t idx, bool prefetch);

int __wrap_agent_slots_choose(struct agent_slots *s, uint32_t idx, bool prefetch)
{
	int slot = __real_agent_slots_choose(s, idx, prefetch);

	if (slot >= 0) {
		sim_choices.chosen++;
		if (moecache_map_owner(s->map, (uint32_t)slot) != MOECACHE_NONE)
			sim_choices.victims++;
	}
	return slot;
}

Test(sim, basic_victims_are_the_agents_choice,
     .description = "every slot the simulator fills and every victim it evicts is the answer of "
		    "the agent's agent_slots_choose, for lru, lfu and the default, with prefetch")
{
	static const char *const policies[] = {"lru", "lfu", NULL};
	struct moe_trace *t = gen_trace(64, 4, sel_random);

	for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
		for (int prefetch = 0; prefetch < 2; prefetch++) {
			const char *name = policies[i] ? policies[i] : "default";
			struct moe_sim_result r;

			memset(&sim_choices, 0, sizeof(sim_choices));
			sim(t, policies[i], 24, false, prefetch, &r);
			cr_assert_gt(r.evictions, 0, "%s: nothing evicted", name);
			cr_expect_eq(sim_choices.victims, r.evictions,
				     "%s, prefetch %d: %lu evictions, %lu from agent_slots_choose",
				     name, prefetch, (unsigned long)r.evictions,
				     (unsigned long)sim_choices.victims);
			cr_expect_eq(sim_choices.chosen, r.misses - r.bypassed + r.prefetch_issued,
				     "%s, prefetch %d: %lu fills, %lu from agent_slots_choose",
				     name, prefetch,
				     (unsigned long)(r.misses - r.bypassed + r.prefetch_issued),
				     (unsigned long)sim_choices.chosen);
		}
	}
	moe_trace_free(t);
}
