// SPDX-License-Identifier: GPL-2.0
/*
 * The copy queue's depth in the map header (uapi/moecache.h, struct
 * moecache_map_header): queued, the requests the agent has not read yet;
 * inflight, those it has taken and not yet committed or given back. A
 * client reads them from its read-only map region to decide whether to
 * wait for a copy.
 */
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include "harness.h"

#define QD_N 5

/* The header's two words, and STATS, say queued and inflight. */
static void qd_expect_at(const char *file, int line, const struct vm_view *v, __u32 queued,
			 __u32 inflight)
{
	struct moecache_stats st;
	__u32 q = __atomic_load_n(&v->hdr->queued, __ATOMIC_RELAXED);
	__u32 f = __atomic_load_n(&v->hdr->inflight, __ATOMIC_RELAXED);

	if (q != queued || f != inflight)
		vm_fail_at(file, line, "map header: queued %u, inflight %u; expected %u, %u", q, f,
			   queued, inflight);
	vm_stats(v, MOECACHE_NONE, &st);
	if (st.queued != queued || st.inflight + st.filling != inflight)
		vm_fail_at(file, line,
			   "STATS: queued %u, inflight %u + filling %u; the header says %u, %u",
			   st.queued, st.inflight, st.filling, queued, inflight);
}

#define QD_EXPECT(v, q, f) qd_expect_at(__FILE__, __LINE__, (v), (q), (f))

/* A client misses on experts 0..QD_N-1 of layer 1: QD_N requests queued. */
static void qd_miss(const struct vm_view *c, __u32 *experts)
{
	__u32 slots[QD_N], i;
	struct moecache_acquire acq;

	for (i = 0; i < QD_N; i++)
		experts[i] = i;
	vm_acquire(c, 1, experts, QD_N, slots, 0, &acq);
	VM_EQ(acq.n_hits, 0);
}

static void basic_queue_depth_read_commit(struct vm_ctx *ctx)
{
	struct moecache_request reqs[QD_N + 1];
	struct vm_view a, c;
	__u32 experts[QD_N], i;
	size_t n;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	QD_EXPECT(&c, 0, 0);
	qd_miss(&c, experts);
	QD_EXPECT(&c, QD_N, 0);
	n = vm_read_requests(&a, reqs, QD_N + 1, 1000);
	VM_EQ(n, QD_N);
	QD_EXPECT(&c, 0, QD_N);
	/* A slot being filled is still in flight; its COMMIT takes it off. */
	for (i = 0; i < QD_N; i++) {
		vm_evict(&a, i, reqs[i].layer, reqs[i].expert, NULL);
		QD_EXPECT(&c, 0, QD_N - i);
		vm_commit1(&a, i, reqs[i].layer, reqs[i].expert, 0);
		QD_EXPECT(&c, 0, QD_N - i - 1);
	}
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_queue_depth_agent_gone(struct vm_ctx *ctx)
{
	struct moecache_request reqs[QD_N];
	struct vm_view a, c;
	__u32 experts[QD_N];

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	qd_miss(&c, experts);
	VM_EQ(vm_read_requests(&a, reqs, 2, 1000), 2);
	QD_EXPECT(&c, QD_N - 2, 2);
	vm_evict(&a, 0, reqs[0].layer, reqs[0].expert, NULL);
	QD_EXPECT(&c, QD_N - 2, 2);
	/* The agent dies: what it held goes back on the queue, for the next. */
	vm_detach(&a);
	QD_EXPECT(&c, QD_N, 0);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void basic_queue_depth_client_gone(struct vm_ctx *ctx)
{
	struct vm_view a, c, obs;
	__u32 experts[QD_N];

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&obs, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	qd_miss(&c, experts);
	QD_EXPECT(&obs, QD_N, 0);
	/* Nobody asks for them any more: they leave the queue. */
	vm_detach(&c);
	QD_EXPECT(&obs, 0, 0);
	vm_detach(&obs);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static const struct vm_test queue_depth_tests[] = {
    VM_TEST(basic_queue_depth_read_commit,
	    "after N misses the map header says queued N; after read, inflight N; each "
	    "COMMIT takes one off"),
    VM_TEST(basic_queue_depth_agent_gone,
	    "what a dead agent had read or was filling is counted queued again"),
    VM_TEST(basic_queue_depth_client_gone,
	    "requests nobody asks for any more leave the header's queued count"),
};

const struct vm_suite vm_queue_depth_suite = {queue_depth_tests, ARRAY_SIZE(queue_depth_tests)};
