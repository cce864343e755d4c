// SPDX-License-Identifier: MIT
/*
 * bench-decode's residency (tools/device-check/decode_slots.c): moecached's
 * slot choice and policy over a map region in memory, the part of the CUDA
 * benchmark that runs without a GPU.
 */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tools/device-check/decode_slots.h"

#define NONE MOECACHE_NONE

/* One layer step of one expert each: whether it hit, and its slot. */
static bool step1(struct decode_slots *d, uint32_t layer, uint32_t expert, uint32_t *slot)
{
	uint32_t missed[1];
	int n = decode_slots_layer(d, layer, &expert, 1, slot, missed);

	cr_assert_geq(n, 0);
	return n == 0;
}

Test(decode_slots, basic_lru_victims,
     .description = "with lru and two slots, A B A C B hits once and C evicts B, the least "
		    "recently used")
{
	static const struct {
		uint32_t expert;
		bool hit;
	} seq[] = {{0, false}, {1, false}, {0, true}, {2, false}, {1, false}, {2, true}};
	struct decode_slots d;
	uint32_t slot, slot_of[3] = {NONE, NONE, NONE};

	cr_assert_eq(decode_slots_init(&d, "lru", 1, 3, 2, 1), 0);
	for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
		cr_expect_eq(step1(&d, 0, seq[i].expert, &slot), seq[i].hit, "access %zu", i);
		cr_assert_lt(slot, 2);
		if (seq[i].expert == 2 && !seq[i].hit)
			cr_expect_eq(slot, slot_of[1], "C did not take B's slot");
		slot_of[seq[i].expert] = slot;
	}
	cr_expect_eq(d.hits, 2);
	cr_expect_eq(d.misses, 4);
	decode_slots_free(&d);
}

Test(decode_slots, basic_layer_hits_never_evicted_by_its_misses,
     .description = "a layer whose experts fill the bank: its misses take free or older slots, "
		    "never a slot one of its own hits holds")
{
	struct decode_slots d;
	uint32_t ids[4] = {0, 1, 2, 3}, slots[4], missed[4];

	cr_assert_eq(decode_slots_init(&d, "lru", 2, 8, 4, 4), 0);
	cr_assert_eq(decode_slots_layer(&d, 0, ids, 4, slots, missed), 4);
	/* Layer 1 uses 2 of its own twice: 0 and 1 of layer 0 are the victims. */
	ids[0] = 5;
	ids[1] = 6;
	ids[2] = 5;
	ids[3] = NONE;
	cr_assert_eq(decode_slots_layer(&d, 1, ids, 4, slots, missed), 2);
	cr_expect_eq(slots[0], slots[2], "a repeated expert has one slot");
	cr_expect_neq(slots[0], slots[1]);
	cr_expect_eq(slots[3], NONE);
	/* Layer 0's experts 2 and 3 are still there. */
	ids[0] = 2;
	ids[1] = 3;
	cr_expect_eq(decode_slots_layer(&d, 0, ids, 2, slots, missed), 0);
	decode_slots_free(&d);
}

Test(decode_slots, basic_more_experts_than_slots_left_out,
     .description = "a layer with more distinct experts than slots: the ones left over get no "
		    "slot and are not counted as filled")
{
	struct decode_slots d;
	uint32_t ids[3] = {0, 1, 2}, slots[3], missed[3];

	cr_assert_eq(decode_slots_init(&d, "lru", 1, 4, 2, 3), 0);
	cr_expect_eq(decode_slots_layer(&d, 0, ids, 3, slots, missed), 2);
	cr_expect_eq(slots[2], NONE);
	cr_expect_eq(d.misses, 2);
	decode_slots_free(&d);
}

Test(decode_slots, bad_input_init,
     .description =
	 "an unknown policy is -ENOENT; zero sizes and a layer wider than top_k are -EINVAL")
{
	struct decode_slots d;
	uint32_t ids[3] = {0, 1, 2}, slots[3], missed[3];

	cr_expect_eq(decode_slots_init(&d, "no-such-policy", 1, 4, 2, 1), -ENOENT);
	cr_expect_eq(decode_slots_init(&d, "lru", 0, 4, 2, 1), -EINVAL);
	cr_expect_eq(decode_slots_init(&d, "lru", 1, 4, 0, 1), -EINVAL);
	cr_assert_eq(decode_slots_init(&d, "lru", 1, 4, 2, 2), 0);
	cr_expect_eq(decode_slots_layer(&d, 0, ids, 3, slots, missed), -EINVAL);
	decode_slots_free(&d);
	decode_slots_free(&d); /* twice is harmless */
}
