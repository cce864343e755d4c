// SPDX-License-Identifier: MIT
/* The plan of one layer (libmoecache.h, lib/plan.c) on hand-computed cases. */
#include <errno.h>
#include <math.h>

#include <criterion/criterion.h>

#include "libmoecache.h"

/* copy 100 us, CPU 50 us, layer 10 us, one engine, 4 layers: horizon 40 us. */
static const struct moecache_plan_cost cost_base = {
    .copy_us = 100, .cpu_us = 50, .layer_us = 10, .n_engines = 1, .n_layers = 4};

static double plan(const struct moecache_plan_cost *c, const struct moecache_plan_queue *q,
		   const double *left, uint32_t n, enum moecache_plan_action *act)
{
	double end = -1;

	cr_assert_eq(moecache_plan_layer(c, q, left, n, act, &end), 0);
	return end;
}

Test(plan, basic_no_miss_costs_the_layer,
     .description = "a layer with nothing to copy takes layer_us")
{
	struct moecache_plan_queue q = {0};

	cr_expect_float_eq(plan(&cost_base, &q, NULL, 0, NULL), 10.0, 1e-9);
}

Test(plan, basic_no_cpu_waits_for_every_copy,
     .description = "with cpu_us 0 every miss is waited for, one after another on one engine")
{
	struct moecache_plan_cost c = cost_base;
	struct moecache_plan_queue q = {0};
	const double left[] = {100, 100, 100};
	enum moecache_plan_action act[3];

	c.cpu_us = 0;
	cr_expect_float_eq(plan(&c, &q, left, 3, act), 300.0, 1e-9);
	for (int i = 0; i < 3; i++)
		cr_expect_eq(act[i], MOECACHE_PLAN_WAIT);
}

Test(plan, basic_split_balances_link_and_cpu,
     .description = "three misses: two on the CPU (100 us) and one copy (100 us) beat any other "
		    "split (300, 200, 150 us)")
{
	struct moecache_plan_queue q = {0};
	const double left[] = {100, 100, 100};
	enum moecache_plan_action act[3];

	cr_expect_float_eq(plan(&cost_base, &q, left, 3, act), 100.0, 1e-9);
	/* Equal copies: the caller's first ones go to the CPU. */
	cr_expect_neq(act[0], MOECACHE_PLAN_WAIT);
	cr_expect_neq(act[1], MOECACHE_PLAN_WAIT);
	cr_expect_eq(act[2], MOECACHE_PLAN_WAIT);
}

Test(plan, basic_tie_prefers_the_copy,
     .description = "when the CPU is no faster than the copy, the miss is waited for (admitted)")
{
	struct moecache_plan_cost c = cost_base;
	struct moecache_plan_queue q = {0};
	const double left[] = {100};
	enum moecache_plan_action act[1];

	c.cpu_us = 100;
	cr_expect_float_eq(plan(&c, &q, left, 1, act), 100.0, 1e-9);
	cr_expect_eq(act[0], MOECACHE_PLAN_WAIT);
}

Test(plan, basic_queue_depth_moves_misses_to_cpu,
     .description = "150 us of demand copies already queued: a 100 us copy would end at 250, the "
		    "CPU takes it in 120")
{
	struct moecache_plan_cost c = cost_base;
	struct moecache_plan_queue q = {.engine_busy_us = {150}};
	const double left[] = {100};
	enum moecache_plan_action act[1];

	c.cpu_us = 120;
	cr_expect_float_eq(plan(&c, &q, left, 1, act), 120.0, 1e-9);
	cr_expect_neq(act[0], MOECACHE_PLAN_WAIT);
	/* Without the queue the copy wins. */
	q.engine_busy_us[0] = 0;
	cr_expect_float_eq(plan(&c, &q, left, 1, act), 100.0, 1e-9);
	cr_expect_eq(act[0], MOECACHE_PLAN_WAIT);
}

Test(plan, basic_engines_copy_in_parallel,
     .description = "two engines copy two misses at once (100 us), faster than sending one to "
		    "a 150 us CPU")
{
	struct moecache_plan_cost c = cost_base;
	struct moecache_plan_queue q = {0};
	const double left[] = {100, 100};
	enum moecache_plan_action act[2];

	c.n_engines = 2;
	c.cpu_us = 150;
	cr_expect_float_eq(plan(&c, &q, left, 2, act), 100.0, 1e-9);
	cr_expect_eq(act[0], MOECACHE_PLAN_WAIT);
	cr_expect_eq(act[1], MOECACHE_PLAN_WAIT);
}

Test(plan, basic_copy_under_way_is_waited_for,
     .description = "an expert with 30 us of copy left is waited for; the fresh miss goes to "
		    "the CPU (50 us)")
{
	struct moecache_plan_queue q = {0};
	const double left[] = {30, 100};
	enum moecache_plan_action act[2];

	cr_expect_float_eq(plan(&cost_base, &q, left, 2, act), 50.0, 1e-9);
	cr_expect_eq(act[0], MOECACHE_PLAN_WAIT);
	cr_expect_neq(act[1], MOECACHE_PLAN_WAIT);
}

Test(plan, basic_admits_while_queue_drains_before_next_use,
     .description = "horizon 200 us: behind one waited copy (100 us) two CPU experts are "
		    "admitted (queue 100, then 200 ahead); the third would wait 300")
{
	struct moecache_plan_cost c = {
	    .copy_us = 100, .cpu_us = 10, .layer_us = 100, .n_engines = 1, .n_layers = 2};
	struct moecache_plan_queue q = {0};
	const double left[] = {100, 100, 100, 100};
	enum moecache_plan_action act[4];

	/* 3 on the CPU (30 us) and 1 copy end at 100, as do 4 on the CPU: fewer wins. */
	cr_expect_float_eq(plan(&c, &q, left, 4, act), 100.0, 1e-9);
	cr_expect_eq(act[0], MOECACHE_PLAN_CPU);
	cr_expect_eq(act[1], MOECACHE_PLAN_CPU_ADMIT);
	cr_expect_eq(act[2], MOECACHE_PLAN_CPU_ADMIT);
	cr_expect_eq(act[3], MOECACHE_PLAN_WAIT);
	/* Background copies already queued take the room. */
	q.background_us = 100;
	plan(&c, &q, left, 4, act);
	cr_expect_eq(act[1], MOECACHE_PLAN_CPU);
	cr_expect_eq(act[2], MOECACHE_PLAN_CPU_ADMIT);
}

Test(plan, basic_idle_link_admits_every_cpu_expert,
     .description = "with an empty queue a CPU expert is admitted, so computing it costs no "
		    "future hit; with a queue longer than a token it is not")
{
	struct moecache_plan_queue q = {0};
	const double left[] = {100};
	enum moecache_plan_action act[1];

	/* horizon 4 x 10 = 40 us */
	cr_expect_float_eq(plan(&cost_base, &q, left, 1, act), 50.0, 1e-9);
	cr_expect_eq(act[0], MOECACHE_PLAN_CPU_ADMIT);
	q.background_us = 41;
	plan(&cost_base, &q, left, 1, act);
	cr_expect_eq(act[0], MOECACHE_PLAN_CPU);
}

Test(plan, bad_input_cost_and_items, .description = "bad costs and arguments are -EINVAL")
{
	struct moecache_plan_queue q = {0};
	double left[] = {100}, end;
	enum moecache_plan_action act[1];
	struct moecache_plan_cost c;

	c = cost_base;
	c.copy_us = 0;
	cr_expect_eq(moecache_plan_layer(&c, &q, left, 1, act, &end), -EINVAL);
	c = cost_base;
	c.cpu_us = -1;
	cr_expect_eq(moecache_plan_layer(&c, &q, left, 1, act, &end), -EINVAL);
	c = cost_base;
	c.layer_us = NAN;
	cr_expect_eq(moecache_plan_layer(&c, &q, left, 1, act, &end), -EINVAL);
	c = cost_base;
	c.n_engines = 0;
	cr_expect_eq(moecache_plan_layer(&c, &q, left, 1, act, &end), -EINVAL);
	c.n_engines = MOECACHE_PLAN_MAX_ENGINES + 1;
	cr_expect_eq(moecache_plan_layer(&c, &q, left, 1, act, &end), -EINVAL);
	c = cost_base;
	c.n_layers = 0;
	cr_expect_eq(moecache_plan_layer(&c, &q, left, 1, act, &end), -EINVAL);
	cr_expect_eq(
	    moecache_plan_layer(&cost_base, &q, left, MOECACHE_PLAN_MAX_ITEMS + 1, act, &end),
	    -EINVAL);
	cr_expect_eq(moecache_plan_layer(&cost_base, NULL, left, 1, act, &end), -EINVAL);
	cr_expect_eq(moecache_plan_layer(&cost_base, &q, NULL, 1, act, &end), -EINVAL);
	left[0] = -1;
	cr_expect_eq(moecache_plan_layer(&cost_base, &q, left, 1, act, &end), -EINVAL);
	left[0] = INFINITY;
	cr_expect_eq(moecache_plan_layer(&cost_base, &q, left, 1, act, &end), -EINVAL);
}
