// SPDX-License-Identifier: MIT
/*
 * The agent's slot choice through the policy interface, against a map
 * region in memory: free slots first, victims only among the slots that
 * may be taken, no eviction when the bank holds everything.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "agent/slots.h"
#include "agent/memmap.h"

struct slots_fixture {
	struct agent_memmap f;
	struct moe_policy *policy;
	struct agent_slots s;
};

/* A pool of n_layers x n_experts with n_slots; the policy is the agent's default. */
static void fixture_init(struct slots_fixture *x, uint32_t n_layers, uint32_t n_experts,
			 uint32_t n_slots)
{
	struct moe_policy_config pc = {
	    .n_layers = n_layers, .n_local = n_experts, .n_slots = n_slots};

	cr_assert_eq(agent_memmap_init(&x->f, n_layers, n_experts, 0, n_experts, n_slots), 0);
	cr_assert_eq(moe_policy_create(MOE_POLICY_DEFAULT, &pc, &x->policy), 0);
	cr_assert_eq(agent_slots_init(&x->s, &x->f.view, x->policy), 0);
}

static void fixture_fini(struct slots_fixture *x)
{
	agent_slots_destroy(&x->s);
	moe_policy_destroy(x->policy);
	agent_memmap_free(&x->f);
}

/* Every slot s holds idx s, as after a warm restart; the agent learns it by sync. */
static void fill_all(struct slots_fixture *x)
{
	for (uint32_t s = 0; s < x->f.hdr->n_slots; s++)
		agent_memmap_publish(&x->f, s, s);
	cr_assert_eq(agent_slots_sync(&x->s), x->f.hdr->n_slots);
}

Test(slots, basic_free_slot_first, .description = "a free slot is chosen while there is one")
{
	struct slots_fixture x;
	int slot;

	fixture_init(&x, 2, 8, 4);
	agent_memmap_publish(&x.f, 0, 0);
	agent_memmap_publish(&x.f, 1, 1);
	agent_slots_sync(&x.s);
	slot = agent_slots_choose(&x.s, 5, false);
	cr_assert(slot == 2 || slot == 3, "chose slot %d", slot);
	fixture_fini(&x);
}

Test(slots, basic_victim_skips_pinned, .description = "the victim is the only unpinned slot")
{
	struct slots_fixture x;

	fixture_init(&x, 2, 8, 4);
	fill_all(&x);
	for (uint32_t s = 0; s < 4; s++)
		x.f.pins[s] = s == 2 ? 0 : 1;
	agent_slots_new_round(&x.s, 0);
	cr_assert_eq(agent_slots_choose(&x.s, 9, false), 2);
	fixture_fini(&x);
}

Test(slots, basic_all_pinned_is_enospc, .description = "with every slot pinned there is no victim")
{
	struct slots_fixture x;

	fixture_init(&x, 2, 8, 4);
	fill_all(&x);
	for (uint32_t s = 0; s < 4; s++)
		x.f.pins[s] = 1;
	agent_slots_new_round(&x.s, 0);
	cr_assert_eq(agent_slots_choose(&x.s, 9, false), -ENOSPC);
	fixture_fini(&x);
}

Test(slots, basic_filling_slot_never_victim, .description = "a slot being filled is never a victim")
{
	struct slots_fixture x;

	fixture_init(&x, 2, 8, 2);
	agent_memmap_publish(&x.f, 0, 0);
	agent_slots_sync(&x.s);
	/* Slot 1 is taken for idx 3 and still copying. */
	agent_memmap_filling(&x.f, 3, 1);
	agent_slots_taken(&x.s, 1, 3, false);
	x.f.pins[0] = 1;
	agent_slots_new_round(&x.s, 0);
	cr_assert_eq(agent_slots_choose(&x.s, 9, false), -ENOSPC);
	cr_assert(agent_slots_is_filling(&x.s, 3));
	fixture_fini(&x);
}

Test(slots, basic_prefetch_spares_current_step,
     .description = "a prefetch never evicts a slot used in the current step; a demand may")
{
	struct slots_fixture x;

	fixture_init(&x, 2, 8, 4);
	fill_all(&x);
	/* Every slot was pinned after the step began (clock 100). */
	for (uint32_t s = 0; s < 4; s++)
		x.f.last_use[s] = 101 + s;
	agent_slots_new_round(&x.s, 100);
	cr_assert_eq(agent_slots_choose(&x.s, 9, true), -ENOSPC);
	cr_assert_geq(agent_slots_choose(&x.s, 9, false), 0);
	/* One slot last used before the step: the prefetch may take that one only. */
	x.f.last_use[1] = 50;
	cr_assert_eq(agent_slots_choose(&x.s, 9, true), 1);
	fixture_fini(&x);
}

Test(slots, basic_bank_holds_all_never_evicts,
     .description = "when the bank holds every expert, choose never asks for a victim")
{
	struct slots_fixture x;

	/* 1 x 4 experts and 4 slots, all of them filling: nothing may be evicted. */
	fixture_init(&x, 1, 4, 4);
	for (uint32_t s = 0; s < 4; s++) {
		agent_memmap_filling(&x.f, s, s);
		agent_slots_taken(&x.s, s, s, false);
	}
	/* Even a resident, unpinned slot from before must not be evicted. */
	agent_memmap_publish(&x.f, 0, 0);
	agent_slots_committed(&x.s, 0);
	agent_slots_new_round(&x.s, 0);
	cr_assert_eq(agent_slots_choose(&x.s, 1, false), -ENOSPC);
	fixture_fini(&x);
}

Test(slots, basic_excluded_slot_skipped,
     .description = "a slot excluded after EBUSY is not chosen again this round")
{
	struct slots_fixture x;

	fixture_init(&x, 2, 8, 2);
	fill_all(&x);
	agent_slots_new_round(&x.s, 0);
	agent_slots_exclude(&x.s, 0);
	cr_assert_eq(agent_slots_choose(&x.s, 9, false), 1);
	agent_slots_exclude(&x.s, 1);
	cr_assert_eq(agent_slots_choose(&x.s, 9, false), -ENOSPC);
	agent_slots_new_round(&x.s, 0);
	cr_assert_geq(agent_slots_choose(&x.s, 9, false), 0);
	fixture_fini(&x);
}

Test(slots, basic_aborted_slot_free_again, .description = "an aborted fill gives its slot back")
{
	struct slots_fixture x;

	fixture_init(&x, 1, 8, 1);
	cr_assert_eq(agent_slots_choose(&x.s, 2, false), 0);
	agent_memmap_filling(&x.f, 2, 0);
	agent_slots_taken(&x.s, 0, 2, false);
	cr_assert_eq(agent_slots_find_free(&x.s), -ENOSPC);
	x.f.owner[0] = MOECACHE_NONE; /* what ABORT does */
	agent_slots_aborted(&x.s, 0);
	cr_assert(!agent_slots_is_filling(&x.s, 2));
	cr_assert_eq(agent_slots_find_free(&x.s), 0);
	fixture_fini(&x);
}

Test(slots, basic_sync_follows_owner,
     .description = "sync counts residents and forgets freed slots")
{
	struct slots_fixture x;

	fixture_init(&x, 2, 8, 4);
	fill_all(&x);
	cr_assert_eq(agent_slots_find_free(&x.s), -ENOSPC);
	/* An administrator's flush frees slot 3 behind the agent's back. */
	x.f.owner[3] = MOECACHE_NONE;
	x.f.map[3] = MOECACHE_NONE;
	cr_assert_eq(agent_slots_sync(&x.s), 3);
	cr_assert_eq(agent_slots_find_free(&x.s), 3);
	fixture_fini(&x);
}

Test(slots, basic_access_deltas,
     .description = "the access scan reports counter deltas, across wrap-around")
{
	struct slots_fixture x;

	fixture_init(&x, 2, 4, 2);
	x.f.access[1] = UINT32_MAX - 1;
	agent_slots_reset_access(&x.s);
	cr_assert_eq(agent_slots_scan_access(&x.s, 1), 0);
	x.f.access[1] = 1; /* +3 through the wrap */
	x.f.access[6] = 4;
	cr_assert_eq(agent_slots_scan_access(&x.s, 2), 7);
	cr_assert_eq(agent_slots_scan_access(&x.s, 3), 0);
	fixture_fini(&x);
}

/*
 * Regression: one scan that spans two acquires reported accesses in
 * (layer, expert) order, so LRU heard a later access to a lower id first
 * and evicted the expert used last.
 */
Test(slots, basic_access_scan_in_time_order,
     .description = "accesses found by one scan reach the policy oldest first, whatever their ids")
{
	struct moe_policy_config pc = {.n_layers = 1, .n_local = 8, .n_slots = 2};
	struct slots_fixture x;

	cr_assert_eq(agent_memmap_init(&x.f, 1, 8, 0, 8, 2), 0);
	cr_assert_eq(moe_policy_create("lru", &pc, &x.policy), 0);
	cr_assert_eq(agent_slots_init(&x.s, &x.f.view, x.policy), 0);
	agent_memmap_publish(&x.f, 5, 0);
	agent_memmap_publish(&x.f, 1, 1);
	cr_assert_eq(agent_slots_sync(&x.s), 2);
	agent_slots_reset_access(&x.s);
	/* Expert 5 was acquired at clock 10, expert 1 later, at clock 11. */
	x.f.access[5] = 1;
	x.f.last_use[0] = 10;
	x.f.access[1] = 1;
	x.f.last_use[1] = 11;
	x.f.hdr->clock = 11;
	cr_assert_eq(agent_slots_scan_access(&x.s, 11), 2);
	agent_slots_new_round(&x.s, 12);
	cr_assert_eq(agent_slots_choose(&x.s, 3, false), 0, "LRU must take expert 5's slot");
	fixture_fini(&x);
}

Test(slots, basic_set_policy_keeps_residency,
     .description = "a live policy change hands the new policy every held slot, filling ones too")
{
	struct moe_policy_config pc = {.n_layers = 2, .n_local = 8, .n_slots = 4};
	struct slots_fixture x;
	struct moe_policy *lru;
	int slot;

	fixture_init(&x, 2, 8, 4);
	for (uint32_t s = 0; s < 3; s++)
		agent_memmap_publish(&x.f, s, s);
	agent_slots_sync(&x.s);
	agent_memmap_filling(&x.f, 7, 3);
	agent_slots_taken(&x.s, 3, 7, false);
	cr_assert_eq(moe_policy_create("lru", &pc, &lru), 0);
	agent_slots_set_policy(&x.s, lru);
	moe_policy_destroy(x.policy);
	x.policy = lru;
	agent_slots_new_round(&x.s, 0);
	slot = agent_slots_choose(&x.s, 9, false);
	cr_assert(slot >= 0 && slot < 3, "chose slot %d (want a resident, not the filling one)",
		  slot);
	agent_memmap_publish(&x.f, 7, 3);
	agent_slots_committed(&x.s, 3);
	cr_assert_not(agent_slots_is_filling(&x.s, 7));
	fixture_fini(&x);
}
