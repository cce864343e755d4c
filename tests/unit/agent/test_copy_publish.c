// SPDX-License-Identifier: MIT
/*
 * Demand copies published by the copy thread that finished them (the
 * config's publish hook, moecached's COMMIT), and the collector woken in
 * batches for those, at once for the rest.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "agent/copy/backend.h"
#include "agent/copy/copy_queue.h"

#define EXPERT_BYTES 8192u
#define N_COPIES 4

struct publish_log {
	pthread_t caller;
	atomic_uint calls;
	atomic_uint on_caller;	  /* hook run on the thread that queued the copies */
	atomic_uint before_bytes; /* hook run before the slot held the expert */
	atomic_uint next_started; /* one copy thread: the next slot written already */
	int ret;		  /* what the hook returns */
	struct agent_backend *be;
	unsigned char (*src)[EXPERT_BYTES];
};

static int record_publish(void *ctx, const struct agent_copy *c)
{
	struct publish_log *log = ctx;
	static const unsigned char zero[EXPERT_BYTES];
	const void *next = agent_backend_slot(log->be, c->slot + 1);

	atomic_fetch_add(&log->calls, 1);
	if (pthread_equal(pthread_self(), log->caller))
		atomic_fetch_add(&log->on_caller, 1);
	if (memcmp(agent_backend_slot(log->be, c->slot), log->src[c->slot], EXPERT_BYTES))
		atomic_fetch_add(&log->before_bytes, 1);
	if (next && memcmp(next, zero, EXPERT_BYTES))
		atomic_fetch_add(&log->next_started, 1);
	return log->ret;
}

static unsigned char src[N_COPIES + 1][EXPERT_BYTES];

/* A CPU engine with one copy thread and the hook; copies 0..n-1 queued, flags each. */
static struct agent_backend *start(struct publish_log *log, uint32_t n, uint32_t flags)
{
	struct agent_backend_config cfg = {
	    .pool = "test",
	    .n_slots = N_COPIES + 1,
	    .expert_bytes = EXPERT_BYTES,
	    .copy_threads = 1,
	    .copy_delay_us = 20000, /* copies still queued when the first finishes */
	    .publish = record_publish,
	    .publish_ctx = log,
	};
	struct moecache_bank desc;

	log->caller = pthread_self();
	log->src = src;
	for (uint32_t i = 0; i <= N_COPIES; i++)
		memset(src[i], (int)i + 1, EXPERT_BYTES);
	cr_assert_eq(agent_backend_create("cpu", &cfg, &log->be), 0);
	cr_assert_eq(agent_backend_bank_create(log->be, &desc), 0);
	for (uint32_t i = 0; i < n; i++) {
		struct agent_copy c = {.slot = i, .expert = i, .flags = flags, .src = src[i]};

		c.published = true; /* what the caller says is ignored */
		cr_assert_eq(agent_backend_copy(log->be, &c), 0);
	}
	return log->be;
}

/* Collects n completions, waiting on the completion fd at most 10 s each. */
static void collect(struct agent_backend *be, struct agent_copy *out, uint32_t n)
{
	for (uint32_t got = 0; got < n;) {
		struct pollfd p = {.fd = agent_backend_completion_fd(be), .events = POLLIN};
		int r;

		cr_assert_eq(poll(&p, 1, 10000), 1, "completions %u of %u never signalled", got, n);
		r = agent_backend_completions(be, out + got, n - got);
		cr_assert_geq(r, 0);
		got += (uint32_t)r;
	}
}

Test(copy_publish, basic_demand_copies_published_by_copy_thread,
     .description = "each demand copy is published once, on the copy thread, after its bytes "
		    "landed and before the next copy starts; it completes with published set")
{
	struct publish_log log = {0};
	struct agent_copy done[N_COPIES];
	struct agent_backend *be = start(&log, N_COPIES, 0);

	/* Fewer than a batch and no later copy: the idle copy thread signals them. */
	collect(be, done, N_COPIES);
	cr_expect_eq(atomic_load(&log.calls), N_COPIES);
	cr_expect_eq(atomic_load(&log.on_caller), 0, "published on the caller's thread");
	cr_expect_eq(atomic_load(&log.before_bytes), 0, "published before the bytes landed");
	cr_expect_eq(atomic_load(&log.next_started), 0,
		     "published only after the next copy had started");
	for (int i = 0; i < N_COPIES; i++) {
		cr_expect_eq(done[i].status, 0);
		cr_expect(done[i].published, "copy into slot %u not marked published",
			  done[i].slot);
	}
	cr_expect_eq(agent_backend_inflight(be), 0);
	agent_backend_destroy(be);
}

Test(copy_publish, basic_prefetch_not_published,
     .description = "a prefetch copy is never published by the copy thread: it completes "
		    "unpublished, for the collector to commit")
{
	struct publish_log log = {0};
	struct agent_copy done[2];
	struct agent_backend *be = start(&log, 2, MOECACHE_FILL_PREFETCH);

	collect(be, done, 2);
	cr_expect_eq(atomic_load(&log.calls), 0);
	for (int i = 0; i < 2; i++) {
		cr_expect_eq(done[i].status, 0);
		cr_expect_not(done[i].published);
	}
	agent_backend_destroy(be);
}

Test(copy_publish, bad_input_publish_failure_is_the_status,
     .description = "a publish hook that fails: the completion carries its errno, unpublished")
{
	struct publish_log log = {.ret = -EIO};
	struct agent_copy done[2];
	struct agent_backend *be = start(&log, 2, 0);

	collect(be, done, 2);
	cr_expect_eq(atomic_load(&log.calls), 2);
	for (int i = 0; i < 2; i++) {
		cr_expect_eq(done[i].status, -EIO);
		cr_expect_not(done[i].published);
	}
	agent_backend_destroy(be);
}

/* The wake-up rules of agent_copy_engine_done / _flush, one engine, no threads. */
static uint64_t signals(struct agent_copy_engine *e)
{
	uint64_t count = 0;

	if (read(e->done_fd, &count, sizeof(count)) < 0)
		return 0;
	return count;
}

static void finish(struct agent_copy_engine *e, bool published, uint32_t n)
{
	struct agent_copy c = {.slot = 1, .published = published};

	for (uint32_t i = 0; i < n; i++)
		if (agent_copy_engine_done(e, &c))
			agent_copy_engine_signal(e);
}

static void engine_with_room(struct agent_copy_engine *e, uint32_t n)
{
	cr_assert_eq(agent_copy_engine_init(e, 0), 0);
	cr_assert_eq(agent_copy_queue_reserve(&e->done, n), 0);
	e->inflight = n;
}

Test(copy_publish, basic_published_wait_for_a_batch,
     .description = "published copies wake the collector once per AGENT_COPY_PUBLISHED_BATCH, "
		    "an unpublished one at once")
{
	static const struct {
		bool published;
		uint32_t n;
		uint64_t signals;
	} cases[] = {
	    {true, 1, 0},
	    {true, AGENT_COPY_PUBLISHED_BATCH - 1, 0},
	    {true, AGENT_COPY_PUBLISHED_BATCH, 1},
	    {false, 1, 1},
	    {false, 3, 1},
	};
	struct agent_copy out[2 * AGENT_COPY_PUBLISHED_BATCH];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct agent_copy_engine e;

		engine_with_room(&e, cases[i].n);
		finish(&e, cases[i].published, cases[i].n);
		cr_expect_eq(signals(&e), cases[i].signals, "case %zu", i);
		cr_expect_eq(agent_copy_engine_completions(&e, out, cases[i].n), (int)cases[i].n);
		agent_copy_engine_fini(&e);
	}
}

Test(copy_publish, basic_flush_and_collect_rearm,
     .description = "a copy thread out of work signals waiting published copies once; after "
		    "they are collected the next unpublished copy signals again")
{
	struct agent_copy_engine e;
	struct agent_copy out[4];

	engine_with_room(&e, 4);
	pthread_mutex_lock(&e.lock);
	cr_expect_not(agent_copy_engine_flush(&e), "nothing waits: no signal");
	pthread_mutex_unlock(&e.lock);
	finish(&e, true, 2);
	pthread_mutex_lock(&e.lock);
	cr_expect(agent_copy_engine_flush(&e));
	cr_expect_not(agent_copy_engine_flush(&e), "signalled already");
	pthread_mutex_unlock(&e.lock);
	finish(&e, false, 1); /* the collector is due already: no second write */
	agent_copy_engine_signal(&e);
	cr_expect_eq(signals(&e), 1);
	cr_expect_eq(agent_copy_engine_completions(&e, out, 4), 3);
	finish(&e, false, 1);
	cr_expect_eq(signals(&e), 1, "not signalled again after the collection");
	cr_expect_eq(agent_copy_engine_completions(&e, out, 4), 1);
	cr_expect_eq(agent_copy_engine_inflight(&e), 0);
	agent_copy_engine_fini(&e);
}
