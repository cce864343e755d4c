// SPDX-License-Identifier: MIT
/*
 * The plan of a layer (libmoecache.h): wait for a copy, or compute on the
 * CPU, and the acquire that carries it out.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mc_atomic.h"
#include "mc_internal.h"

int moecache_plan_cost_check(const struct moecache_plan_cost *cost)
{
	if (!cost || !isfinite(cost->copy_us) || !isfinite(cost->cpu_us) ||
	    !isfinite(cost->layer_us) || cost->copy_us <= 0 || cost->cpu_us < 0 ||
	    cost->layer_us < 0 || !cost->n_engines || cost->n_engines > MOECACHE_PLAN_MAX_ENGINES ||
	    !cost->n_layers)
		return -EINVAL;
	return 0;
}

/*
 * When the last of the waited copies order[from, n) is done: each goes to
 * the engine free first, the longest first. free_at[] is scratch.
 */
static double plan_link_done(const struct moecache_plan_cost *cost,
			     const struct moecache_plan_queue *q, const double *left,
			     const uint32_t *order, uint32_t from, uint32_t n, double *free_at)
{
	double done = 0;

	for (uint32_t e = 0; e < cost->n_engines; e++)
		free_at[e] = q->engine_busy_us[e] > 0 ? q->engine_busy_us[e] : 0;
	for (uint32_t i = from; i < n; i++) {
		uint32_t best = 0;

		for (uint32_t e = 1; e < cost->n_engines; e++)
			if (free_at[e] < free_at[best])
				best = e;
		free_at[best] += left[order[i]];
		if (free_at[best] > done)
			done = free_at[best];
	}
	return done;
}

int moecache_plan_layer(const struct moecache_plan_cost *cost, const struct moecache_plan_queue *q,
			const double *copy_left_us, uint32_t n, enum moecache_plan_action *action,
			double *end_us)
{
	double free_at[MOECACHE_PLAN_MAX_ENGINES], best_end = INFINITY, backlog, horizon;
	uint32_t order[MOECACHE_PLAN_MAX_ITEMS], best_x = 0, max_x;

	if (moecache_plan_cost_check(cost) || !q || n > MOECACHE_PLAN_MAX_ITEMS ||
	    (n && (!copy_left_us || !action)))
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (!isfinite(copy_left_us[i]) || copy_left_us[i] < 0)
			return -EINVAL;
		action[i] = MOECACHE_PLAN_WAIT;
	}
	/* Most copy time left first; equal ones in the caller's order (stable insertion). */
	for (uint32_t i = 0; i < n; i++) {
		uint32_t j = i;

		while (j > 0 && copy_left_us[order[j - 1]] < copy_left_us[i]) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	max_x = cost->cpu_us > 0 ? n : 0;
	for (uint32_t x = 0; x <= max_x; x++) {
		double end = plan_link_done(cost, q, copy_left_us, order, x, n, free_at);

		if (end < cost->layer_us)
			end = cost->layer_us;
		if (x * cost->cpu_us > end)
			end = x * cost->cpu_us;
		/* Strictly better only: on a tie the copy, which is admitted. */
		if (end < best_end) {
			best_end = end;
			best_x = x;
		}
	}
	/*
	 * Admissions: behind the waited copies and the earlier ones. One is
	 * admitted while the queue ahead of it drains within a token at full
	 * speed, so it starts before the expert's next possible use.
	 */
	plan_link_done(cost, q, copy_left_us, order, best_x, n, free_at);
	backlog = q->background_us > 0 ? q->background_us : 0;
	for (uint32_t e = 0; e < cost->n_engines; e++)
		backlog += free_at[e];
	horizon = (double)cost->n_layers * cost->layer_us;
	for (uint32_t i = best_x; i-- > 0;) {
		uint32_t id = order[i];
		bool admit = backlog / cost->n_engines <= horizon;

		action[id] = admit ? MOECACHE_PLAN_CPU_ADMIT : MOECACHE_PLAN_CPU;
		if (admit)
			backlog += copy_left_us[id];
	}
	if (end_us)
		*end_us = best_end;
	return 0;
}

int moecache_plan_queue_read(const struct moecache_map *m, const struct moecache_plan_cost *cost,
			     struct moecache_plan_queue *q, uint32_t *depth)
{
	uint32_t queued, inflight;
	uint64_t n;

	if (!m || !m->hdr || !q || moecache_plan_cost_check(cost))
		return -EINVAL;
	queued = mc_load_acquire_u32(&m->hdr->queued);
	inflight = mc_load_acquire_u32(&m->hdr->inflight);
	n = (uint64_t)queued + inflight;
	memset(q, 0, sizeof(*q));
	/* Whole copies first to the engines free first: as the agent hands them out. */
	for (uint32_t e = 0; e < cost->n_engines; e++)
		q->engine_busy_us[e] =
		    (double)(n / cost->n_engines + (e < n % cost->n_engines)) * cost->copy_us;
	if (depth)
		*depth = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	return 0;
}

int moecache_plan_lookup(const struct moecache_map *m, const struct moecache_plan_cost *cost,
			 uint32_t layer, const uint32_t *experts, uint32_t count, uint8_t *action,
			 struct moecache_plan_result *res)
{
	enum moecache_plan_action act[MOECACHE_PLAN_MAX_ITEMS];
	double left[MOECACHE_PLAN_MAX_ITEMS];
	uint32_t slots[MOECACHE_PLAN_MAX_ITEMS], at[MOECACHE_PLAN_MAX_ITEMS];
	struct moecache_plan_result r = {0};
	struct moecache_plan_queue q;
	uint32_t m_miss = 0;
	int ret;

	if (!m || !action || (count && !experts) || count > MOECACHE_PLAN_MAX_ITEMS)
		return -EINVAL;
	ret = moecache_plan_queue_read(m, cost, &q, &r.queue_depth);
	if (ret)
		return ret;
	if (count) {
		ret = moecache_map_lookup(m, layer, experts, count, slots);
		if (ret < 0)
			return ret;
	}
	for (uint32_t i = 0; i < count; i++) {
		if (slots[i] != MOECACHE_NONE) {
			action[i] = MOECACHE_PLAN_HIT;
			r.n_hits++;
			continue;
		}
		at[m_miss] = i;
		left[m_miss++] = cost->copy_us;
	}
	ret = moecache_plan_layer(cost, &q, left, m_miss, act, &r.end_us);
	if (ret)
		return ret;
	for (uint32_t j = 0; j < m_miss; j++) {
		action[at[j]] = (uint8_t)act[j];
		r.n_waited += act[j] == MOECACHE_PLAN_WAIT;
		r.n_cpu += act[j] != MOECACHE_PLAN_WAIT;
		r.n_admitted += act[j] == MOECACHE_PLAN_CPU_ADMIT;
	}
	if (res)
		*res = r;
	return 0;
}

/* The experts of experts[] whose action is in mask (a bit per action), in order. */
static uint32_t plan_pick(const uint32_t *experts, const uint8_t *action, uint32_t count,
			  uint32_t mask, uint32_t *out_experts, uint32_t *out_at)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < count; i++) {
		if (!(mask & (1u << action[i])))
			continue;
		out_experts[n] = experts[i];
		out_at[n++] = i;
	}
	return n;
}

#define PLAN_BIT(a) (1u << (a))

/*
 * Acquires (without WAIT) the experts with an action in mask, with flags;
 * those that turned out resident are pinned and become HIT.
 */
static int plan_acquire_cpu(struct moecache *mc, uint32_t layer, const uint32_t *experts,
			    uint32_t count, uint32_t *slots, uint8_t *action, uint32_t mask,
			    uint32_t flags, struct moecache_plan_result *r)
{
	uint32_t sub[MOECACHE_PLAN_MAX_ITEMS], at[MOECACHE_PLAN_MAX_ITEMS],
	    got[MOECACHE_PLAN_MAX_ITEMS];
	uint32_t n = plan_pick(experts, action, count, mask, sub, at);
	int ret;

	if (!n)
		return 0;
	ret = moecache_acquire(mc, layer, sub, n, got, flags, 0, NULL);
	if (ret)
		return ret;
	for (uint32_t j = 0; j < n; j++) {
		slots[at[j]] = got[j];
		if (got[j] == MOECACHE_NONE)
			continue;
		r->n_cpu--;
		r->n_admitted -= action[at[j]] == MOECACHE_PLAN_CPU_ADMIT;
		r->n_hits++;
		action[at[j]] = MOECACHE_PLAN_HIT;
	}
	return 0;
}

/* A client handle and count ids of one layer it may ask for: 0 or -errno. */
static int plan_check_client(const struct moecache *mc, uint32_t layer, const uint32_t *experts,
			     uint32_t count)
{
	int ret = mc_check_role(mc, MC_ROLE_BIT(MOECACHE_ROLE_CLIENT));

	return ret ? ret : mc_check_experts(mc, layer, experts, count);
}

int moecache_acquire_plan(struct moecache *mc, const struct moecache_plan_cost *cost,
			  const uint32_t *release_slots, uint32_t release_count, uint32_t layer,
			  const uint32_t *experts, uint32_t count, uint32_t *slots, uint8_t *action,
			  uint32_t flags, uint32_t timeout_ms, struct moecache_plan_result *res)
{
	uint32_t sub[MOECACHE_PLAN_MAX_ITEMS], at[MOECACHE_PLAN_MAX_ITEMS],
	    got[MOECACHE_PLAN_MAX_ITEMS];
	struct moecache_plan_result r;
	uint32_t n_wait;
	int ret;

	ret = plan_check_client(mc, layer, experts, count);
	if (ret)
		return ret;
	if ((flags & ~MOECACHE_ACQ_KEEP_WAITING) || !slots || !action ||
	    count > MOECACHE_PLAN_MAX_ITEMS || (release_count && !release_slots))
		return -EINVAL;
	ret = moecache_plan_lookup(&mc->map, cost, layer, experts, count, action, &r);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < count; i++)
		slots[i] = MOECACHE_NONE;

	/* The hits and the copies waited for: one acquire, which drops the release first. */
	n_wait = plan_pick(experts, action, count,
			   PLAN_BIT(MOECACHE_PLAN_HIT) | PLAN_BIT(MOECACHE_PLAN_WAIT), sub, at);
	if (n_wait)
		ret = moecache_acquire_release(mc, release_slots, release_count, layer, sub, n_wait,
					       got, MOECACHE_ACQ_WAIT | flags, timeout_ms, NULL);
	else if (release_count)
		ret = moecache_release(mc, release_slots, release_count);
	if (ret)
		return ret;
	for (uint32_t j = 0; j < n_wait; j++)
		slots[at[j]] = got[j];

	/*
	 * Admitted CPU experts: queued as MOECACHE_REQ_CPU, which the agent
	 * serves after its pending demand requests (the waited copies).
	 */
	ret = plan_acquire_cpu(mc, layer, experts, count, slots, action,
			       PLAN_BIT(MOECACHE_PLAN_CPU_ADMIT), MOECACHE_ACQ_CPU, &r);
	/* The others: the access is counted, nothing is queued. */
	if (!ret)
		ret = plan_acquire_cpu(mc, layer, experts, count, slots, action,
				       PLAN_BIT(MOECACHE_PLAN_CPU), MOECACHE_ACQ_NO_QUEUE, &r);
	if (ret) {
		moecache_release(mc, slots, count);
		for (uint32_t i = 0; i < count; i++)
			slots[i] = MOECACHE_NONE;
		return ret;
	}
	if (res)
		*res = r;
	return 0;
}

int moecache_plan_prefetch_room(const struct moecache_map *m, const struct moecache_plan_cost *cost)
{
	struct moecache_plan_queue q;
	double idle;
	int ret;

	ret = moecache_plan_queue_read(m, cost, &q, NULL);
	if (ret)
		return ret;
	idle = (double)cost->n_engines * cost->layer_us;
	for (uint32_t e = 0; e < cost->n_engines; e++)
		idle -= q.engine_busy_us[e];
	if (idle < cost->copy_us)
		return 0;
	idle /= cost->copy_us;
	return idle >= MOECACHE_PLAN_MAX_ITEMS ? MOECACHE_PLAN_MAX_ITEMS : (int)idle;
}

int moecache_prefetch_plan(struct moecache *mc, const struct moecache_plan_cost *cost,
			   uint32_t layer, const uint32_t *experts, uint32_t count,
			   uint32_t *n_queued)
{
	uint32_t slots[MOECACHE_PLAN_MAX_ITEMS], sub[MOECACHE_PLAN_MAX_ITEMS], n = 0;
	int room, ret;

	if (n_queued)
		*n_queued = 0;
	ret = plan_check_client(mc, layer, experts, count);
	if (ret)
		return ret;
	if (count > MOECACHE_PLAN_MAX_ITEMS)
		return -EINVAL;
	room = moecache_plan_prefetch_room(&mc->map, cost);
	if (room <= 0 || !count)
		return room < 0 ? room : 0;
	ret = moecache_map_lookup(&mc->map, layer, experts, count, slots);
	if (ret < 0)
		return ret;
	for (uint32_t i = 0; i < count && n < (uint32_t)room; i++)
		if (slots[i] == MOECACHE_NONE)
			sub[n++] = experts[i];
	return n ? moecache_prefetch(mc, layer, sub, n, n_queued) : 0;
}
