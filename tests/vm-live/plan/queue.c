// SPDX-License-Identifier: MIT
/*
 * moecache-plan-queue: the plan of a layer follows the copy queue the
 * driver publishes in the map header (queued + inflight), live.
 *
 * Run by tests/vm-live/plan/plan-test.sh against a pool whose agent copies
 * slowly (moecached --copy-delay-us). The cost makes one miss a tie with an
 * idle link: its copy takes as long as the layer, so the plan waits for it
 * (a copy waited for is admitted). With copies queued ahead of it the copy
 * would end after the layer, and the plan computes it on the CPU instead.
 *
 *   1. idle: the queue reads 0; a miss is waited for (pinned);
 *   2. deep: another client queues misses without waiting; while the slow
 *      agent works through them, the same kind of miss goes to the CPU;
 *   3. drained: once the queue reads 0 again, a miss is waited for again.
 *
 * A plan that ignored the map's queue depth would wait in step 2 and fail.
 * Usage: moecache-plan-queue POOL. Prints what it saw; exits 0 on success,
 * 1 on a failed check, 2 on a usage or set-up error.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libmoecache.h"

/* Misses the other client queues: several seconds of copies at the suite's delay. */
#define PQ_DEEP 24
#define PQ_TIMEOUT_MS 60000

static uint64_t pq_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* queued + inflight as the plan reads them. */
static uint32_t pq_depth(struct moecache *mc, const struct moecache_plan_cost *cost)
{
	struct moecache_plan_queue q;
	uint32_t depth = UINT32_MAX;

	if (moecache_plan_queue_read(moecache_map(mc), cost, &q, &depth))
		return UINT32_MAX;
	return depth;
}

/* Waits until the queue reads 0: 0, or -ETIMEDOUT. */
static int pq_wait_idle(struct moecache *mc, const struct moecache_plan_cost *cost)
{
	uint64_t deadline = pq_now_ms() + PQ_TIMEOUT_MS;

	while (pq_depth(mc, cost)) {
		if (pq_now_ms() > deadline)
			return -ETIMEDOUT;
		usleep(10000);
	}
	return 0;
}

/*
 * The plan of one miss (layer, expert) through moecache_acquire_plan:
 * true if it did what want says (WAIT: pinned after the wait; CPU: not
 * pinned, on the CPU, admitted or not). Releases what it pinned.
 */
static bool pq_plan_one(struct moecache *mc, const struct moecache_plan_cost *cost, uint32_t layer,
			uint32_t expert, enum moecache_plan_action want, const char *step)
{
	struct moecache_plan_result r;
	uint32_t slot = MOECACHE_NONE;
	uint8_t action = 0xff;
	bool cpu, ok;
	int ret;

	ret = moecache_acquire_plan(mc, cost, NULL, 0, layer, &expert, 1, &slot, &action,
				    MOECACHE_ACQ_KEEP_WAITING, PQ_TIMEOUT_MS, &r);
	if (ret) {
		printf("%s: moecache_acquire_plan %u/%u: %s\n", step, layer, expert,
		       strerror(-ret));
		return false;
	}
	cpu = action == MOECACHE_PLAN_CPU || action == MOECACHE_PLAN_CPU_ADMIT;
	printf("%s: expert %u/%u: queue depth %u, action %u (%s), waited %u, cpu %u, admitted "
	       "%u, slot %d, end %.0f us\n",
	       step, layer, expert, r.queue_depth, action,
	       action == MOECACHE_PLAN_WAIT ? "wait"
	       : cpu			    ? "cpu"
					    : "hit",
	       r.n_waited, r.n_cpu, r.n_admitted, slot == MOECACHE_NONE ? -1 : (int)slot, r.end_us);
	if (want == MOECACHE_PLAN_WAIT)
		ok = action == MOECACHE_PLAN_WAIT && r.n_waited == 1 && slot != MOECACHE_NONE &&
		     r.queue_depth == 0;
	else
		ok = cpu && r.n_cpu == 1 && slot == MOECACHE_NONE && r.queue_depth > 0;
	if (slot != MOECACHE_NONE)
		moecache_release(mc, &slot, 1);
	return ok;
}

int main(int argc, char **argv)
{
	struct moecache *builder = NULL, *planner = NULL;
	const struct moecache_pool_info *pi;
	struct moecache_plan_cost cost;
	uint32_t deep[PQ_DEEP], slots[PQ_DEEP], depth;
	struct moecache_acquire_result res;
	int ret, failed = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: moecache-plan-queue POOL\n");
		return 2;
	}
	ret = moecache_open_attach(argv[1], MOECACHE_ROLE_CLIENT, &builder);
	if (!ret)
		ret = moecache_open_attach(argv[1], MOECACHE_ROLE_CLIENT, &planner);
	if (ret) {
		fprintf(stderr, "moecache-plan-queue: attach to %s: %s\n", argv[1], strerror(-ret));
		ret = 2;
		goto out;
	}
	pi = moecache_pool(planner);
	if (pi->n_layers < 3 || pi->n_experts < PQ_DEEP + 2 || pi->n_slots < PQ_DEEP + 2) {
		fprintf(stderr,
			"moecache-plan-queue: the pool needs 3 layers, %u experts and "
			"%u slots\n",
			PQ_DEEP + 2, PQ_DEEP + 2);
		ret = 2;
		goto out;
	}
	/* A copy as long as the layer: with nothing ahead, waiting ties and wins. */
	cost = (struct moecache_plan_cost){.copy_us = 100,
					   .cpu_us = 100,
					   .layer_us = 100,
					   .n_engines = 1,
					   .n_layers = pi->n_layers};

	/* 1. Idle: the miss is waited for. */
	if (pq_wait_idle(planner, &cost)) {
		printf("idle: the queue never read 0 (depth %u)\n", pq_depth(planner, &cost));
		ret = 1;
		goto out;
	}
	failed += !pq_plan_one(planner, &cost, 1, 0, MOECACHE_PLAN_WAIT, "idle");

	/* 2. Deep: the other client's misses are queued behind the slow agent. */
	for (uint32_t i = 0; i < PQ_DEEP; i++)
		deep[i] = i;
	ret = moecache_acquire(builder, 0, deep, PQ_DEEP, slots, 0, 0, &res);
	if (ret) {
		printf("deep: the other client's acquire: %s\n", strerror(-ret));
		ret = 1;
		goto out;
	}
	/* Its hits, if any, are pinned: dropped at once (the copies stay queued). */
	for (uint32_t i = 0, n = 0; i < PQ_DEEP; i++)
		if (slots[i] != MOECACHE_NONE)
			slots[n++] = slots[i];
	if (res.n_pinned)
		moecache_release(builder, slots, res.n_pinned);
	depth = pq_depth(planner, &cost);
	printf("deep: the other client queued %u misses; the map reads %u\n", PQ_DEEP - res.n_hits,
	       depth);
	failed += !pq_plan_one(planner, &cost, 2, 0, MOECACHE_PLAN_CPU, "deep");

	/* 3. Drained: waited for again. */
	if (pq_wait_idle(planner, &cost)) {
		printf("drained: the queue did not drain (depth %u)\n", pq_depth(planner, &cost));
		ret = 1;
		goto out;
	}
	failed += !pq_plan_one(planner, &cost, 2, 1, MOECACHE_PLAN_WAIT, "drained");
	ret = failed ? 1 : 0;
	printf("moecache-plan-queue: %s\n", failed ? "FAILED" : "ok");
out:
	moecache_close(planner);
	moecache_close(builder);
	return ret;
}
