// SPDX-License-Identifier: MIT
/* The simulator's decode time model (tools/trace/timing.h) on hand-computed cases. */
#include <errno.h>
#include <math.h>

#include <criterion/criterion.h>

#include "tools/trace/timing.h"

/* 100 kB experts: 100 us over a 1 GB/s link, 50 us on a 2 GB/s CPU; 10 us a layer. */
static struct moe_timing_config tcfg(double cpu_gbps, double layer_us)
{
	struct moe_timing_config c = {.link_gbps = 1,
				      .copy_engines = 1,
				      .cpu_gbps = cpu_gbps,
				      .layer_us = layer_us,
				      .expert_bytes = 100000};
	return c;
}

/*
 * One step over ids: plan, fill what the plan admits (resident[] says what
 * was in the bank). Returns how many it filled.
 */
static uint32_t step(struct moe_timing *tm, const uint32_t *ids, const bool *resident, uint32_t n)
{
	uint32_t filled = 0;

	moe_timing_step_begin(tm);
	cr_assert_eq(moe_timing_plan(tm, ids, resident, n), 0);
	for (uint32_t i = 0; i < n; i++) {
		if (!resident[i] && moe_timing_admit(tm, ids[i])) {
			moe_timing_filled(tm, ids[i], false);
			filled++;
		}
	}
	return filled;
}

Test(timing, basic_waited_miss_then_hit,
     .description = "no CPU: a miss costs its 100 us copy, the hit after it the 10 us layer; "
		    "speed 20/110")
{
	struct moe_timing_config c = tcfg(0, 10);
	struct moe_timing_result r;
	struct moe_timing *tm;
	const uint32_t id[] = {0};
	const bool out[] = {false}, in[] = {true};

	cr_assert_eq(moe_timing_create(&c, 1, 4, &tm), 0);
	cr_expect_eq(step(tm, id, out, 1), 1);
	moe_timing_step_end(tm);
	step(tm, id, in, 1);
	moe_timing_step_end(tm);
	moe_timing_result(tm, &r);
	cr_expect_float_eq(r.total_us, 110.0, 1e-9);
	cr_expect_float_eq(r.resident_us, 20.0, 1e-9);
	cr_expect_float_eq(r.modeled_speed, 20.0 / 110.0, 1e-9);
	cr_expect_eq(r.copies, 1);
	cr_expect_eq(r.waited_copies, 1);
	cr_expect_eq(r.cpu_experts, 0);
	cr_expect_float_eq(r.link_utilisation, 100.0 / 110.0, 1e-9);
	moe_timing_destroy(tm);
}

Test(timing, basic_cpu_expert_not_admitted_behind_long_queue,
     .description = "one layer of 10 us: behind a background copy with 50 us left, a second "
		    "CPU expert's copy could not start before its next use; it is left out")
{
	struct moe_timing_config c = tcfg(2, 10);
	struct moe_timing_result r;
	struct moe_timing *tm;
	const uint32_t a[] = {0}, b[] = {1};
	const bool out[] = {false};

	cr_assert_eq(moe_timing_create(&c, 1, 4, &tm), 0);
	cr_expect_eq(step(tm, a, out, 1), 1); /* CPU, 50 us; copy queued */
	moe_timing_step_end(tm);
	cr_expect_eq(step(tm, b, out, 1), 0); /* 50 us of copy ahead > 10 us */
	moe_timing_step_end(tm);
	moe_timing_result(tm, &r);
	cr_expect_float_eq(r.total_us, 100.0, 1e-9);
	cr_expect_eq(r.cpu_experts, 2);
	cr_expect_eq(r.background_copies, 1);
	moe_timing_destroy(tm);
}

Test(timing, basic_background_copy_late_then_waited,
     .description = "20 layers: the CPU expert is admitted; its background copy has 50 us left "
		    "when next needed, which is waited for (50 us)")
{
	struct moe_timing_config c = tcfg(2, 10);
	struct moe_timing_result r;
	struct moe_timing *tm;
	const uint32_t id[] = {0};
	const bool out[] = {false}, in[] = {true};

	cr_assert_eq(moe_timing_create(&c, 20, 40, &tm), 0);
	cr_expect_eq(step(tm, id, out, 1), 1);
	moe_timing_step_end(tm); /* at 50: the CPU's */
	/* Its copy had the link 0..50; 50 us left: wait 50 or the CPU's 50, a tie: wait. */
	step(tm, id, in, 1);
	moe_timing_step_end(tm);
	moe_timing_result(tm, &r);
	cr_expect_float_eq(r.total_us, 100.0, 1e-9);
	cr_expect_eq(r.late, 1);
	cr_expect_eq(r.background_copies, 1);
	cr_expect_eq(r.cpu_experts, 1);
	cr_expect_float_eq(r.link_busy_us, 100.0, 1e-9);
	moe_timing_destroy(tm);
}

Test(timing, basic_prefetch_in_idle_time_is_a_hit,
     .description = "a 300 us layer leaves 200 us of idle link after a 100 us copy: a prefetch "
		    "fits, lands, and the next layer hits")
{
	struct moe_timing_config c = tcfg(0, 300);
	struct moe_timing_result r;
	struct moe_timing *tm;
	const uint32_t a[] = {0}, b[] = {1};
	const bool out[] = {false}, in[] = {true};

	cr_assert_eq(moe_timing_create(&c, 2, 4, &tm), 0);
	step(tm, a, out, 1);
	cr_expect(moe_timing_prefetch_useful(tm));
	moe_timing_filled(tm, 1, true);
	moe_timing_step_end(tm);
	step(tm, b, in, 1);
	moe_timing_step_end(tm);
	moe_timing_result(tm, &r);
	cr_expect_float_eq(r.total_us, 600.0, 1e-9);
	cr_expect_eq(r.late, 0);
	cr_expect_eq(r.prefetch_copies, 1);
	cr_expect_eq(r.wasted_prefetch_bytes, 0);
	moe_timing_destroy(tm);
}

Test(timing, basic_prefetch_refused_without_room,
     .description = "a 45 us layer cannot hold a 100 us copy: no prefetch is worth issuing")
{
	struct moe_timing_config c = tcfg(0, 45);
	struct moe_timing *tm;
	const uint32_t a[] = {0};
	const bool in[] = {true};

	cr_assert_eq(moe_timing_create(&c, 2, 4, &tm), 0);
	step(tm, a, in, 1);
	cr_expect_not(moe_timing_prefetch_useful(tm));
	moe_timing_destroy(tm);
}

Test(timing, basic_wasted_prefetch_counts_copied_bytes,
     .description = "a prefetch evicted unused after its copy finished wastes the expert's bytes")
{
	struct moe_timing_config c = tcfg(0, 300);
	struct moe_timing_result r;
	struct moe_timing *tm;
	const uint32_t a[] = {0};
	const bool out[] = {false};

	cr_assert_eq(moe_timing_create(&c, 2, 4, &tm), 0);
	step(tm, a, out, 1);
	cr_expect(moe_timing_prefetch_useful(tm));
	moe_timing_filled(tm, 3, true);
	moe_timing_step_end(tm);
	moe_timing_step_begin(tm); /* the copy lands */
	moe_timing_evicted(tm, 3);
	moe_timing_step_end(tm);
	moe_timing_result(tm, &r);
	cr_expect_eq(r.wasted_prefetch_bytes, 100000);
	moe_timing_destroy(tm);
}

Test(timing, basic_presets, .description = "h200 and slow-link are the documented figures")
{
	struct moe_timing_config c;

	cr_assert_eq(moe_timing_preset_get("h200", &c), 0);
	cr_expect_float_eq(c.link_gbps, 50.0, 1e-9);
	cr_expect_float_eq(c.cpu_gbps, 100.0, 1e-9);
	cr_expect_float_eq(c.layer_us, 45.0, 1e-9);
	cr_assert_eq(moe_timing_preset_get("slow-link", &c), 0);
	cr_expect_float_eq(c.link_gbps, 12.5, 1e-9);
	cr_expect_eq(moe_timing_preset_get("h100", &c), -ENOENT);
	cr_expect_eq(moe_timing_preset_get(NULL, &c), -ENOENT);
}

Test(timing, bad_input_config, .description = "zero or non-finite figures are -EINVAL")
{
	struct moe_timing *tm = NULL;
	struct moe_timing_config c;

	c = tcfg(2, 10);
	c.link_gbps = 0;
	cr_expect_eq(moe_timing_create(&c, 1, 4, &tm), -EINVAL);
	c = tcfg(2, 10);
	c.cpu_gbps = -1;
	cr_expect_eq(moe_timing_create(&c, 1, 4, &tm), -EINVAL);
	c = tcfg(2, NAN);
	cr_expect_eq(moe_timing_create(&c, 1, 4, &tm), -EINVAL);
	c = tcfg(2, 10);
	c.copy_engines = 0;
	cr_expect_eq(moe_timing_create(&c, 1, 4, &tm), -EINVAL);
	c.copy_engines = MOECACHE_PLAN_MAX_ENGINES + 1;
	cr_expect_eq(moe_timing_create(&c, 1, 4, &tm), -EINVAL);
	c = tcfg(2, 10);
	cr_expect_eq(moe_timing_create(&c, 0, 4, &tm), -EINVAL);
	cr_expect_null(tm);
}
