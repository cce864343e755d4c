// SPDX-License-Identifier: MIT
/*
 * The fair queue of copies (agent/fairq.h): link time in proportion to the
 * weights while tenants are backlogged, FIFO order kept within a tenant and
 * in FIFO mode, no credit for an idle tenant, bad input refused unchanged.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>

#include "agent/fairq.h"

/* Pops everything; served[t] gets the cost each tenant got in the first `window` of cost. */
static void drain(struct agent_fairq *q, double window, double *served, uint32_t n)
{
	double done = 0;
	uint32_t t, item;
	double cost;

	for (uint32_t i = 0; i < n; i++)
		served[i] = 0;
	while (agent_fairq_pop(q, &t, &item, &cost)) {
		if (done < window)
			served[t] += cost;
		done += cost;
	}
}

Test(fairq, basic_equal_weights_alternate,
     .description = "two backlogged tenants of equal weight are served turn about")
{
	struct agent_fairq q;
	uint32_t t, item, order[8];
	double cost;

	cr_assert_eq(agent_fairq_init(&q, AGENT_FAIRQ_FAIR, 2, 8), 0);
	for (uint32_t i = 0; i < 4; i++)
		cr_assert_eq(agent_fairq_push(&q, 0, i, 1.0), 0);
	for (uint32_t i = 0; i < 4; i++)
		cr_assert_eq(agent_fairq_push(&q, 1, 10 + i, 1.0), 0);
	for (uint32_t i = 0; i < 8; i++) {
		cr_assert(agent_fairq_pop(&q, &t, &item, &cost));
		order[i] = t;
	}
	for (uint32_t i = 0; i < 8; i++)
		cr_expect_eq(order[i], i % 2, "pop %u served tenant %u", i, order[i]);
	cr_assert_not(agent_fairq_pop(&q, &t, &item, &cost));
	agent_fairq_destroy(&q);
}

Test(fairq, basic_fifo_mode_serves_push_order,
     .description = "FIFO mode serves in push order whatever the tenant")
{
	struct agent_fairq q;
	uint32_t t, item;
	double cost;

	cr_assert_eq(agent_fairq_init(&q, AGENT_FAIRQ_FIFO, 2, 8), 0);
	for (uint32_t i = 0; i < 4; i++)
		cr_assert_eq(agent_fairq_push(&q, 0, i, 1.0), 0);
	cr_assert_eq(agent_fairq_push(&q, 1, 99, 1.0), 0);
	for (uint32_t i = 0; i < 4; i++) {
		cr_assert(agent_fairq_pop(&q, &t, &item, &cost));
		cr_expect_eq(t, 0);
		cr_expect_eq(item, i);
	}
	cr_assert(agent_fairq_pop(&q, &t, &item, &cost));
	cr_expect_eq(item, 99);
	agent_fairq_destroy(&q);
}

Test(fairq, basic_late_tenant_not_behind_a_burst,
     .description = "a tenant pushing after another's burst is served second, not last")
{
	struct agent_fairq q;
	uint32_t t, item;
	double cost;

	cr_assert_eq(agent_fairq_init(&q, AGENT_FAIRQ_FAIR, 2, 64), 0);
	for (uint32_t i = 0; i < 50; i++)
		cr_assert_eq(agent_fairq_push(&q, 0, i, 1.0), 0);
	cr_assert(agent_fairq_pop(&q, &t, &item, &cost)); /* the burst's first copy runs */
	cr_assert_eq(agent_fairq_push(&q, 1, 7, 1.0), 0);
	cr_assert(agent_fairq_pop(&q, &t, &item, &cost));
	cr_expect_eq(t, 1, "the late tenant waited behind %u copies of the burst", item);
	agent_fairq_destroy(&q);
}

Test(fairq, basic_weights_share_the_link,
     .description = "weights 3:1 give backlogged tenants link time 3:1 within one copy")
{
	struct agent_fairq q;
	double served[2];

	cr_assert_eq(agent_fairq_init(&q, AGENT_FAIRQ_FAIR, 2, 256), 0);
	cr_assert_eq(agent_fairq_set_weight(&q, 0, 3.0), 0);
	for (uint32_t i = 0; i < 200; i++) {
		cr_assert_eq(agent_fairq_push(&q, 0, i, 1.0), 0);
		cr_assert_eq(agent_fairq_push(&q, 1, i, 1.0), 0);
	}
	drain(&q, 200.0, served, 2);
	cr_expect(fabs(served[0] - 150.0) <= 1.0, "tenant 0 got %g of 200", served[0]);
	cr_expect(fabs(served[1] - 50.0) <= 1.0, "tenant 1 got %g of 200", served[1]);
	agent_fairq_destroy(&q);
}

Test(fairq, basic_unequal_costs_share_by_cost,
     .description = "a tenant of large copies gets the same time, not the same count")
{
	struct agent_fairq q;
	double served[2];

	cr_assert_eq(agent_fairq_init(&q, AGENT_FAIRQ_FAIR, 2, 256), 0);
	for (uint32_t i = 0; i < 100; i++)
		cr_assert_eq(agent_fairq_push(&q, 0, i, 4.0), 0);
	for (uint32_t i = 0; i < 200; i++)
		cr_assert_eq(agent_fairq_push(&q, 1, i, 1.0), 0);
	drain(&q, 200.0, served, 2);
	cr_expect(fabs(served[0] - served[1]) <= 4.0, "served %g and %g", served[0], served[1]);
	agent_fairq_destroy(&q);
}

Test(fairq, basic_idle_tenant_saves_no_credit,
     .description = "a tenant idle while another was served gets no burst of credit back")
{
	struct agent_fairq q;
	uint32_t t, item, run = 0;
	double cost;

	cr_assert_eq(agent_fairq_init(&q, AGENT_FAIRQ_FAIR, 2, 128), 0);
	for (uint32_t i = 0; i < 50; i++)
		cr_assert_eq(agent_fairq_push(&q, 0, i, 1.0), 0);
	for (uint32_t i = 0; i < 40; i++)
		cr_assert(agent_fairq_pop(&q, &t, &item, &cost));
	for (uint32_t i = 0; i < 20; i++)
		cr_assert_eq(agent_fairq_push(&q, 1, i, 1.0), 0);
	/* Tenant 1 now alternates with tenant 0's 10 left, not 20 in a row. */
	for (uint32_t i = 0; i < 4; i++) {
		cr_assert(agent_fairq_pop(&q, &t, &item, &cost));
		run += t == 1;
	}
	cr_expect_eq(run, 2, "tenant 1 took %u of the next 4", run);
	agent_fairq_destroy(&q);
}

Test(fairq, basic_ahead_fifo_and_fair,
     .description =
	 "ahead counts all queued in FIFO mode, the copies tagged before a new batch when fair")
{
	struct agent_fairq fifo, fair;

	cr_assert_eq(agent_fairq_init(&fifo, AGENT_FAIRQ_FIFO, 3, 64), 0);
	cr_assert_eq(agent_fairq_init(&fair, AGENT_FAIRQ_FAIR, 3, 64), 0);
	for (uint32_t i = 0; i < 40; i++) {
		cr_assert_eq(agent_fairq_push(&fifo, 0, i, 1.0), 0);
		cr_assert_eq(agent_fairq_push(&fair, 0, i, 1.0), 0);
	}
	cr_assert_eq(agent_fairq_push(&fifo, 2, 0, 1.0), 0);
	cr_assert_eq(agent_fairq_push(&fair, 2, 0, 1.0), 0);
	cr_expect_float_eq(agent_fairq_ahead(&fifo, 1), 41.0, 1e-9);
	/* A batch of tenant 1 starts at tag 0: behind the two copies tagged 0, before the rest. */
	cr_expect_float_eq(agent_fairq_ahead(&fair, 1), 2.0, 1e-9);
	cr_expect_float_eq(agent_fairq_queued(&fair, 0), 40.0, 1e-9);
	agent_fairq_destroy(&fifo);
	agent_fairq_destroy(&fair);
}

Test(fairq, bad_input_refused_unchanged,
     .description = "bad tenants, weights, costs and a full FIFO are refused and change nothing")
{
	struct agent_fairq q;
	uint32_t t, item;
	double cost;

	cr_expect_eq(agent_fairq_init(&q, AGENT_FAIRQ_FAIR, 0, 4), -EINVAL);
	cr_expect_eq(agent_fairq_init(&q, AGENT_FAIRQ_FAIR, 2, 0), -EINVAL);
	cr_expect_eq(agent_fairq_init(&q, (enum agent_fairq_mode)7, 2, 4), -EINVAL);
	cr_assert_eq(agent_fairq_init(&q, AGENT_FAIRQ_FAIR, 2, 2), 0);
	cr_expect_eq(agent_fairq_set_weight(&q, 2, 1.0), -EINVAL);
	cr_expect_eq(agent_fairq_set_weight(&q, 0, 0.0), -EINVAL);
	cr_expect_eq(agent_fairq_set_weight(&q, 0, NAN), -EINVAL);
	cr_expect_eq(agent_fairq_set_weight(&q, 0, INFINITY), -EINVAL);
	cr_expect_eq(agent_fairq_push(&q, 2, 0, 1.0), -EINVAL);
	cr_expect_eq(agent_fairq_push(&q, 0, 0, -1.0), -EINVAL);
	cr_expect_eq(agent_fairq_push(&q, 0, 0, NAN), -EINVAL);
	cr_assert_eq(agent_fairq_push(&q, 0, 1, 1.0), 0);
	cr_assert_eq(agent_fairq_push(&q, 0, 2, 1.0), 0);
	cr_expect_eq(agent_fairq_push(&q, 0, 3, 1.0), -ENOSPC);
	cr_expect_eq(q.len, 2);
	cr_expect_float_eq(agent_fairq_queued(&q, 0), 2.0, 1e-9);
	cr_expect_float_eq(agent_fairq_ahead(&q, 5), 0.0, 1e-9);
	cr_assert(agent_fairq_pop(&q, &t, &item, &cost));
	cr_expect_eq(item, 1);
	cr_assert(agent_fairq_pop(&q, &t, &item, &cost));
	cr_expect_eq(item, 2);
	cr_expect_not(agent_fairq_pop(&q, &t, &item, &cost));
	agent_fairq_destroy(&q);
}
