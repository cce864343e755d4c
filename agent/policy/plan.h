/* SPDX-License-Identifier: MIT */
/*
 * The plan of one layer (DESIGN.md section 11): for each expert of the layer
 * that is not ready in the bank, whether the client waits for its copy, or
 * computes it on the CPU from the host pages while the link does other
 * work, and whether a CPU-computed expert is still copied in (admitted) in
 * the background.
 *
 * One cost model, in microseconds:
 *   copy_us   one expert over one copy engine (expert bytes / link bandwidth);
 *   cpu_us    one expert computed by the host at batch 1 (expert bytes / the
 *             bytes of weights the host streams through its cores per second);
 *             0: the host computes nothing;
 *   layer_us  the device's compute for one layer at batch 1;
 *   n_engines copy engines, each a serial link; demand copies go to the one
 *             that is free first;
 *   n_layers  the layers of the model: an expert used now is used again at
 *             the earliest one token (n_layers layers) later.
 *
 * A layer ends when the device's compute, the copies waited for and the
 * CPU's experts are all done:
 *
 *	end = max(layer_us, last waited copy done, n_cpu * cpu_us)
 *
 * The plan sends to the CPU the experts whose copies would finish last
 * (the most copy time left first), as many as make end smallest; on a tie,
 * fewer (a copy waited for is admitted, so it is a hit next time).
 *
 * A CPU-computed expert is admitted only when its background copy, queued
 * behind every demand copy and every earlier background copy, starts
 * before the expert's next possible use, one token (n_layers x layer_us)
 * away: the queue ahead of it drains by then. On a saturated link the CPU
 * then takes the misses without admissions piling up; on a link with room
 * every miss is admitted, as when every miss is waited for, so computing
 * on the CPU does not cost future hits there.
 *
 * The simulator (tools/trace) and the client library run this same code;
 * the caller supplies the copy queue's depth (libmoecache reads it from the
 * map the driver publishes).
 */
#ifndef MOECACHE_AGENT_POLICY_PLAN_H
#define MOECACHE_AGENT_POLICY_PLAN_H

#include <stdint.h>

#define MOE_PLAN_MAX_ENGINES 16
/* The most experts one layer's plan takes (top-k of every sequence of a batch). */
#define MOE_PLAN_MAX_ITEMS 1024

struct moe_plan_cost {
	double copy_us;
	double cpu_us; /* 0: no host compute */
	double layer_us;
	uint32_t n_engines; /* 1 .. MOE_PLAN_MAX_ENGINES */
	uint32_t n_layers;
};

enum moe_plan_action {
	MOE_PLAN_WAIT = 0,	/* copy it (or let its copy finish) and wait */
	MOE_PLAN_CPU = 1,	/* compute on the CPU; not admitted */
	MOE_PLAN_CPU_ADMIT = 2, /* compute on the CPU; copy in the background */
};

/* What the link already has to do, in microseconds from now. */
struct moe_plan_queue {
	double engine_busy_us[MOE_PLAN_MAX_ENGINES]; /* demand copies queued per engine */
	double background_us;			     /* background copies queued (all engines) */
};

/*
 * Plans n experts (n <= MOE_PLAN_MAX_ITEMS). copy_left_us[i] is the copy
 * time expert i still needs (copy_us for one not in the bank, less for one
 * whose copy is under way). Writes action[i] and, if end_us is not NULL,
 * the layer's expected duration (>= layer_us). Returns 0 or -EINVAL for a
 * bad cost or argument. The queue is not changed.
 */
int moe_plan_layer(const struct moe_plan_cost *cost, const struct moe_plan_queue *q,
		   const double *copy_left_us, uint32_t n, enum moe_plan_action *action,
		   double *end_us);

/* 0 if the cost is usable, -EINVAL otherwise. */
int moe_plan_cost_check(const struct moe_plan_cost *cost);

#endif /* MOECACHE_AGENT_POLICY_PLAN_H */
