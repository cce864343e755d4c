// SPDX-License-Identifier: GPL-2.0
/*
 * libmoecache and the driver's bound on one tenant's WAITs (max_user_waits,
 * docs/abi.md "Security model"): a WAIT past the bound is EAGAIN from the
 * driver, with nothing done; moecache_acquire() tries it again until the
 * caller's timeout, so a tenant of many threads or processes waits its
 * turn instead of failing.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "libmoecache.h"

#define NOBODY 65534
/* Layer 1's experts: none is resident until the test fills them. */
#define LW_LAYER 1
/* The timeout of a WAIT that gets in halfway through it. */
#define LW_TIMEOUT_MS 1600

struct lw_job {
	char pool[MOECACHE_NAME_LEN];
	char node[64];
	__u32 expert;
	uint32_t timeout_ms;
	int ret; /* 1 until its acquire returned */
	uint32_t n_pinned;
	uint64_t took_ms; /* how long its acquire took */
	struct vm_gate done;
};

/* As uid NOBODY, through libmoecache: one WAIT for one expert. */
static void lw_client_main(void *arg)
{
	struct lw_job *job = arg;
	struct moecache_acquire_result res = {0};
	struct moecache *mc;
	uint32_t slot;
	int fd = vm_become_unprivileged(NOBODY, NOBODY, job->node);

	close(fd);
	VM_OK(moecache_open(job->node, &mc));
	VM_OK(moecache_attach(mc, job->pool, MOECACHE_ROLE_CLIENT));
	job->took_ms = vm_now_ms();
	job->ret = moecache_acquire(mc, LW_LAYER, &job->expert, 1, &slot, MOECACHE_ACQ_WAIT,
				    job->timeout_ms, &res);
	job->took_ms = vm_now_ms() - job->took_ms;
	job->n_pinned = res.n_pinned;
	vm_gate_pass(&job->done);
	moecache_close(mc);
}

static struct lw_job *lw_start(const char *pool, __u32 expert, uint32_t timeout_ms, pid_t *pid)
{
	struct lw_job *job = vm_shared(sizeof(*job));

	snprintf(job->pool, sizeof(job->pool), "%s", pool);
	vm_get_node(job->node, sizeof(job->node));
	job->expert = expert;
	job->timeout_ms = timeout_ms;
	job->ret = 1;
	vm_gate_open(&job->done);
	*pid = vm_spawn(lw_client_main, job);
	return job;
}

static void lw_end(struct lw_job *job, pid_t pid)
{
	vm_reap_ok(pid, 10000, "a client");
	vm_put_node(job->node);
}

static void lw_setup(struct vm_ctx *ctx, struct vm_view *a, unsigned long long *old)
{
	struct vm_geom g = vm_geom_default;

	g.mode = 0644;
	vm_pool_create(ctx->pool, &g);
	vm_attach(a, ctx->pool, MOECACHE_ROLE_AGENT);
	*old = vm_param_set("max_user_waits", 1);
}

static void lw_teardown(struct vm_ctx *ctx, struct vm_view *a, unsigned long long old)
{
	vm_param_set("max_user_waits", old);
	vm_detach(a);
	vm_pool_destroy(ctx->pool);
}

/* Waits until the tenant's first WAIT has asked for its expert. */
static void lw_wait_asked(const struct vm_view *a, __u32 expert)
{
	VM_WAIT_FOR(vm_load32(&a->access[vm_idx(a, LW_LAYER, expert)]) > 0, 20000);
}

static void basic_lib_wait_retries_past_user_waits(struct vm_ctx *ctx)
{
	struct lw_job *first, *second;
	unsigned long long old;
	struct vm_view a;
	pid_t p1, p2;

	lw_setup(ctx, &a, &old);
	first = lw_start(ctx->pool, 0, 0, &p1);
	lw_wait_asked(&a, 0);
	/* The tenant's one WAIT place is taken: the driver says EAGAIN to this one. */
	second = lw_start(ctx->pool, 1, 20000, &p2);
	vm_sleep_ms(300);
	VM_ASSERT_MSG(second->ret == 1,
		      "the second WAIT returned %d (%s) while the first held the tenant's place: "
		      "want it still waiting",
		      second->ret, second->ret < 0 ? vm_errname(-second->ret) : "ok");
	/* The first one ends; the second gets in, misses, and is filled. */
	vm_fill(&a, 0, LW_LAYER, 0);
	vm_gate_wait(&first->done, 20000, "the first WAIT");
	VM_EQ(first->ret, 0);
	lw_wait_asked(&a, 1);
	vm_fill(&a, 1, LW_LAYER, 1);
	vm_gate_wait(&second->done, 20000, "the second WAIT");
	VM_EQ(second->ret, 0);
	VM_EQ(second->n_pinned, 1);
	lw_end(second, p2);
	lw_end(first, p1);
	lw_teardown(ctx, &a, old);
}

static void basic_lib_wait_past_user_waits_times_out(struct vm_ctx *ctx)
{
	struct lw_job *first, *second;
	unsigned long long old;
	struct vm_view a;
	pid_t p1, p2;

	lw_setup(ctx, &a, &old);
	first = lw_start(ctx->pool, 0, 0, &p1);
	lw_wait_asked(&a, 0);
	second = lw_start(ctx->pool, 1, 200, &p2);
	vm_gate_wait(&second->done, 20000, "the second WAIT");
	VM_EQ(second->ret, -ETIMEDOUT);
	VM_EQ(second->n_pinned, 0);
	/* It never got in: its expert was never asked for. */
	VM_EQ(vm_load32(&a.access[vm_idx(&a, LW_LAYER, 1)]), 0);
	vm_fill(&a, 0, LW_LAYER, 0);
	vm_gate_wait(&first->done, 20000, "the first WAIT");
	VM_EQ(first->ret, 0);
	lw_end(second, p2);
	lw_end(first, p1);
	lw_teardown(ctx, &a, old);
}

/*
 * A WAIT that gets in late waits only for what is left of its timeout:
 * the caller's timeout_ms bounds the whole call, pauses included.
 */
static void basic_lib_wait_past_user_waits_keeps_its_timeout(struct vm_ctx *ctx)
{
	struct lw_job *first, *second;
	unsigned long long old;
	struct vm_view a;
	pid_t p1, p2;

	lw_setup(ctx, &a, &old);
	first = lw_start(ctx->pool, 0, 0, &p1);
	lw_wait_asked(&a, 0);
	second = lw_start(ctx->pool, 1, LW_TIMEOUT_MS, &p2);
	vm_sleep_ms(LW_TIMEOUT_MS / 2);
	/* The first one ends: the second gets in, and its expert is never filled. */
	vm_fill(&a, 0, LW_LAYER, 0);
	vm_gate_wait(&first->done, 20000, "the first WAIT");
	VM_EQ(first->ret, 0);
	vm_gate_wait(&second->done, 20000, "the second WAIT");
	VM_EQ(second->ret, -ETIMEDOUT);
	VM_ASSERT_MSG(second->took_ms < LW_TIMEOUT_MS + LW_TIMEOUT_MS / 4,
		      "the second WAIT took %llu ms with a timeout of %u ms",
		      (unsigned long long)second->took_ms, LW_TIMEOUT_MS);
	lw_end(second, p2);
	lw_end(first, p1);
	lw_teardown(ctx, &a, old);
}

static const struct vm_test lib_wait_tests[] = {
    VM_TEST(basic_lib_wait_retries_past_user_waits,
	    "libmoecache's WAIT past the tenant's max_user_waits is tried again until it gets in, "
	    "not failed with EAGAIN"),
    VM_TEST(basic_lib_wait_past_user_waits_times_out,
	    "libmoecache's WAIT that never gets a place ends with ETIMEDOUT at its timeout, having "
	    "asked for nothing"),
    VM_TEST(basic_lib_wait_past_user_waits_keeps_its_timeout,
	    "libmoecache's WAIT that gets a place halfway through its timeout waits only for "
	    "the rest of it"),
};

const struct vm_suite vm_lib_wait_suite = {lib_wait_tests, ARRAY_SIZE(lib_wait_tests)};
