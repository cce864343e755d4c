// SPDX-License-Identifier: GPL-2.0
/*
 * MOECACHE_ACQ_CPU (uapi/moecache.h, docs/abi.md): the caller computes the
 * call's misses on the CPU, so they reach the agent as MOECACHE_REQ_CPU
 * requests instead of MOECACHE_REQ_DEMAND; an expert that a plain or
 * waiting acquire also asked for is a demand.
 */
#include <poll.h>
#include <sys/ioctl.h>

#include "harness.h"

#define AC_NONE 0xffffffffu /* no second asker */

struct ac_env {
	struct vm_view a;  /* agent */
	struct vm_view c1; /* first asker */
	struct vm_view c2; /* second asker */
};

static void ac_setup(struct vm_ctx *ctx, struct ac_env *env)
{
	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&env->a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&env->c1, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&env->c2, ctx->pool, MOECACHE_ROLE_CLIENT);
}

static void ac_teardown(struct vm_ctx *ctx, struct ac_env *env)
{
	vm_detach(&env->c2);
	vm_detach(&env->c1);
	vm_detach(&env->a);
	vm_pool_destroy(ctx->pool);
}

/* One miss of (layer, expert) by c with flags: nothing hits. */
static void ac_miss(const struct vm_view *c, __u32 layer, __u32 expert, __u32 flags)
{
	struct moecache_acquire acq;
	__u32 slot;

	vm_acquire(c, layer, &expert, 1, &slot, flags, &acq);
	VM_EQ(acq.n_hits, 0);
	VM_EQ(slot, MOECACHE_NONE);
}

/* The agent reads exactly one request: (layer, expert) with flags. */
static void ac_expect_request_at(const char *file, int line, const struct vm_view *a, __u32 layer,
				 __u32 expert, __u32 flags)
{
	struct moecache_request reqs[2];
	size_t n = vm_read_requests(a, reqs, 2, 1000);

	if (n != 1)
		vm_fail_at(file, line, "read %zu requests, expected 1", n);
	if (reqs[0].layer != layer || reqs[0].expert != expert || reqs[0].flags != flags)
		vm_fail_at(file, line, "request %u/%u flags %#x; expected %u/%u flags %#x",
			   reqs[0].layer, reqs[0].expert, reqs[0].flags, layer, expert, flags);
}

#define AC_EXPECT_REQUEST(a, layer, expert, flags)                                                 \
	ac_expect_request_at(__FILE__, __LINE__, (a), (layer), (expert), (flags))

static const struct {
	const char *what;
	__u32 first;  /* flags of c1's acquire */
	__u32 second; /* flags of c2's acquire of the same expert, or AC_NONE */
	__u32 want;   /* the request's flags */
} ac_cases[] = {
    {"a CPU acquire alone", MOECACHE_ACQ_CPU, AC_NONE, MOECACHE_REQ_CPU},
    {"a plain acquire alone", 0, AC_NONE, MOECACHE_REQ_DEMAND},
    {"CPU, then plain", MOECACHE_ACQ_CPU, 0, MOECACHE_REQ_DEMAND},
    {"plain, then CPU", 0, MOECACHE_ACQ_CPU, MOECACHE_REQ_DEMAND},
    {"CPU twice", MOECACHE_ACQ_CPU, MOECACHE_ACQ_CPU, MOECACHE_REQ_CPU},
};

static void basic_acq_cpu_request_flags(struct vm_ctx *ctx)
{
	struct ac_env env;
	__u32 i;

	ac_setup(ctx, &env);
	for (i = 0; i < ARRAY_SIZE(ac_cases); i++) {
		/* One expert per case, none resident: each a miss. */
		ac_miss(&env.c1, 0, i, ac_cases[i].first);
		if (ac_cases[i].second != AC_NONE)
			ac_miss(&env.c2, 0, i, ac_cases[i].second);
		AC_EXPECT_REQUEST(&env.a, 0, i, ac_cases[i].want);
	}
	ac_teardown(ctx, &env);
}

static void basic_acq_cpu_waiter_wins(struct vm_ctx *ctx)
{
	struct vm_waiter *w;
	struct ac_env env;
	pid_t pid;
	__u32 e = 3;

	ac_setup(ctx, &env);
	w = vm_waiter_new(ctx->pool, 1, &e, 1, MOECACHE_ACQ_WAIT, 0);
	pid = vm_waiter_start(w);
	VM_WAIT_FOR(__atomic_load_n(&env.a.hdr->queued, __ATOMIC_RELAXED) == 1, 5000);
	/* The CPU client's miss joins the waiter's request: still a demand. */
	ac_miss(&env.c1, 1, e, MOECACHE_ACQ_CPU);
	AC_EXPECT_REQUEST(&env.a, 1, e, MOECACHE_REQ_DEMAND);
	vm_kill(pid, "the WAIT acquire");
	ac_teardown(ctx, &env);
}

static void basic_acq_cpu_no_queue(struct vm_ctx *ctx)
{
	struct moecache_stats st;
	struct ac_env env;

	ac_setup(ctx, &env);
	ac_miss(&env.c1, 2, 5, MOECACHE_ACQ_CPU | MOECACHE_ACQ_NO_QUEUE);
	vm_stats(&env.c1, MOECACHE_NONE, &st);
	VM_EQ(st.queued, 0);
	VM_EQ(vm_poll(&env.a, 0) & POLLIN, 0);
	ac_teardown(ctx, &env);
}

static void basic_acq_cpu_hits_pinned(struct vm_ctx *ctx)
{
	struct moecache_acquire acq;
	struct ac_env env;
	__u32 e[2] = {6, 7}, slots[2];

	ac_setup(ctx, &env);
	vm_fill(&env.a, 0, 3, 6);
	vm_acquire(&env.c1, 3, e, 2, slots, MOECACHE_ACQ_CPU, &acq);
	/* The resident one is pinned as without CPU; only the miss is queued. */
	VM_EQ(acq.n_hits, 1);
	VM_EQ(acq.n_pinned, 1);
	VM_EQ(slots[0], 0);
	VM_EQ(slots[1], MOECACHE_NONE);
	AC_EXPECT_REQUEST(&env.a, 3, 7, MOECACHE_REQ_CPU);
	vm_release(&env.c1, slots, 1);
	ac_teardown(ctx, &env);
}

static void bad_input_acq_cpu_with_wait(struct vm_ctx *ctx)
{
	static const __u32 flags[] = {
	    MOECACHE_ACQ_CPU | MOECACHE_ACQ_WAIT,
	    MOECACHE_ACQ_CPU | MOECACHE_ACQ_WAIT | MOECACHE_ACQ_KEEP_WAITING,
	};
	struct ac_env env;
	__u32 e = 1, slot, i;
	struct moecache_acquire acq = {
	    .layer = 0,
	    .count = 1,
	    .experts = (uintptr_t)&e,
	    .slots = (uintptr_t)&slot,
	};

	ac_setup(ctx, &env);
	for (i = 0; i < ARRAY_SIZE(flags); i++) {
		acq.flags = flags[i];
		VM_REFUSED(&env.a, EINVAL, ioctl(env.c1.fd, MOECACHE_IOC_ACQUIRE, &acq));
	}
	/* Nothing was queued by the refused calls. */
	VM_EQ(vm_poll(&env.a, 0) & POLLIN, 0);
	ac_teardown(ctx, &env);
}

static const struct vm_test acq_cpu_tests[] = {
    VM_TEST(basic_acq_cpu_request_flags,
	    "a CPU acquire's miss is read as REQ_CPU, a plain one's as REQ_DEMAND, both as "
	    "REQ_DEMAND"),
    VM_TEST(basic_acq_cpu_waiter_wins,
	    "a CPU acquire's miss of an expert a WAIT acquire sleeps on is read as REQ_DEMAND"),
    VM_TEST(basic_acq_cpu_no_queue, "CPU with NO_QUEUE queues nothing"),
    VM_TEST(basic_acq_cpu_hits_pinned,
	    "a CPU acquire pins its hits as a plain one and queues only its misses"),
    VM_TEST(bad_input_acq_cpu_with_wait, "CPU with WAIT is EINVAL and changes nothing"),
};

const struct vm_suite vm_acq_cpu_suite = {acq_cpu_tests, ARRAY_SIZE(acq_cpu_tests)};
