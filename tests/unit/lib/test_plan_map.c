// SPDX-License-Identifier: MIT
/*
 * The plan of a layer against a map region in ordinary memory: the copy
 * queue read from the header the driver publishes (queued, inflight), the
 * look-up of the hits, and the plan of the misses (lib/plan.c).
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "agent/memmap.h"
#include "mc_atomic.h"
#include "libmoecache.h"

/* copy 100 us, CPU 120 us, layer 10 us, 4 layers (horizon 40 us). */
static const struct moecache_plan_cost cost = {
    .copy_us = 100, .cpu_us = 120, .layer_us = 10, .n_engines = 1, .n_layers = 4};

static void set_depth(struct agent_memmap *f, uint32_t queued, uint32_t inflight)
{
	mc_store_release_u32(&f->hdr->queued, queued);
	mc_store_release_u32(&f->hdr->inflight, inflight);
}

Test(plan_map, basic_queue_read_counts_queued_and_inflight,
     .description = "queued + inflight copies ahead, spread over the engines, the first ones "
		    "taking the remainder")
{
	struct moecache_plan_cost c = cost;
	struct moecache_plan_queue q;
	struct agent_memmap f;
	uint32_t depth = 0;

	cr_assert_eq(agent_memmap_init(&f, 4, 8, 0, 8, 6), 0);
	set_depth(&f, 3, 2);
	c.n_engines = 2;
	cr_assert_eq(moecache_plan_queue_read(&f.view, &c, &q, &depth), 0);
	cr_expect_eq(depth, 5);
	cr_expect_float_eq(q.engine_busy_us[0], 300.0, 1e-9);
	cr_expect_float_eq(q.engine_busy_us[1], 200.0, 1e-9);
	cr_expect_float_eq(q.engine_busy_us[2], 0.0, 1e-9);
	cr_expect_float_eq(q.background_us, 0.0, 1e-9);
	agent_memmap_free(&f);
}

Test(plan_map, basic_lookup_marks_hits_and_plans_misses,
     .description = "resident experts are HIT; the misses get what moecache_plan_layer gives "
		    "them over the same queue")
{
	const uint32_t experts[] = {1, 2, 5, 7};
	enum moecache_plan_action want[2];
	const double left[] = {100, 100};
	struct moecache_plan_result r;
	struct moecache_plan_queue q = {0};
	struct agent_memmap f;
	uint8_t act[4];

	cr_assert_eq(agent_memmap_init(&f, 4, 8, 0, 8, 6), 0);
	agent_memmap_publish(&f, 2 * 8 + 2, 0); /* layer 2, expert 2 */
	agent_memmap_publish(&f, 2 * 8 + 7, 3); /* layer 2, expert 7 */
	cr_assert_eq(moecache_plan_lookup(&f.view, &cost, 2, experts, 4, act, &r), 0);
	cr_expect_eq(act[1], MOECACHE_PLAN_HIT);
	cr_expect_eq(act[3], MOECACHE_PLAN_HIT);
	cr_assert_eq(moecache_plan_layer(&cost, &q, left, 2, want, NULL), 0);
	cr_expect_eq(act[0], want[0]);
	cr_expect_eq(act[2], want[1]);
	cr_expect_eq(r.n_hits, 2);
	cr_expect_eq(r.n_waited + r.n_cpu, 2);
	cr_expect_eq(r.queue_depth, 0);
	agent_memmap_free(&f);
}

Test(plan_map, basic_published_depth_moves_a_miss_to_the_cpu,
     .description = "one miss is waited for on an idle link (100 us against 120 on the CPU); "
		    "with two copies queued in the map it is computed on the CPU")
{
	const uint32_t experts[] = {4};
	struct moecache_plan_result r;
	struct agent_memmap f;
	uint8_t act[1];

	cr_assert_eq(agent_memmap_init(&f, 4, 8, 0, 8, 6), 0);
	cr_assert_eq(moecache_plan_lookup(&f.view, &cost, 0, experts, 1, act, &r), 0);
	cr_expect_eq(act[0], MOECACHE_PLAN_WAIT);
	cr_expect_float_eq(r.end_us, 100.0, 1e-9);
	set_depth(&f, 1, 1);
	cr_assert_eq(moecache_plan_lookup(&f.view, &cost, 0, experts, 1, act, &r), 0);
	/* 300 us of copies ahead: longer than a token (40 us), so not admitted. */
	cr_expect_eq(act[0], MOECACHE_PLAN_CPU);
	cr_expect_eq(r.queue_depth, 2);
	cr_expect_eq(r.n_cpu, 1);
	cr_expect_eq(r.n_admitted, 0);
	cr_expect_float_eq(r.end_us, 120.0, 1e-9);
	agent_memmap_free(&f);
}

Test(plan_map, bad_input_lookup_arguments,
     .description = "no map, no actions, too many experts, a bad cost or an expert out of "
		    "range is -EINVAL")
{
	const uint32_t experts[] = {1, 9};
	struct moecache_plan_cost c = cost;
	struct agent_memmap f;
	uint8_t act[2];

	cr_assert_eq(agent_memmap_init(&f, 4, 8, 0, 8, 6), 0);
	cr_expect_eq(moecache_plan_lookup(NULL, &cost, 0, experts, 1, act, NULL), -EINVAL);
	cr_expect_eq(moecache_plan_lookup(&f.view, &cost, 0, experts, 1, NULL, NULL), -EINVAL);
	cr_expect_eq(moecache_plan_lookup(&f.view, &cost, 0, experts, MOECACHE_PLAN_MAX_ITEMS + 1,
					  act, NULL),
		     -EINVAL);
	cr_expect_eq(moecache_plan_lookup(&f.view, &cost, 0, experts, 2, act, NULL), -EINVAL);
	cr_expect_eq(moecache_plan_lookup(&f.view, &cost, 4, experts, 1, act, NULL), -EINVAL);
	c.copy_us = 0;
	cr_expect_eq(moecache_plan_lookup(&f.view, &c, 0, experts, 1, act, NULL), -EINVAL);
	agent_memmap_free(&f);
}

Test(plan_map, bad_input_acquire_plan_needs_a_client,
     .description = "moecache_acquire_plan without a handle is -EINVAL")
{
	const uint32_t experts[] = {1};
	uint32_t slots[1];
	uint8_t act[1];

	cr_expect_eq(
	    moecache_acquire_plan(NULL, &cost, NULL, 0, 0, experts, 1, slots, act, 0, 0, NULL),
	    -EINVAL);
}

Test(plan_map, basic_prefetch_room_is_the_link_before_the_next_layer,
     .description = "layer 450 us, copy 100 us: 4 whole copies fit on an idle link, 2 behind "
		    "two copies the map publishes, none behind five")
{
	struct moecache_plan_cost c = cost;
	struct agent_memmap f;

	cr_assert_eq(agent_memmap_init(&f, 4, 8, 0, 8, 6), 0);
	c.layer_us = 450;
	cr_expect_eq(moecache_plan_prefetch_room(&f.view, &c), 4);
	set_depth(&f, 1, 1);
	cr_expect_eq(moecache_plan_prefetch_room(&f.view, &c), 2);
	set_depth(&f, 3, 2);
	cr_expect_eq(moecache_plan_prefetch_room(&f.view, &c), 0);
	agent_memmap_free(&f);
}

Test(plan_map, basic_prefetch_room_none_when_a_copy_outlasts_the_layer,
     .description = "with the h200 figures (a 252 us copy, a 45 us layer) no prefetch passes "
		    "the gate, as in the simulator")
{
	const struct moecache_plan_cost h200 = {.copy_us = 12582912 / 50e3,
						.cpu_us = 12582912 / 100e3,
						.layer_us = 45,
						.n_engines = 1,
						.n_layers = 16};
	struct agent_memmap f;

	cr_assert_eq(agent_memmap_init(&f, 4, 8, 0, 8, 6), 0);
	cr_expect_eq(moecache_plan_prefetch_room(&f.view, &h200), 0);
	agent_memmap_free(&f);
}

Test(plan_map, bad_input_prefetch_room, .description = "no map or a bad cost is -EINVAL")
{
	struct moecache_plan_cost c = cost;
	struct agent_memmap f;

	cr_assert_eq(agent_memmap_init(&f, 4, 8, 0, 8, 6), 0);
	cr_expect_eq(moecache_plan_prefetch_room(NULL, &cost), -EINVAL);
	c.n_engines = 0;
	cr_expect_eq(moecache_plan_prefetch_room(&f.view, &c), -EINVAL);
	cr_expect_eq(moecache_prefetch_plan(NULL, &cost, 0, NULL, 0, NULL), -EINVAL);
	agent_memmap_free(&f);
}
