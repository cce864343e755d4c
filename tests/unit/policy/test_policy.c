// SPDX-License-Identifier: MIT
/* Each policy on tiny sequences whose right answer follows from its definition. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <criterion/criterion.h>

#include "cache.h"

/* Silberschatz's reference string: 3 frames give OPT 9 faults, LRU 12. */
static const uint32_t textbook[] = {7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1};
#define TEXTBOOK_LEN (sizeof(textbook) / sizeof(textbook[0]))

/* Oracle over a one-layer sequence where step i accesses seq[i]. */
struct seq_future {
	struct moe_future f;
	const uint32_t *seq;
	uint64_t n;
};

static uint64_t seq_next_use(const struct moe_future *f, uint32_t layer, uint32_t expert,
			     uint64_t from)
{
	const struct seq_future *s = (const struct seq_future *)f;

	for (uint64_t i = from; i < s->n; i++)
		if (s->seq[i] == expert)
			return i;
	return MOE_FUTURE_NEVER;
}

static uint64_t run_sequence(struct test_cache *c, const uint32_t *seq, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		cr_assert_eq(test_cache_step(c, 0, &seq[i], 1, i), 0, "step %lu failed",
			     (unsigned long)i);
	return c->misses;
}

static bool never_evictable(void *ctx, uint32_t slot)
{
	return false;
}

Test(policy, basic_names_all_creatable,
     .description = "every listed policy can be created with what it needs")
{
	const struct moe_expert_id ranked[] = {{0, 1}};
	const struct moe_profile profile = {.n = 1, .ranked = (struct moe_expert_id *)ranked};
	struct seq_future fut = {.f = {.next_use = seq_next_use}, .seq = textbook, .n = 1};
	const struct moe_policy_config cfg = {
	    .n_layers = 2, .n_local = 4, .n_slots = 3, .profile = &profile, .future = &fut.f};
	unsigned int n = 0;

	for (const char *const *name = moe_policy_names(); *name; name++, n++) {
		struct moe_policy *p = NULL;

		cr_assert_eq(moe_policy_create(*name, &cfg, &p), 0, "%s", *name);
		cr_assert_not_null(p);
		moe_policy_destroy(p);
	}
	cr_assert_geq(n, 7);
}

Test(policy, basic_default_names_its_policy,
     .description = "NULL and \"default\" create the policy moe_policy_default_name says")
{
	const struct moe_policy_config cfg = {.n_layers = 1, .n_local = 4, .n_slots = 2};
	struct moe_policy *a, *b;

	cr_assert_eq(moe_policy_create(NULL, &cfg, &a), 0);
	cr_assert_eq(moe_policy_create(MOE_POLICY_DEFAULT, &cfg, &b), 0);
	cr_assert_str_eq(moe_policy_name(a), moe_policy_default_name());
	cr_assert_str_eq(moe_policy_name(b), moe_policy_default_name());
	moe_policy_destroy(a);
	moe_policy_destroy(b);
}

Test(policy, bad_input_unknown_name,
     .description = "an unknown policy name is -ENOENT and no handle")
{
	const struct moe_policy_config cfg = {.n_layers = 1, .n_local = 4, .n_slots = 2};
	struct moe_policy *p = (struct moe_policy *)&cfg;

	cr_assert_eq(moe_policy_create("no-such-policy", &cfg, &p), -ENOENT);
	cr_assert_null(p);
}

Test(policy, basic_reads_future_exactly_the_oracles,
     .description = "reads_future holds for a listed policy iff it cannot run without a future")
{
	const struct moe_expert_id ranked[] = {{0, 1}};
	const struct moe_profile profile = {.n = 1, .ranked = (struct moe_expert_id *)ranked};
	const struct moe_policy_config cfg = {
	    .n_layers = 2, .n_local = 4, .n_slots = 3, .profile = &profile};
	unsigned int n_oracles = 0;

	for (const char *const *name = moe_policy_names(); *name; name++) {
		struct moe_policy *p = NULL;
		int ret = moe_policy_create(*name, &cfg, &p);

		cr_assert(moe_policy_exists(*name), "%s", *name);
		cr_assert_eq(moe_policy_reads_future(*name), ret == -EINVAL, "%s: %d", *name, ret);
		n_oracles += moe_policy_reads_future(*name);
		moe_policy_destroy(p);
	}
	cr_assert_eq(n_oracles, 2, "belady and lookahead");
	cr_assert(moe_policy_exists(NULL), "NULL is the default");
	cr_assert_not(moe_policy_exists("no-such-policy"));
	cr_assert_not(moe_policy_reads_future("no-such-policy"));
}

Test(policy, bad_input_zero_sizes, .description = "zero layers, experts or slots is -EINVAL")
{
	struct moe_policy_config cfg = {.n_layers = 1, .n_local = 4, .n_slots = 2};
	struct moe_policy *p;

	cfg.n_layers = 0;
	cr_assert_eq(moe_policy_create("lru", &cfg, &p), -EINVAL);
	cfg.n_layers = 1;
	cfg.n_local = 0;
	cr_assert_eq(moe_policy_create("lru", &cfg, &p), -EINVAL);
	cfg.n_local = 4;
	cfg.n_slots = 0;
	cr_assert_eq(moe_policy_create("lru", &cfg, &p), -EINVAL);
}

Test(policy, bad_input_static_without_profile, .description = "static needs a profile")
{
	const struct moe_policy_config cfg = {.n_layers = 1, .n_local = 4, .n_slots = 2};
	struct moe_policy *p;

	cr_assert_eq(moe_policy_create("static", &cfg, &p), -EINVAL);
}

Test(policy, bad_input_belady_without_future, .description = "belady needs a future oracle")
{
	const struct moe_policy_config cfg = {.n_layers = 1, .n_local = 4, .n_slots = 2};
	struct moe_policy *p;

	cr_assert_eq(moe_policy_create("belady", &cfg, &p), -EINVAL);
}

Test(policy, bad_input_lookahead_without_future, .description = "lookahead needs a future oracle")
{
	const struct moe_policy_config cfg = {.n_layers = 1, .n_local = 4, .n_slots = 2};
	struct moe_policy *p;

	cr_assert_eq(moe_policy_create("lookahead", &cfg, &p), -EINVAL);
}

Test(policy, bad_input_victim_out_of_range,
     .description = "a victim request for an expert outside the pool is -EINVAL")
{
	struct test_cache c;

	cr_assert_eq(test_cache_init(&c, "lru", 2, 4, 2, NULL, NULL), 0);
	cr_assert_eq(moe_policy_victim(c.policy, 2, 0, false, test_cache_evictable, &c), -EINVAL);
	cr_assert_eq(moe_policy_victim(c.policy, 0, 4, false, test_cache_evictable, &c), -EINVAL);
	test_cache_fini(&c);
}

Test(policy, basic_victim_enospc_when_nothing_evictable,
     .description = "every policy answers -ENOSPC when no slot may be taken")
{
	const struct moe_expert_id ranked[] = {{0, 1}};
	const struct moe_profile profile = {.n = 1, .ranked = (struct moe_expert_id *)ranked};
	struct seq_future fut = {.f = {.next_use = seq_next_use}, .seq = textbook, .n = 4};

	for (const char *const *name = moe_policy_names(); *name; name++) {
		struct test_cache c;
		const uint32_t seq[] = {0, 1};

		cr_assert_eq(test_cache_init(&c, *name, 1, 8, 2, &profile, &fut.f), 0);
		run_sequence(&c, seq, 2);
		cr_assert_eq(moe_policy_victim(c.policy, 0, 5, false, never_evictable, NULL),
			     -ENOSPC, "%s", *name);
		test_cache_fini(&c);
	}
}

Test(policy, basic_lru_evicts_least_recent,
     .description = "lru takes the slot of the expert used longest ago")
{
	struct test_cache c;
	const uint32_t seq[] = {0, 1, 2, 0};

	cr_assert_eq(test_cache_init(&c, "lru", 1, 8, 3, NULL, NULL), 0);
	run_sequence(&c, seq, 4);
	cr_assert_eq(moe_policy_victim(c.policy, 0, 3, false, test_cache_evictable, &c),
		     test_cache_slot_of(&c, 0, 1));
	test_cache_fini(&c);
}

Test(policy, basic_lru_skips_unevictable,
     .description = "lru passes over a slot the caller forbids")
{
	struct test_cache c;
	const uint32_t seq[] = {0, 1, 2};

	cr_assert_eq(test_cache_init(&c, "lru", 1, 8, 3, NULL, NULL), 0);
	run_sequence(&c, seq, 3);
	c.blocked[test_cache_slot_of(&c, 0, 0)] = true;
	cr_assert_eq(moe_policy_victim(c.policy, 0, 3, false, test_cache_evictable, &c),
		     test_cache_slot_of(&c, 0, 1));
	test_cache_fini(&c);
}

Test(policy, basic_lru_textbook_faults,
     .description = "lru on the textbook reference string with 3 frames faults 12 times")
{
	struct test_cache c;

	cr_assert_eq(test_cache_init(&c, "lru", 1, 8, 3, NULL, NULL), 0);
	cr_assert_eq(run_sequence(&c, textbook, TEXTBOOK_LEN), 12);
	test_cache_fini(&c);
}

Test(policy, basic_belady_textbook_faults,
     .description = "belady on the textbook reference string with 3 frames faults 9 times (OPT)")
{
	struct seq_future fut = {
	    .f = {.next_use = seq_next_use}, .seq = textbook, .n = TEXTBOOK_LEN};
	struct test_cache c;

	cr_assert_eq(test_cache_init(&c, "belady", 1, 8, 3, NULL, &fut.f), 0);
	cr_assert_eq(run_sequence(&c, textbook, TEXTBOOK_LEN), 9);
	test_cache_fini(&c);
}

Test(policy, basic_lookahead_whole_sequence_is_optimal,
     .description = "lookahead seeing the whole textbook string faults 9 times, as belady does")
{
	struct seq_future fut = {
	    .f = {.next_use = seq_next_use}, .seq = textbook, .n = TEXTBOOK_LEN};
	const struct moe_policy_config cfg = {.n_layers = 1,
					      .n_local = 8,
					      .n_slots = 3,
					      .future = &fut.f,
					      .lookahead_steps = TEXTBOOK_LEN};
	struct test_cache c;

	cr_assert_eq(test_cache_init_cfg(&c, "lookahead", &cfg), 0);
	cr_assert_eq(run_sequence(&c, textbook, TEXTBOOK_LEN), 9);
	test_cache_fini(&c);
}

Test(policy, basic_lookahead_keeps_what_it_sees_used,
     .description = "lookahead that sees one step ahead keeps the expert used then over a more "
		    "recent one")
{
	/* At step 2 the miss on 2 evicts 0 or 1: 1 is older but comes back at step 3. */
	const uint32_t seq[] = {1, 0, 2, 1, 0};
	struct seq_future fut = {.f = {.next_use = seq_next_use}, .seq = seq, .n = 5};
	const struct moe_policy_config cfg = {
	    .n_layers = 1, .n_local = 8, .n_slots = 2, .future = &fut.f, .lookahead_steps = 1};
	struct test_cache c;

	cr_assert_eq(test_cache_init_cfg(&c, "lookahead", &cfg), 0);
	run_sequence(&c, seq, 2);
	/* Step 2 needs only the missing 2: both residents may go. */
	memset(c.need, 0, sizeof(c.need));
	moe_policy_access(c.policy, 0, 2, 1, 2);
	cr_assert_eq(moe_policy_victim(c.policy, 0, 2, false, test_cache_evictable, &c),
		     test_cache_slot_of(&c, 0, 0));
	test_cache_fini(&c);
}

Test(
    policy, basic_belady_refuses_useless_prefetch,
    .description = "belady will not evict for a prefetch of an expert needed later than the victim")
{
	const uint32_t seq[] = {0, 1, 0, 1, 2};
	struct seq_future fut = {.f = {.next_use = seq_next_use}, .seq = seq, .n = 5};
	struct test_cache c;

	cr_assert_eq(test_cache_init(&c, "belady", 1, 8, 2, NULL, &fut.f), 0);
	run_sequence(&c, seq, 2);
	/* At step 1, 0 comes back at step 2 but 2 only at step 4. */
	cr_assert_eq(moe_policy_victim(c.policy, 0, 2, true, test_cache_evictable, &c), -ECANCELED);
	test_cache_fini(&c);
}

Test(policy, basic_lfu_evicts_least_frequent,
     .description = "lfu takes the slot of the expert with the fewest accesses")
{
	struct test_cache c;
	const uint32_t seq[] = {0, 1, 2, 0, 2, 0};

	cr_assert_eq(test_cache_init(&c, "lfu", 1, 8, 3, NULL, NULL), 0);
	run_sequence(&c, seq, 6);
	cr_assert_eq(moe_policy_victim(c.policy, 0, 3, false, test_cache_evictable, &c),
		     test_cache_slot_of(&c, 0, 1));
	test_cache_fini(&c);
}

Test(policy, basic_lfu_ties_by_recency,
     .description = "lfu breaks a frequency tie by evicting the least recent")
{
	struct test_cache c;
	const uint32_t seq[] = {1, 0, 2, 2};

	cr_assert_eq(test_cache_init(&c, "lfu", 1, 8, 3, NULL, NULL), 0);
	run_sequence(&c, seq, 4);
	cr_assert_eq(moe_policy_victim(c.policy, 0, 3, false, test_cache_evictable, &c),
		     test_cache_slot_of(&c, 0, 1));
	test_cache_fini(&c);
}

Test(policy, basic_arc_survives_scan,
     .description = "arc keeps twice-used experts through a scan of one-off experts")
{
	struct test_cache c;
	uint32_t seq[4 + 10] = {0, 1, 0, 1};

	for (uint32_t i = 0; i < 10; i++)
		seq[4 + i] = 2 + i;
	cr_assert_eq(test_cache_init(&c, "arc", 1, 16, 4, NULL, NULL), 0);
	run_sequence(&c, seq, 14);
	cr_assert_geq(test_cache_slot_of(&c, 0, 0), 0);
	cr_assert_geq(test_cache_slot_of(&c, 0, 1), 0);
	test_cache_fini(&c);
}

Test(policy, basic_arc_ghost_hit_goes_frequent,
     .description =
	 "arc counts an expert back from its ghost list as frequent: it survives a later scan")
{
	struct test_cache c;
	/*
	 * 0 goes to T2; 4 evicts 1 from T1 into ghost list B1; 1 comes back (a
	 * ghost hit, so T2); the scan 5..8 then takes T1 entries only.
	 */
	const uint32_t seq[] = {0, 0, 1, 2, 3, 4, 1, 5, 6, 7, 8};

	cr_assert_eq(test_cache_init(&c, "arc", 1, 16, 4, NULL, NULL), 0);
	run_sequence(&c, seq, 11);
	cr_assert_geq(test_cache_slot_of(&c, 0, 1), 0);
	test_cache_fini(&c);
}

Test(policy, basic_ema_protects_hot_set,
     .description = "ema keeps experts used in every visit through a burst of one-off experts")
{
	struct test_cache c;
	const uint32_t hot[] = {0, 1};
	uint64_t step = 0;

	cr_assert_eq(test_cache_init(&c, "ema", 1, 16, 4, NULL, NULL), 0);
	for (int i = 0; i < 20; i++)
		cr_assert_eq(test_cache_step(&c, 0, hot, 2, step++), 0);
	for (uint32_t e = 2; e < 12; e++)
		cr_assert_eq(test_cache_step(&c, 0, &e, 1, step++), 0);
	cr_assert_geq(test_cache_slot_of(&c, 0, 0), 0);
	cr_assert_geq(test_cache_slot_of(&c, 0, 1), 0);
	test_cache_fini(&c);
}

Test(
    policy, basic_ema_hysteresis,
    .description = "ema keeps an overtaken hot expert hot while it ranks inside the leave fraction")
{
	struct test_cache c;
	const uint32_t old_set[] = {0, 1, 2, 3}, new_set[] = {4, 5, 6, 7};
	const uint32_t n_slots = 8, enter = n_slots / 2, leave = n_slots * 3 / 4;
	uint64_t step = 0;

	cr_assert_eq(test_cache_init(&c, "ema", 1, 16, n_slots, NULL, NULL), 0);
	for (int i = 0; i < 40; i++)
		cr_assert_eq(test_cache_step(&c, 0, old_set, 4, step++), 0);
	cr_assert_eq(moe_policy_hot_count(c.policy), 4);
	/*
	 * The new set overtakes: it fills the top `enter` ranks; the old set
	 * ranks next, and those of it still above `leave` stay hot.
	 */
	for (int i = 0; i < 30; i++)
		cr_assert_eq(test_cache_step(&c, 0, new_set, 4, step++), 0);
	cr_assert_eq(moe_policy_hot_count(c.policy), enter + (leave - enter));
	test_cache_fini(&c);
}

Test(policy, basic_ema_refuses_prefetch_over_hot,
     .description = "ema refuses a prefetch whose only victim is hot")
{
	struct test_cache c;
	const uint32_t hot[] = {0, 1};

	/* 4 slots: the hot set is the top 2, and only the 2 hot experts are resident. */
	cr_assert_eq(test_cache_init(&c, "ema", 1, 16, 4, NULL, NULL), 0);
	for (uint64_t i = 0; i < 10; i++)
		cr_assert_eq(test_cache_step(&c, 0, hot, 2, i), 0);
	memset(c.need, 0, sizeof(c.need));
	cr_assert_eq(moe_policy_victim(c.policy, 0, 5, true, test_cache_evictable, &c), -ECANCELED);
	test_cache_fini(&c);
}

Test(policy, basic_static_keeps_profile_experts,
     .description = "static keeps the profile's experts resident while others come and go")
{
	const struct moe_expert_id ranked[] = {{0, 5}, {0, 6}};
	const struct moe_profile profile = {.n = 2, .ranked = (struct moe_expert_id *)ranked};
	const uint32_t seq[] = {5, 6, 1, 2, 3, 4};
	struct test_cache c;

	cr_assert_eq(test_cache_init(&c, "static", 1, 8, 3, &profile, NULL), 0);
	run_sequence(&c, seq, 6);
	cr_assert_geq(test_cache_slot_of(&c, 0, 5), 0);
	cr_assert_geq(test_cache_slot_of(&c, 0, 6), 0);
	test_cache_fini(&c);
}

Test(policy, basic_static_pins_only_n_slots,
     .description =
	 "static pins the profile's top n_slots only: the next one is evicted like any other")
{
	const struct moe_expert_id ranked[] = {{0, 1}, {0, 2}, {0, 3}};
	const struct moe_profile profile = {.n = 3, .ranked = (struct moe_expert_id *)ranked};
	const uint32_t seq[] = {3, 1, 2};
	struct test_cache c;

	cr_assert_eq(test_cache_init(&c, "static", 1, 8, 2, &profile, NULL), 0);
	run_sequence(&c, seq, 3);
	/* Expert 3 is ranked third of two pinned places, so 2 replaced it. */
	cr_assert_lt(test_cache_slot_of(&c, 0, 3), 0);
	cr_assert_geq(test_cache_slot_of(&c, 0, 1), 0);
	test_cache_fini(&c);
}

Test(policy, basic_static_refuses_prefetch_over_pinned,
     .description = "static refuses a prefetch when every evictable slot is pinned")
{
	const struct moe_expert_id ranked[] = {{0, 0}, {0, 1}};
	const struct moe_profile profile = {.n = 2, .ranked = (struct moe_expert_id *)ranked};
	const uint32_t seq[] = {0, 1};
	struct test_cache c;

	cr_assert_eq(test_cache_init(&c, "static", 1, 8, 2, &profile, NULL), 0);
	run_sequence(&c, seq, 2);
	memset(c.need, 0, sizeof(c.need));
	cr_assert_eq(moe_policy_victim(c.policy, 0, 2, true, test_cache_evictable, &c), -ECANCELED);
	test_cache_fini(&c);
}

/* Among equally used experts, name evicts the one whose layer runs furthest from now. */
static void check_evicts_layer_running_last(const char *name)
{
	struct test_cache c;
	const uint32_t zero = 0, both[] = {0, 1};

	cr_assert_eq(test_cache_init(&c, name, 4, 2, 4, NULL, NULL), 0);
	for (uint32_t l = 0; l < 4; l++)
		cr_assert_eq(test_cache_step(&c, l, &zero, 1, l), 0);
	/* Next token, layer 0 needs expert 1: layers 1, 2, 3 run in that order next. */
	int layer3 = test_cache_slot_of(&c, 3, 0);

	cr_assert_eq(test_cache_step(&c, 0, both, 2, 4), 0);
	cr_assert_eq(c.last_victim, layer3, "%s", name);
	test_cache_fini(&c);
}

/* name evicts a once-used expert before a popular one used longer ago. */
static void check_keeps_popular_over_recent_one_off(const char *name)
{
	struct test_cache c;
	const uint32_t popular = 0, one_off = 1, recent = 2, newcomer = 3;
	uint64_t step = 0;

	cr_assert_eq(test_cache_init(&c, name, 1, 8, 3, NULL, NULL), 0);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(test_cache_step(&c, 0, &popular, 1, step++), 0);
	cr_assert_eq(test_cache_step(&c, 0, &one_off, 1, step++), 0);
	cr_assert_eq(test_cache_step(&c, 0, &recent, 1, step++), 0);
	int one_off_slot = test_cache_slot_of(&c, 0, one_off);

	cr_assert_eq(test_cache_step(&c, 0, &newcomer, 1, step++), 0);
	cr_assert_eq(c.last_victim, one_off_slot, "%s", name);
	test_cache_fini(&c);
}

Test(policy, basic_reuse_evicts_layer_running_last,
     .description =
	 "reuse, among equally used experts, evicts the one whose layer runs furthest from now")
{
	check_evicts_layer_running_last("reuse");
}

Test(policy, basic_revisit_evicts_layer_running_last,
     .description =
	 "revisit, among equally used experts, evicts the one whose layer runs furthest from now")
{
	check_evicts_layer_running_last("revisit");
}

Test(policy, basic_reuse_keeps_popular_over_recent_one_off,
     .description = "reuse evicts a once-used expert before a popular one used longer ago")
{
	check_keeps_popular_over_recent_one_off("reuse");
}

Test(policy, basic_revisit_keeps_popular_over_recent_one_off,
     .description = "revisit evicts a once-used expert before a popular one used longer ago")
{
	check_keeps_popular_over_recent_one_off("revisit");
}

Test(policy, basic_ranking_hottest_first,
     .description = "the ranking lists accessed experts only, most used first")
{
	struct test_cache c;
	struct moe_profile r;
	const uint32_t busy = 2, quiet = 0;

	cr_assert_eq(test_cache_init(&c, MOE_POLICY_DEFAULT, 2, 4, 4, NULL, NULL), 0);
	for (uint64_t i = 0; i < 5; i++)
		cr_assert_eq(test_cache_step(&c, 1, &busy, 1, i), 0);
	for (uint64_t i = 5; i < 7; i++)
		cr_assert_eq(test_cache_step(&c, 0, &quiet, 1, i), 0);
	cr_assert_eq(moe_policy_ranking(c.policy, &r), 0);
	cr_assert_eq(r.n, 2);
	cr_assert_eq(r.ranked[0].layer, 1);
	cr_assert_eq(r.ranked[0].expert, busy);
	cr_assert_eq(r.ranked[1].layer, 0);
	cr_assert_eq(r.ranked[1].expert, quiet);
	moe_profile_free(&r);
	test_cache_fini(&c);
}

/* How many of layer's experts the cache holds. */
static uint32_t resident_in_layer(const struct test_cache *c, uint32_t layer)
{
	uint32_t n = 0;

	for (uint32_t e = 0; e < c->n_local; e++)
		n += test_cache_slot_of(c, layer, e) >= 0;
	return n;
}

Test(policy, basic_lrfu_keeps_each_layers_share,
     .description =
	 "lrfu gives each layer n_slots / n_layers: a layer's misses evict its own experts")
{
	struct test_cache c;
	uint64_t step = 0;

	cr_assert_eq(test_cache_init(&c, "lrfu", 2, 16, 4, NULL, NULL), 0);
	/* Layer 0 fills the empty bank, then layer 1 takes its two slots back. */
	for (uint32_t e = 0; e < 4; e++)
		cr_assert_eq(test_cache_step(&c, 0, &e, 1, step++), 0);
	for (uint32_t e = 0; e < 6; e++)
		cr_assert_eq(test_cache_step(&c, 1, &e, 1, step++), 0);
	cr_expect_eq(resident_in_layer(&c, 0), 2);
	cr_expect_eq(resident_in_layer(&c, 1), 2);
	/* More misses of layer 1 stay within its share. */
	for (uint32_t e = 6; e < 12; e++)
		cr_assert_eq(test_cache_step(&c, 1, &e, 1, step++), 0);
	cr_expect_eq(resident_in_layer(&c, 0), 2);
	test_cache_fini(&c);
}

Test(policy, basic_lrfu_frequency_outlasts_recency,
     .description = "lrfu keeps an expert used often within the half-life over one used once since")
{
	struct test_cache c;
	const uint32_t often = 0;
	uint64_t step = 0;

	cr_assert_eq(test_cache_init(&c, "lrfu", 1, 16, 2, NULL, NULL), 0);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(test_cache_step(&c, 0, &often, 1, step++), 0);
	for (uint32_t e = 1; e < 6; e++)
		cr_assert_eq(test_cache_step(&c, 0, &e, 1, step++), 0);
	cr_expect_geq(test_cache_slot_of(&c, 0, 0), 0, "lru would have evicted expert 0");
	test_cache_fini(&c);
}

Test(policy, basic_lrfu_old_uses_decay,
     .description =
	 "lrfu's count halves every 128 tokens: many uses long past lose to few recent ones")
{
	struct test_cache c;
	const uint32_t old = 0;
	uint64_t step = 0;

	cr_assert_eq(test_cache_init(&c, "lrfu", 1, 64, 2, NULL, NULL), 0);
	/*
	 * 64 uses of expert 0, then 1024 tokens (8 half-lives) cycling
	 * through 61 others, each used about 17 times: undecayed, expert 0's
	 * count stays the highest; decayed it is 64 / 256 against about 3.5.
	 */
	for (int i = 0; i < 64; i++)
		cr_assert_eq(test_cache_step(&c, 0, &old, 1, step++), 0);
	for (uint32_t i = 0; i < 1024; i++) {
		const uint32_t e = 3 + i % 61;

		cr_assert_eq(test_cache_step(&c, 0, &e, 1, step++), 0);
	}
	cr_expect_lt(test_cache_slot_of(&c, 0, 0), 0, "expert 0 held on to slot %d",
		     test_cache_slot_of(&c, 0, 0));
	test_cache_fini(&c);
}

Test(policy, basic_lrfu_refuses_prefetch,
     .description = "lrfu has no prefetch: a prefetch into a full bank is refused")
{
	struct test_cache c;
	uint64_t step = 0;

	cr_assert_eq(test_cache_init(&c, "lrfu", 1, 16, 2, NULL, NULL), 0);
	for (uint32_t e = 0; e < 2; e++)
		cr_assert_eq(test_cache_step(&c, 0, &e, 1, step++), 0);
	cr_expect_eq(moe_policy_victim(c.policy, 0, 5, true, test_cache_evictable, &c), -ECANCELED);
	test_cache_fini(&c);
}
