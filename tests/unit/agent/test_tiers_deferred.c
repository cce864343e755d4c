// SPDX-License-Identifier: MIT
/*
 * Tier decisions as the agent runs them (agent/tiers.h with
 * deferred_commit): banks are views of one map region (one global slot
 * space, agent_slots_init_bank), a decision's moves come deepest first,
 * a moved-into slot stays out of every choice until its commit, and the
 * map is the truth agent_tiers_sync goes back to.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "agent/memmap.h"
#include "agent/tiers.h"

#define MAX_MOVES 16

struct move {
	uint32_t tier, slot, idx, from;
};

struct deferred {
	uint32_t n;
	uint32_t begin[AGENT_TIERS_MAX];
	struct agent_memmap map; /* every bank's slots, as the driver lays them out */
	struct moe_policy *policy[AGENT_TIERS_MAX];
	struct agent_slots slots[AGENT_TIERS_MAX];
	struct agent_tiers t;
	struct move moves[MAX_MOVES];
	uint32_t n_moves;
};

static void df_move(void *ctx, uint32_t tier, uint32_t slot, uint32_t idx, uint32_t from,
		    uint32_t from_slot)
{
	struct deferred *x = ctx;

	(void)from_slot;
	cr_assert_lt(x->n_moves, MAX_MOVES);
	x->moves[x->n_moves++] = (struct move){tier, slot, idx, from};
}

static void df_clear(void *ctx, uint32_t tier, uint32_t slot)
{
	(void)ctx;
	(void)tier;
	(void)slot;
}

static const struct agent_tier_ops df_ops = {
    .move = df_move, .clear = df_clear, .deferred_commit = true};

static void df_init(struct deferred *x, uint32_t n, const uint32_t *slots, uint32_t n_experts)
{
	struct agent_slots *views[AGENT_TIERS_MAX];
	uint32_t total = 0;

	memset(x, 0, sizeof(*x));
	x->n = n;
	for (uint32_t i = 0; i < n; i++) {
		x->begin[i] = total;
		total += slots[i];
	}
	cr_assert_eq(agent_memmap_init(&x->map, 1, n_experts, 0, n_experts, total), 0);
	for (uint32_t i = 0; i < n; i++) {
		struct moe_policy_config pc = {
		    .n_layers = 1, .n_local = n_experts, .n_slots = slots[i]};

		cr_assert_eq(moe_policy_create("lru", &pc, &x->policy[i]), 0);
		cr_assert_eq(agent_slots_init_bank(&x->slots[i], &x->map.view, x->policy[i],
						   x->begin[i], slots[i]),
			     0);
		x->slots[i].hold_pending = true;
		views[i] = &x->slots[i];
	}
	cr_assert_eq(agent_tiers_init(&x->t, n, views, AGENT_TIERS_DYNAMIC, &df_ops, x), 0);
}

static void df_fini(struct deferred *x)
{
	agent_tiers_destroy(&x->t);
	for (uint32_t i = 0; i < x->n; i++) {
		agent_slots_destroy(&x->slots[i]);
		moe_policy_destroy(x->policy[i]);
	}
	agent_memmap_free(&x->map);
}

/* Runs the recorded moves as the driver would: EVICT (MOVE), then COMMIT. */
static void df_run(struct deferred *x)
{
	for (uint32_t i = 0; i < x->n_moves; i++) {
		const struct move *m = &x->moves[i];
		uint32_t global = x->begin[m->tier] + m->slot, old = x->map.map[m->idx];

		if (x->map.owner[global] != MOECACHE_NONE)
			agent_memmap_clear(&x->map, global); /* a dropped victim */
		if (old != MOECACHE_NONE)
			agent_memmap_clear(&x->map, old); /* the slot a move leaves */
		agent_memmap_publish(&x->map, m->idx, global);
		agent_tiers_committed(&x->t, m->tier, m->slot);
	}
	x->n_moves = 0;
}

static void df_fill(struct deferred *x, uint32_t idx, uint64_t step)
{
	agent_tiers_new_round(&x->t, step);
	agent_tiers_access(&x->t, idx, step);
	cr_assert_geq(agent_tiers_fill(&x->t, idx), 0, "fill of %u", idx);
}

Test(tiers_deferred, basic_moves_deepest_first,
     .description = "a fill that demotes and cascades names the lowest move first")
{
	const uint32_t slots[] = {1, 1, 1};
	struct deferred x;

	df_init(&x, 3, slots, 8);
	df_fill(&x, 1, 1);
	df_run(&x);
	df_fill(&x, 2, 2);
	df_run(&x);
	df_fill(&x, 3, 3);
	cr_assert_eq(x.n_moves, 3);
	cr_expect_eq(x.moves[0].tier, 2);
	cr_expect_eq(x.moves[0].idx, 1);
	cr_expect_eq(x.moves[0].from, 1);
	cr_expect_eq(x.moves[1].tier, 1);
	cr_expect_eq(x.moves[1].idx, 2);
	cr_expect_eq(x.moves[1].from, 0);
	cr_expect_eq(x.moves[2].tier, 0);
	cr_expect_eq(x.moves[2].idx, 3);
	cr_expect_eq(x.moves[2].from, AGENT_TIER_NONE);
	df_run(&x);
	cr_expect_eq(x.map.map[3], x.begin[0]);
	cr_expect_eq(x.map.map[2], x.begin[1]);
	cr_expect_eq(x.map.map[1], x.begin[2]);
	df_fini(&x);
}

Test(tiers_deferred, basic_pending_slot_out_of_choice,
     .description = "a slot a move goes into is neither free nor a victim until its commit")
{
	const uint32_t slots[] = {1, 4};
	struct deferred x;

	df_init(&x, 2, slots, 8);
	df_fill(&x, 1, 1);
	df_run(&x);
	df_fill(&x, 2, 2);
	/* Not run: the driver still shows expert 1, resident and unpinned, in tier 0's slot. */
	x.n_moves = 0;
	agent_tiers_new_round(&x.t, 3);
	cr_expect_eq(agent_tiers_fill(&x.t, 3), -ENOSPC, "the pending slot was given twice");
	cr_expect_eq(x.n_moves, 0);
	df_fini(&x);
}

Test(tiers_deferred, bad_input_promote_while_moving,
     .description = "an expert whose demotion has not finished cannot be promoted (-EBUSY)")
{
	const uint32_t slots[] = {1, 2};
	struct deferred x;

	df_init(&x, 2, slots, 8);
	df_fill(&x, 1, 1);
	df_run(&x);
	df_fill(&x, 2, 2);
	cr_assert_eq(agent_tiers_where(&x.t, 1, NULL), 1);
	cr_expect_eq(agent_tiers_promote(&x.t, 1), -EBUSY);
	df_fini(&x);
}

Test(tiers_deferred, basic_sync_follows_the_map,
     .description = "agent_tiers_sync forgets an expert flushed behind its back, keeps the rest")
{
	const uint32_t slots[] = {1, 2};
	uint32_t slot;
	struct deferred x;

	df_init(&x, 2, slots, 8);
	df_fill(&x, 1, 1);
	df_run(&x);
	df_fill(&x, 2, 2);
	df_run(&x);
	agent_memmap_clear(&x.map, x.map.map[1]);
	cr_expect_eq(agent_tiers_sync(&x.t), 1);
	cr_expect_eq(agent_tiers_where(&x.t, 1, NULL), AGENT_TIER_NONE);
	cr_expect_eq(agent_tiers_where(&x.t, 2, &slot), 0);
	cr_expect_eq(slot, 0);
	df_fini(&x);
}

Test(tiers_deferred, basic_bank_view_offsets,
     .description = "a bank's view numbers its slots from 0 and reads the map at its offset")
{
	struct agent_memmap map;
	struct moe_policy *policy;
	struct moe_policy_config pc = {.n_layers = 1, .n_local = 8, .n_slots = 3};
	struct agent_slots s;

	cr_assert_eq(agent_memmap_init(&map, 1, 8, 0, 8, 10), 0);
	cr_assert_eq(moe_policy_create("lru", &pc, &policy), 0);
	cr_assert_eq(agent_slots_init_bank(&s, &map.view, policy, 4, 3), 0);
	agent_memmap_publish(&map, 6, 5);
	agent_memmap_publish(&map, 7, 2); /* another bank's slot */
	cr_expect_eq(agent_slots_sync(&s), 1);
	cr_expect_eq(s.held[1], 6);
	cr_expect_eq(agent_slots_find_free(&s), 0);
	agent_slots_destroy(&s);
	cr_expect_eq(agent_slots_init_bank(&s, &map.view, policy, 8, 3), -EINVAL,
		     "a view past the map");
	moe_policy_destroy(policy);
	agent_memmap_free(&map);
}
