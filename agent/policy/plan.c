// SPDX-License-Identifier: MIT
/* The plan of one layer: wait for a copy, or compute on the CPU (see plan.h). */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "plan.h"

int moe_plan_cost_check(const struct moe_plan_cost *cost)
{
	if (!cost || !isfinite(cost->copy_us) || !isfinite(cost->cpu_us) ||
	    !isfinite(cost->layer_us) || cost->copy_us <= 0 || cost->cpu_us < 0 ||
	    cost->layer_us < 0 || !cost->n_engines || cost->n_engines > MOE_PLAN_MAX_ENGINES ||
	    !cost->n_layers)
		return -EINVAL;
	return 0;
}

/*
 * When the last of the waited copies order[from, n) is done: each goes to
 * the engine free first, the longest first. free[] is scratch.
 */
static double plan_link_done(const struct moe_plan_cost *cost, const struct moe_plan_queue *q,
			     const double *left, const uint32_t *order, uint32_t from, uint32_t n,
			     double *free_at)
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

int moe_plan_layer(const struct moe_plan_cost *cost, const struct moe_plan_queue *q,
		   const double *copy_left_us, uint32_t n, enum moe_plan_action *action,
		   double *end_us)
{
	double free_at[MOE_PLAN_MAX_ENGINES], best_end = INFINITY, backlog, horizon;
	uint32_t order[MOE_PLAN_MAX_ITEMS], best_x = 0, max_x;

	if (moe_plan_cost_check(cost) || !q || n > MOE_PLAN_MAX_ITEMS ||
	    (n && (!copy_left_us || !action)))
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (!isfinite(copy_left_us[i]) || copy_left_us[i] < 0)
			return -EINVAL;
		action[i] = MOE_PLAN_WAIT;
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
	 * Background copies: behind the demand copies and the earlier ones.
	 * One is admitted while the queue ahead of it drains within a token
	 * at full speed, so it starts before the expert's next possible use.
	 */
	plan_link_done(cost, q, copy_left_us, order, best_x, n, free_at);
	backlog = q->background_us > 0 ? q->background_us : 0;
	for (uint32_t e = 0; e < cost->n_engines; e++)
		backlog += free_at[e];
	horizon = (double)cost->n_layers * cost->layer_us;
	for (uint32_t i = best_x; i-- > 0;) {
		uint32_t id = order[i];
		bool admit = backlog / cost->n_engines <= horizon;

		action[id] = admit ? MOE_PLAN_CPU_ADMIT : MOE_PLAN_CPU;
		if (admit)
			backlog += copy_left_us[id];
	}
	if (end_us)
		*end_us = best_end;
	return 0;
}
