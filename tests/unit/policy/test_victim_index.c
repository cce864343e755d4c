// SPDX-License-Identifier: MIT
/*
 * revisit and reuse choose their victim from per-layer heaps instead of a
 * scan of the bank (agent/policy/reuse.c). lookahead ranks with the same
 * distance by scanning; told that nothing is ever used again, it adds the
 * same 1 to every distance, so its victims are the scan's. The two must
 * agree on every miss.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "agent/policy/policy.h"

#define VI_LAYERS 6
#define VI_EXPERTS 40
#define VI_SLOTS 70
#define VI_TOP_K 4

static uint64_t never(const struct moe_future *f, uint32_t layer, uint32_t expert, uint64_t from)
{
	return MOE_FUTURE_NEVER;
}

struct vi_bank {
	uint32_t owner[VI_SLOTS];
	bool needed[VI_LAYERS * VI_EXPERTS];
	bool pinned[VI_SLOTS];
};

static bool vi_evictable(void *ctx, uint32_t slot)
{
	const struct vi_bank *b = ctx;

	return slot < VI_SLOTS && !b->pinned[slot] && !b->needed[b->owner[slot]];
}

static uint32_t vi_rand(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(*s >> 33);
}

static void check_same_victims(const char *name, uint64_t seed)
{
	const struct moe_future fut = {.next_use = never};
	struct moe_policy_config cfg = {.n_layers = VI_LAYERS,
					.n_local = VI_EXPERTS,
					.n_slots = VI_SLOTS,
					.future = &fut,
					.lookahead_steps = 1};
	struct moe_policy *fast, *scan;
	struct vi_bank b;
	uint32_t where[VI_LAYERS * VI_EXPERTS], used = 0, victims = 0;

	memset(&b, 0, sizeof(b));
	memset(where, 0xff, sizeof(where));
	cr_assert_eq(moe_policy_create(name, &cfg, &fast), 0);
	cr_assert_eq(moe_policy_create("lookahead", &cfg, &scan), 0);
	for (uint64_t step = 0; step < 3000; step++) {
		uint32_t layer = step % VI_LAYERS, sel[VI_TOP_K], n = 0;

		memset(b.needed, 0, sizeof(b.needed));
		/* Skewed routing, a few pinned slots, and now and then a prefetch. */
		while (n < VI_TOP_K) {
			uint32_t u = vi_rand(&seed) % 1000, e = (u * u / 1000) * VI_EXPERTS / 1000;
			uint32_t id = layer * VI_EXPERTS + e;

			if (b.needed[id])
				continue;
			b.needed[id] = true;
			sel[n++] = e;
		}
		for (uint32_t s = 0; s < VI_SLOTS; s++)
			b.pinned[s] = vi_rand(&seed) % 16 == 0;
		for (uint32_t j = 0; j < n; j++) {
			moe_policy_access(fast, layer, sel[j], 1, step);
			moe_policy_access(scan, layer, sel[j], 1, step);
		}
		for (uint32_t j = 0; j <= n; j++) {
			bool prefetch = j == n;
			uint32_t l = prefetch ? (layer + 1) % VI_LAYERS : layer;
			uint32_t e = prefetch ? vi_rand(&seed) % VI_EXPERTS : sel[j];
			uint32_t id = l * VI_EXPERTS + e, slot;

			if (where[id] != UINT32_MAX || (prefetch && vi_rand(&seed) % 4))
				continue;
			if (used < VI_SLOTS) {
				slot = used++;
			} else {
				/* Both asked as a demand miss: the prefetch gates differ. */
				int a = moe_policy_victim(fast, l, e, false, vi_evictable, &b);
				int c = moe_policy_victim(scan, l, e, false, vi_evictable, &b);

				cr_assert_eq(a, c, "%s: step %lu: victim slot %d, the scan's %d",
					     name, (unsigned long)step, a, c);
				if (a < 0)
					continue;
				victims++;
				slot = (uint32_t)a;
				where[b.owner[slot]] = UINT32_MAX;
				moe_policy_removed(fast, slot);
				moe_policy_removed(scan, slot);
			}
			b.owner[slot] = id;
			where[id] = slot;
			moe_policy_inserted(fast, slot, l, e, prefetch);
			moe_policy_inserted(scan, slot, l, e, prefetch);
		}
	}
	cr_expect_gt(victims, 1000);
	moe_policy_destroy(fast);
	moe_policy_destroy(scan);
}

Test(victim_index, basic_revisit_matches_the_scan,
     .description = "revisit's indexed victim is the slot a scan of the bank picks, on every "
		    "miss, with pinned slots and prefetched experts")
{
	check_same_victims("revisit", 1);
	check_same_victims("revisit", 12345);
}
