/* SPDX-License-Identifier: MIT */
/*
 * The decode time model of the simulator: the link, the device and the CPU
 * over time, at batch 1, one step (one layer of one token) after another.
 *
 * A step starts when the previous one ends. Its experts that are in the bank
 * with their copy done are hits and cost nothing beyond the device's
 * layer_us. The others are planned by moecache_plan_layer (libmoecache.h, lib/plan.c,
 * the code the product runs): waited for (a demand copy, on the engine free
 * first, ahead of every background copy and prefetch), or computed on the
 * CPU, admitted with a background copy or not. The step ends at
 *
 *	max(start + layer_us, last waited copy done, start + n_cpu * cpu_us).
 *
 * Background copies and prefetches are chunked and cancellable: they use
 * only the time an engine has no demand copy (as a fluid: a chunk goes to
 * any idle engine), prefetches first (they are for the next layer), then
 * background copies, each queue in issue order. An expert whose copy has not
 * finished when it is needed is "late": its remaining copy time is planned
 * like a miss. Evicting an expert cancels its copy. A prefetch is issued
 * only when the link's idle time before the next step, after what is
 * queued, holds the whole copy: it never turns into a late copy and never
 * takes link time a background admission was promised.
 *
 * The all-resident reference is the sum of the steps' device time
 * (n_layers x layer_us per token at batch 1): modeled_speed is that over the
 * modeled time.
 */
#ifndef MOECACHE_TOOLS_TRACE_TIMING_H
#define MOECACHE_TOOLS_TRACE_TIMING_H

#include <stdbool.h>
#include <stdint.h>

#include "libmoecache.h"

/* OLMoE's expert: 3 matrices of 2048 x 1024 in bf16. */
#define MOE_TIMING_DEFAULT_EXPERT_BYTES 12582912ULL

struct moe_timing_config {
	double link_gbps;      /* per copy engine, 1e9 bytes per second */
	uint32_t copy_engines; /* 1 .. MOECACHE_PLAN_MAX_ENGINES */
	double cpu_gbps;       /* expert bytes the host computes per second; 0: none */
	double layer_us;       /* device compute per layer at batch 1 */
	uint64_t expert_bytes; /* 0: MOE_TIMING_DEFAULT_EXPERT_BYTES */
	/*
	 * Batching: a step of n distinct experts computes for
	 * layer_us x max(1, n / ref_experts) on the device (each expert's
	 * weights are read once per step, as at batch 1). 0: layer_us always.
	 */
	uint32_t ref_experts;
};

struct moe_timing_preset {
	const char *name;
	struct moe_timing_config cfg;
};

/* NULL-terminated (by name) list: h200, slow-link. */
extern const struct moe_timing_preset moe_timing_presets[];
/* 0 and *out, or -ENOENT. */
int moe_timing_preset_get(const char *name, struct moe_timing_config *out);

struct moe_timing_result {
	double total_us;	    /* modeled time of the whole run */
	double resident_us;	    /* the same tokens with every expert resident */
	double modeled_speed;	    /* resident_us / total_us */
	double stall_us;	    /* total_us - resident_us */
	uint64_t copies;	    /* copies started: waited, background and prefetch */
	uint64_t waited_copies;	    /* demand copies a step waited for */
	uint64_t background_copies; /* CPU-computed experts admitted by a background copy */
	uint64_t prefetch_copies;
	uint64_t cpu_experts;		/* experts computed on the CPU */
	uint64_t late;			/* needed while their copy was still under way */
	uint64_t wasted_prefetch_bytes; /* bytes copied for prefetches evicted or never used */
	double link_busy_us;		/* engine time spent copying (all engines) */
	double link_utilisation;	/* link_busy_us / (total_us x engines) */
};

struct moe_timing;

/* Returns 0, -EINVAL for a bad config (zero or non-finite bandwidths, engines), -ENOMEM. */
int moe_timing_create(const struct moe_timing_config *cfg, uint32_t n_layers, uint32_t n_ids,
		      struct moe_timing **out);
void moe_timing_destroy(struct moe_timing *tm);

/* A step starts (background progress up to now is accounted). */
void moe_timing_step_begin(struct moe_timing *tm);
/*
 * Plans the step's experts: ids[i] with resident[i] saying whether the bank
 * holds it (ready or with its copy under way). After it, admit() says which
 * of the non-resident ones to fill. Returns 0 or -EINVAL.
 */
int moe_timing_plan(struct moe_timing *tm, const uint32_t *ids, const bool *resident, uint32_t n);
/* Whether the plan admits id (a non-resident expert of this step). */
bool moe_timing_admit(const struct moe_timing *tm, uint32_t id);
/* id was put in the bank: for this step's plan, or as a prefetch. */
void moe_timing_filled(struct moe_timing *tm, uint32_t id, bool prefetch);
/* id left the bank (its copy, if under way, is cancelled). */
void moe_timing_evicted(struct moe_timing *tm, uint32_t id);
/* Whether a prefetch issued now can use link time before the next step starts. */
bool moe_timing_prefetch_useful(const struct moe_timing *tm);
/* The step ends. */
void moe_timing_step_end(struct moe_timing *tm);
/* The totals (the run is over). */
void moe_timing_result(struct moe_timing *tm, struct moe_timing_result *out);

#endif /* MOECACHE_TOOLS_TRACE_TIMING_H */
