// SPDX-License-Identifier: MIT
/* The deferred-release queue with fake markers: a marker passes when the test says so. */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>

#include "lib/gpu/release_queue.h"

struct fake_marker {
	int state; /* 0 pending, 1 passed, < 0 failed */
	int puts;
};

struct fake_ctx {
	uint32_t released[64];
	uint32_t n_released;
	int calls;
	int release_ret;
	int waits;
};

static int fake_query(void *ctx, void *marker)
{
	return ((struct fake_marker *)marker)->state;
}

static int fake_wait(void *ctx, void *marker)
{
	struct fake_marker *m = marker;

	((struct fake_ctx *)ctx)->waits++;
	if (m->state == 0)
		m->state = 1; /* "the GPU caught up" */
	return m->state < 0 ? m->state : 0;
}

static int fake_release(void *ctx, const uint32_t *slots, uint32_t count)
{
	struct fake_ctx *c = ctx;

	c->calls++;
	for (uint32_t i = 0; i < count; i++)
		c->released[c->n_released++] = slots[i];
	return c->release_ret;
}

static void fake_put(void *ctx, void *marker)
{
	((struct fake_marker *)marker)->puts++;
}

static const struct mc_release_ops fake_ops = {
    .query = fake_query,
    .wait = fake_wait,
    .release = fake_release,
    .put_marker = fake_put,
};

Test(release_queue, basic_pending_until_passed,
     .description = "nothing is released while the marker is pending")
{
	struct fake_ctx ctx = {0};
	struct fake_marker m = {0};
	struct mc_release_queue q;
	uint32_t slots[] = {4, 9};

	mc_release_queue_init(&q, &fake_ops, &ctx);
	cr_assert_eq(mc_release_queue_push(&q, &m, slots, 2), 0);
	cr_expect_eq(mc_release_queue_poll(&q), 0);
	cr_expect_eq(ctx.n_released, 0);
	cr_expect_eq(mc_release_queue_len(&q), 1);
	m.state = 1;
	cr_expect_eq(mc_release_queue_poll(&q), 1);
	cr_expect_eq(ctx.n_released, 2);
	cr_expect_eq(ctx.released[0], 4);
	cr_expect_eq(ctx.released[1], 9);
	cr_expect_eq(m.puts, 1);
	cr_expect_eq(mc_release_queue_len(&q), 0);
	mc_release_queue_destroy(&q);
}

Test(release_queue, basic_out_of_order,
     .description = "markers of different streams pass out of order; each releases its own slots")
{
	struct fake_ctx ctx = {0};
	struct fake_marker a = {0}, b = {0};
	struct mc_release_queue q;
	uint32_t sa[] = {1}, sb[] = {2, 3};

	mc_release_queue_init(&q, &fake_ops, &ctx);
	cr_assert_eq(mc_release_queue_push(&q, &a, sa, 1), 0);
	cr_assert_eq(mc_release_queue_push(&q, &b, sb, 2), 0);
	b.state = 1;
	cr_expect_eq(mc_release_queue_poll(&q), 1);
	cr_expect_eq(ctx.n_released, 2);
	cr_expect_eq(ctx.released[0], 2);
	cr_expect_eq(a.puts, 0);
	a.state = 1;
	cr_expect_eq(mc_release_queue_poll(&q), 1);
	cr_expect_eq(ctx.released[2], 1);
	mc_release_queue_destroy(&q);
}

Test(release_queue, basic_failed_work_still_releases,
     .description = "a marker whose work failed drops its pins and reports the error")
{
	struct fake_ctx ctx = {0};
	struct fake_marker m = {.state = -EIO};
	struct mc_release_queue q;
	uint32_t slots[] = {7};

	mc_release_queue_init(&q, &fake_ops, &ctx);
	cr_assert_eq(mc_release_queue_push(&q, &m, slots, 1), 0);
	cr_expect_eq(mc_release_queue_poll(&q), -EIO);
	cr_expect_eq(ctx.n_released, 1);
	cr_expect_eq(mc_release_queue_len(&q), 0);
	mc_release_queue_destroy(&q);
}

Test(release_queue, basic_release_error_reported,
     .description = "an error of the release itself is returned, the entry still leaves")
{
	struct fake_ctx ctx = {.release_ret = -EINVAL};
	struct fake_marker m = {.state = 1};
	struct mc_release_queue q;
	uint32_t slots[] = {7};

	mc_release_queue_init(&q, &fake_ops, &ctx);
	cr_assert_eq(mc_release_queue_push(&q, &m, slots, 1), 0);
	cr_expect_eq(mc_release_queue_poll(&q), -EINVAL);
	cr_expect_eq(mc_release_queue_len(&q), 0);
	cr_expect_eq(m.puts, 1);
	mc_release_queue_destroy(&q);
}

Test(release_queue, basic_flush_waits_all,
     .description = "flush waits for every marker and releases all")
{
	struct fake_ctx ctx = {0};
	struct fake_marker m[3] = {{0}, {.state = 1}, {0}};
	struct mc_release_queue q;
	uint32_t slots[] = {10, 11, 12};

	mc_release_queue_init(&q, &fake_ops, &ctx);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(mc_release_queue_push(&q, &m[i], &slots[i], 1), 0);
	cr_expect_eq(mc_release_queue_flush(&q), 0);
	cr_expect_eq(ctx.n_released, 3);
	cr_expect_eq(ctx.waits, 3);
	cr_expect_eq(mc_release_queue_len(&q), 0);
	mc_release_queue_destroy(&q);
}

Test(release_queue, lifetime_destroy_releases_nothing,
     .description = "destroying the queue frees markers without dropping pins")
{
	struct fake_ctx ctx = {0};
	struct fake_marker m = {.state = 1};
	struct mc_release_queue q;
	uint32_t slots[] = {3};

	mc_release_queue_init(&q, &fake_ops, &ctx);
	cr_assert_eq(mc_release_queue_push(&q, &m, slots, 1), 0);
	mc_release_queue_destroy(&q);
	cr_expect_eq(ctx.calls, 0);
	cr_expect_eq(m.puts, 1);
}

Test(release_queue, basic_slots_copied,
     .description = "the queue keeps its own copy of the slot list")
{
	struct fake_ctx ctx = {0};
	struct fake_marker m = {0};
	struct mc_release_queue q;
	uint32_t slots[] = {5, 6};

	mc_release_queue_init(&q, &fake_ops, &ctx);
	cr_assert_eq(mc_release_queue_push(&q, &m, slots, 2), 0);
	slots[0] = 99;
	m.state = 1;
	cr_expect_eq(mc_release_queue_poll(&q), 1);
	cr_expect_eq(ctx.released[0], 5);
	mc_release_queue_destroy(&q);
}

Test(release_queue, bad_input_null_slots, .description = "a count without slots is -EINVAL")
{
	struct fake_ctx ctx = {0};
	struct fake_marker m = {0};
	struct mc_release_queue q;

	mc_release_queue_init(&q, &fake_ops, &ctx);
	cr_expect_eq(mc_release_queue_push(&q, &m, NULL, 2), -EINVAL);
	cr_expect_eq(mc_release_queue_len(&q), 0);
	mc_release_queue_destroy(&q);
}
