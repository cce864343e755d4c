// SPDX-License-Identifier: MIT
/*
 * Residency across tiers (agent/tiers.h) over in-memory map regions: an
 * expert in at most one tier, tier 0's victim demoted instead of dropped,
 * promotion into tier 0, static slices respected, bad specs refused.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "agent/memmap.h"
#include "agent/tiers.h"

struct tiers_fixture {
	uint32_t n;
	struct agent_memmap map[AGENT_TIERS_MAX];
	struct moe_policy *policy[AGENT_TIERS_MAX];
	struct agent_slots slots[AGENT_TIERS_MAX];
	struct agent_tiers t;
	uint32_t moves, clears;
};

static void fx_move(void *ctx, uint32_t tier, uint32_t slot, uint32_t idx, uint32_t from,
		      uint32_t from_slot)
{
	struct tiers_fixture *x = ctx;

	(void)from;
	(void)from_slot;
	agent_memmap_filling(&x->map[tier], idx, slot);
	agent_memmap_publish(&x->map[tier], idx, slot);
	x->moves++;
}

static void fx_clear(void *ctx, uint32_t tier, uint32_t slot)
{
	struct tiers_fixture *x = ctx;

	agent_memmap_clear(&x->map[tier], slot);
	x->clears++;
}

static const struct agent_tier_ops fx_ops = {.move = fx_move, .clear = fx_clear};

/* n tiers of slots[i] each over 1 layer x n_experts, LRU in every tier. */
static void fixture_init(struct tiers_fixture *x, uint32_t n, const uint32_t *slots,
			 uint32_t n_experts, enum agent_tier_placement placement)
{
	struct agent_slots *views[AGENT_TIERS_MAX];

	memset(x, 0, sizeof(*x));
	x->n = n;
	for (uint32_t i = 0; i < n; i++) {
		struct moe_policy_config pc = {
		    .n_layers = 1, .n_local = n_experts, .n_slots = slots[i]};

		cr_assert_eq(agent_memmap_init(&x->map[i], 1, n_experts, 0, n_experts, slots[i]),
			     0);
		cr_assert_eq(moe_policy_create("lru", &pc, &x->policy[i]), 0);
		cr_assert_eq(agent_slots_init(&x->slots[i], &x->map[i].view, x->policy[i]), 0);
		views[i] = &x->slots[i];
	}
	cr_assert_eq(agent_tiers_init(&x->t, n, views, placement, &fx_ops, x), 0);
}

static void fixture_fini(struct tiers_fixture *x)
{
	agent_tiers_destroy(&x->t);
	for (uint32_t i = 0; i < x->n; i++) {
		agent_slots_destroy(&x->slots[i]);
		moe_policy_destroy(x->policy[i]);
		agent_memmap_free(&x->map[i]);
	}
}

/* The maps and agent_tiers_where agree, and no expert is mapped in two tiers. */
static void check_one_tier_each(struct tiers_fixture *x)
{
	for (uint32_t idx = 0; idx < x->t.n_idx; idx++) {
		uint32_t slot, tier = agent_tiers_where(&x->t, idx, &slot), seen = 0;

		for (uint32_t i = 0; i < x->n; i++) {
			uint32_t m = x->map[i].map[idx];

			if (m == MOECACHE_NONE)
				continue;
			seen++;
			cr_assert_eq(x->map[i].owner[m], idx, "tier %u slot %u", i, m);
			cr_assert_eq(tier, i, "expert %u mapped in tier %u, located in %u", idx, i,
				     tier);
			cr_assert_eq(slot, m);
		}
		cr_assert_leq(seen, 1, "expert %u in %u tiers", idx, seen);
		if (!seen)
			cr_assert_eq(tier, AGENT_TIER_NONE, "expert %u located but not mapped",
				     idx);
	}
}

/* Accesses idx at step (every tier's policy), then fills it if cold. */
static void touch(struct tiers_fixture *x, uint32_t idx, uint64_t step)
{
	agent_tiers_new_round(&x->t, step);
	agent_tiers_access(&x->t, idx, step);
	if (agent_tiers_where(&x->t, idx, NULL) == AGENT_TIER_NONE)
		cr_assert_geq(agent_tiers_fill(&x->t, idx), 0);
}

Test(tiers, basic_miss_fills_tier_zero, .description = "a miss everywhere goes into tier 0")
{
	struct tiers_fixture x;
	const uint32_t slots[] = {2, 2};

	fixture_init(&x, 2, slots, 8, AGENT_TIERS_DYNAMIC);
	touch(&x, 3, 0);
	cr_expect_eq(agent_tiers_where(&x.t, 3, NULL), 0);
	cr_expect_eq(x.t.stats[0].fills, 1);
	check_one_tier_each(&x);
	fixture_fini(&x);
}

Test(tiers, basic_victim_demoted_not_dropped,
     .description = "tier 0's victim moves into tier 1 instead of leaving the banks")
{
	struct tiers_fixture x;
	const uint32_t slots[] = {1, 2};

	fixture_init(&x, 2, slots, 8, AGENT_TIERS_DYNAMIC);
	touch(&x, 1, 0);
	touch(&x, 2, 1);
	cr_expect_eq(agent_tiers_where(&x.t, 2, NULL), 0);
	cr_expect_eq(agent_tiers_where(&x.t, 1, NULL), 1, "the victim was dropped");
	cr_expect_eq(x.t.stats[1].demotions, 1);
	cr_expect_eq(x.t.stats[0].drops, 0);
	check_one_tier_each(&x);
	fixture_fini(&x);
}

Test(tiers, basic_last_tier_drops_to_host,
     .description = "victims cascade down and only the last tier's leave the banks")
{
	struct tiers_fixture x;
	const uint32_t slots[] = {1, 1, 1};

	fixture_init(&x, 3, slots, 8, AGENT_TIERS_DYNAMIC);
	for (uint32_t i = 0; i < 4; i++)
		touch(&x, i, i);
	cr_expect_eq(agent_tiers_where(&x.t, 3, NULL), 0);
	cr_expect_eq(agent_tiers_where(&x.t, 2, NULL), 1);
	cr_expect_eq(agent_tiers_where(&x.t, 1, NULL), 2);
	cr_expect_eq(agent_tiers_where(&x.t, 0, NULL), AGENT_TIER_NONE);
	cr_expect_eq(x.t.stats[2].drops, 1);
	cr_expect_eq(x.t.stats[0].drops + x.t.stats[1].drops, 0);
	check_one_tier_each(&x);
	fixture_fini(&x);
}

Test(tiers, basic_promotion_swaps_with_tier_zero_victim,
     .description = "a lower-tier expert tier 0 admits moves up, and tier 0's victim "
		    "takes its freed lower slot")
{
	struct tiers_fixture x;
	const uint32_t slots[] = {1, 1};

	fixture_init(&x, 2, slots, 8, AGENT_TIERS_DYNAMIC);
	touch(&x, 1, 0);
	touch(&x, 2, 1); /* 1 demoted */
	touch(&x, 1, 2); /* a hit in tier 1 */
	cr_assert_eq(agent_tiers_where(&x.t, 1, NULL), 1);
	agent_tiers_new_round(&x.t, 2);
	cr_assert_eq(agent_tiers_promote(&x.t, 1), 0);
	cr_expect_eq(agent_tiers_where(&x.t, 1, NULL), 0);
	cr_expect_eq(agent_tiers_where(&x.t, 2, NULL), 1, "the victim was dropped");
	cr_expect_eq(x.t.stats[0].promotions, 1);
	cr_expect_eq(x.t.stats[1].drops, 0);
	check_one_tier_each(&x);
	fixture_fini(&x);
}

Test(tiers, basic_promotion_refused_when_tier_zero_is_pinned,
     .description = "no promotion over a pinned tier 0: the expert stays where it is")
{
	struct tiers_fixture x;
	const uint32_t slots[] = {1, 1};
	uint32_t slot;

	fixture_init(&x, 2, slots, 8, AGENT_TIERS_DYNAMIC);
	touch(&x, 1, 0);
	touch(&x, 2, 1);
	agent_tiers_where(&x.t, 2, &slot);
	agent_memmap_pin(&x.map[0], slot, 3);
	agent_tiers_new_round(&x.t, 2);
	cr_expect_eq(agent_tiers_promote(&x.t, 1), -ENOSPC);
	cr_expect_eq(agent_tiers_where(&x.t, 1, NULL), 1);
	cr_expect_eq(agent_tiers_where(&x.t, 2, NULL), 0);
	cr_expect_eq(x.t.stats[0].promotions, 0);
	check_one_tier_each(&x);
	fixture_fini(&x);
}

Test(tiers, bad_input_promote_not_in_a_lower_tier,
     .description = "promoting a tier-0 or cold expert is -EINVAL; filling a resident one "
		    "is -EEXIST")
{
	struct tiers_fixture x;
	const uint32_t slots[] = {2, 2};

	fixture_init(&x, 2, slots, 8, AGENT_TIERS_DYNAMIC);
	touch(&x, 1, 0);
	cr_expect_eq(agent_tiers_promote(&x.t, 1), -EINVAL);
	cr_expect_eq(agent_tiers_promote(&x.t, 5), -EINVAL);
	cr_expect_eq(agent_tiers_promote(&x.t, 99), -EINVAL);
	cr_expect_eq(agent_tiers_fill(&x.t, 1), -EEXIST);
	cr_expect_eq(agent_tiers_fill(&x.t, 99), -EINVAL);
	check_one_tier_each(&x);
	fixture_fini(&x);
}

Test(tiers, basic_many_moves_keep_one_tier_each,
     .description = "a long mixed run of fills and promotions never maps an expert twice")
{
	struct tiers_fixture x;
	const uint32_t slots[] = {3, 5, 4};
	uint64_t rng = 12345;

	fixture_init(&x, 3, slots, 32, AGENT_TIERS_DYNAMIC);
	for (uint64_t step = 0; step < 2000; step++) {
		uint32_t idx;

		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		idx = (uint32_t)(rng >> 33) % (rng >> 62 ? 8 : 32);
		touch(&x, idx, step);
		if (agent_tiers_where(&x.t, idx, NULL) > 0 &&
		    agent_tiers_where(&x.t, idx, NULL) != AGENT_TIER_NONE)
			agent_tiers_promote(&x.t, idx);
		check_one_tier_each(&x);
	}
	cr_expect_gt(x.t.stats[0].promotions, 0);
	cr_expect_gt(x.t.stats[2].drops, 0);
	fixture_fini(&x);
}

Test(tiers, basic_static_slices_respected,
     .description = "static placement: tier 0's victims go only to the tier owning their "
		    "slice, lower tiers' victims are dropped")
{
	struct tiers_fixture x;
	const uint32_t slots[] = {1, 1, 1};

	/* 8 experts, two lower tiers of equal size: tier 1 owns 0..3, tier 2 owns 4..7. */
	fixture_init(&x, 3, slots, 8, AGENT_TIERS_STATIC);
	for (uint32_t e = 0; e < 8; e++)
		cr_expect_eq(agent_tiers_owner(&x.t, e), e < 4 ? 1u : 2u, "expert %u", e);
	touch(&x, 0, 0);
	touch(&x, 1, 1); /* 0 into its owner, tier 1 */
	cr_expect_eq(agent_tiers_where(&x.t, 0, NULL), 1);
	touch(&x, 5, 2); /* 1 into tier 1 over 0: 0 dropped, not moved to tier 2 */
	cr_expect_eq(agent_tiers_where(&x.t, 1, NULL), 1);
	cr_expect_eq(agent_tiers_where(&x.t, 0, NULL), AGENT_TIER_NONE);
	cr_expect_eq(x.t.stats[1].drops, 1);
	touch(&x, 2, 3); /* 5 into tier 2 */
	cr_expect_eq(agent_tiers_where(&x.t, 5, NULL), 2);
	cr_expect_eq(x.t.stats[2].demotions, 1);
	check_one_tier_each(&x);
	fixture_fini(&x);
}

Test(tiers, basic_static_slices_follow_slot_counts,
     .description = "static slices are contiguous, in tier order, in proportion to slots")
{
	struct tiers_fixture x;
	const uint32_t slots[] = {1, 1, 3};

	fixture_init(&x, 3, slots, 8, AGENT_TIERS_STATIC);
	cr_expect_eq(x.t.slice_begin[1], 0);
	cr_expect_eq(x.t.slice_end[1], 2);
	cr_expect_eq(x.t.slice_begin[2], 2);
	cr_expect_eq(x.t.slice_end[2], 8);
	fixture_fini(&x);
}

Test(tiers, bad_input_static_slice_empty,
     .description = "static placement with more lower tiers than a layer has experts is -EINVAL")
{
	struct agent_memmap map[4];
	struct moe_policy *policy[4];
	struct agent_slots slots[4];
	struct agent_slots *views[4];
	struct agent_tiers t;

	for (uint32_t i = 0; i < 4; i++) {
		struct moe_policy_config pc = {.n_layers = 1, .n_local = 2, .n_slots = 1};

		cr_assert_eq(agent_memmap_init(&map[i], 1, 2, 0, 2, 1), 0);
		cr_assert_eq(moe_policy_create("lru", &pc, &policy[i]), 0);
		cr_assert_eq(agent_slots_init(&slots[i], &map[i].view, policy[i]), 0);
		views[i] = &slots[i];
	}
	cr_expect_eq(agent_tiers_init(&t, 4, views, AGENT_TIERS_STATIC, &fx_ops, NULL), -EINVAL);
	cr_expect_eq(agent_tiers_init(&t, 0, views, AGENT_TIERS_DYNAMIC, &fx_ops, NULL), -EINVAL);
	cr_expect_eq(
	    agent_tiers_init(&t, AGENT_TIERS_MAX + 1, views, AGENT_TIERS_DYNAMIC, &fx_ops, NULL),
	    -EINVAL);
	for (uint32_t i = 0; i < 4; i++) {
		agent_slots_destroy(&slots[i]);
		moe_policy_destroy(policy[i]);
		agent_memmap_free(&map[i]);
	}
}

Test(tiers, bad_input_spec, .description = "bad --tiers specs are refused with a reason")
{
	static const char *const bad[] = {
	    "",
	    "0.6,0.5",
	    "0",
	    "-0.1",
	    "abc",
	    "0.1,,0.2",
	    "0.1,",
	    "1.5",
	    "nan",
	    "0.1 ",
	    "0.01,0.01,0.01,0.01,0.01,0.01,0.01,0.01,0.01",
	};

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		double f[AGENT_TIERS_MAX];
		uint32_t n;
		char err[256] = "";

		cr_expect_eq(agent_tiers_parse(bad[i], f, &n, err, sizeof(err)), -EINVAL, "\"%s\"",
			     bad[i]);
		cr_expect_neq(err[0], '\0', "no reason for \"%s\"", bad[i]);
	}
}

Test(tiers, basic_spec_any_size_order,
     .description = "sizes need not shrink or grow: the order is speed, fastest first")
{
	double f[AGENT_TIERS_MAX];
	uint32_t n;
	char err[256];

	cr_assert_eq(agent_tiers_parse("0.1,0.2,0.2", f, &n, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(n, 3);
	cr_expect_float_eq(f[2], 0.2, 1e-12);
	cr_expect_eq(agent_tiers_parse("0.5,0.1", f, &n, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(agent_tiers_parse("0.5,0.5", f, &n, err, sizeof(err)), 0, "%s", err);
}
