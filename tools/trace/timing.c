// SPDX-License-Identifier: MIT
/* The simulator's decode time model (see timing.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

#define TM_NONE UINT32_MAX

enum tm_state {
	TM_ABSENT = 0,
	TM_READY,
	TM_BACKGROUND, /* copy under way, queued as a background admission */
	TM_PREFETCH,   /* copy under way, queued as a prefetch */
};

/* A FIFO of ids threaded through next/prev, with the copy time it still holds. */
struct tm_list {
	uint32_t head, tail;
	double left_us;
};

struct moe_timing {
	struct moecache_plan_cost cost; /* layer_us: the current step's */
	double base_layer_us;
	uint32_t ref_experts;
	double bytes;
	uint32_t n_ids;
	double now;				   /* start of the current step */
	double mark;				   /* background progress accounted up to here */
	double free_at[MOECACHE_PLAN_MAX_ENGINES]; /* each engine's demand copies end */
	double step_end;			   /* the current step's end, once planned */
	uint32_t step_cpu;
	uint8_t *state;
	uint8_t *admit; /* id -> this step's plan: 0 not admitted, else 1 + moecache_plan_action */
	bool *pf_unused;
	double *left; /* id -> copy time left while under way */
	uint32_t *next, *prev;
	struct tm_list prefetch, background;
	/* scratch for one step's plan */
	uint32_t *ids;
	double *copy_left;
	enum moecache_plan_action *action;
	struct moe_timing_result r;
};

/*
 * Sources (docs/policy.md): h200 is an H200 on PCIe Gen5 x16 (about 50 GB/s
 * host to device in practice), a host that streams about 100 GB/s of
 * weights through its cores, and 45 us per OLMoE-sized layer at batch 1;
 * slow-link is the same with a quarter of the link (a Gen4 x8 slot, or a
 * Gen5 x16 link shared by four devices).
 */
const struct moe_timing_preset moe_timing_presets[] = {
    {"h200", {.link_gbps = 50, .copy_engines = 1, .cpu_gbps = 100, .layer_us = 45}},
    {"slow-link", {.link_gbps = 12.5, .copy_engines = 1, .cpu_gbps = 100, .layer_us = 45}},
    {.name = NULL},
};

int moe_timing_preset_get(const char *name, struct moe_timing_config *out)
{
	for (const struct moe_timing_preset *p = moe_timing_presets; name && p->name; p++) {
		if (!strcmp(p->name, name)) {
			*out = p->cfg;
			return 0;
		}
	}
	return -ENOENT;
}

static void tm_list_push(struct moe_timing *tm, struct tm_list *l, uint32_t id)
{
	tm->next[id] = TM_NONE;
	tm->prev[id] = l->tail;
	if (l->tail != TM_NONE)
		tm->next[l->tail] = id;
	else
		l->head = id;
	l->tail = id;
	l->left_us += tm->left[id];
}

static void tm_list_remove(struct moe_timing *tm, struct tm_list *l, uint32_t id)
{
	if (tm->prev[id] != TM_NONE)
		tm->next[tm->prev[id]] = tm->next[id];
	else
		l->head = tm->next[id];
	if (tm->next[id] != TM_NONE)
		tm->prev[tm->next[id]] = tm->prev[id];
	else
		l->tail = tm->prev[id];
	l->left_us -= tm->left[id];
	if (l->head == TM_NONE)
		l->left_us = 0; /* no drift from repeated sums */
}

static struct tm_list *tm_list_of(struct moe_timing *tm, uint32_t id)
{
	if (tm->state[id] == TM_PREFETCH)
		return &tm->prefetch;
	if (tm->state[id] == TM_BACKGROUND)
		return &tm->background;
	return NULL;
}

int moe_timing_create(const struct moe_timing_config *cfg, uint32_t n_layers, uint32_t n_ids,
		      struct moe_timing **out)
{
	struct moe_timing *tm;
	double bytes;

	if (!cfg || !out || !n_layers || !n_ids || !isfinite(cfg->link_gbps) ||
	    !(cfg->link_gbps > 0) || !isfinite(cfg->cpu_gbps) || cfg->cpu_gbps < 0 ||
	    !isfinite(cfg->layer_us) || cfg->layer_us < 0 || !cfg->copy_engines ||
	    cfg->copy_engines > MOECACHE_PLAN_MAX_ENGINES)
		return -EINVAL;
	tm = calloc(1, sizeof(*tm));
	if (!tm)
		return -ENOMEM;
	bytes = (double)(cfg->expert_bytes ? cfg->expert_bytes : MOE_TIMING_DEFAULT_EXPERT_BYTES);
	tm->bytes = bytes;
	/* GB/s is 1e3 bytes per microsecond. */
	tm->cost.copy_us = bytes / (cfg->link_gbps * 1e3);
	tm->cost.cpu_us = cfg->cpu_gbps > 0 ? bytes / (cfg->cpu_gbps * 1e3) : 0;
	tm->cost.layer_us = cfg->layer_us;
	tm->base_layer_us = cfg->layer_us;
	tm->ref_experts = cfg->ref_experts;
	tm->cost.n_engines = cfg->copy_engines;
	tm->cost.n_layers = n_layers;
	tm->n_ids = n_ids;
	tm->state = calloc(n_ids, sizeof(*tm->state));
	tm->admit = calloc(n_ids, sizeof(*tm->admit));
	tm->pf_unused = calloc(n_ids, sizeof(*tm->pf_unused));
	tm->left = calloc(n_ids, sizeof(*tm->left));
	tm->next = malloc(sizeof(*tm->next) * n_ids);
	tm->prev = malloc(sizeof(*tm->prev) * n_ids);
	tm->ids = malloc(sizeof(*tm->ids) * MOECACHE_PLAN_MAX_ITEMS);
	tm->copy_left = malloc(sizeof(*tm->copy_left) * MOECACHE_PLAN_MAX_ITEMS);
	tm->action = malloc(sizeof(*tm->action) * MOECACHE_PLAN_MAX_ITEMS);
	if (!tm->state || !tm->admit || !tm->pf_unused || !tm->left || !tm->next || !tm->prev ||
	    !tm->ids || !tm->copy_left || !tm->action) {
		moe_timing_destroy(tm);
		return -ENOMEM;
	}
	if (moecache_plan_cost_check(&tm->cost)) {
		moe_timing_destroy(tm);
		return -EINVAL;
	}
	tm->prefetch.head = tm->prefetch.tail = TM_NONE;
	tm->background.head = tm->background.tail = TM_NONE;
	*out = tm;
	return 0;
}

void moe_timing_destroy(struct moe_timing *tm)
{
	if (!tm)
		return;
	free(tm->state);
	free(tm->admit);
	free(tm->pf_unused);
	free(tm->left);
	free(tm->next);
	free(tm->prev);
	free(tm->ids);
	free(tm->copy_left);
	free(tm->action);
	free(tm);
}

/* Gives up to *cap of engine time to the list's copies, in order. */
static void tm_progress(struct moe_timing *tm, struct tm_list *l, double *cap)
{
	while (*cap > 0 && l->head != TM_NONE) {
		uint32_t id = l->head;
		double take = tm->left[id] < *cap ? tm->left[id] : *cap;

		tm->left[id] -= take;
		l->left_us -= take;
		*cap -= take;
		tm->r.link_busy_us += take;
		if (tm->left[id] > 1e-9)
			break;
		tm_list_remove(tm, l, id);
		tm->left[id] = 0;
		tm->state[id] = TM_READY;
	}
}

void moe_timing_step_begin(struct moe_timing *tm)
{
	double cap = 0;

	/* Engine time between the last mark and now that no demand copy used. */
	for (uint32_t e = 0; e < tm->cost.n_engines; e++) {
		double from = tm->free_at[e] > tm->mark ? tm->free_at[e] : tm->mark;

		if (tm->now > from)
			cap += tm->now - from;
	}
	tm_progress(tm, &tm->background, &cap);
	tm_progress(tm, &tm->prefetch, &cap);
	tm->mark = tm->now;
	tm->step_cpu = 0;
	tm->step_end = tm->now + tm->cost.layer_us;
}

int moe_timing_plan(struct moe_timing *tm, const uint32_t *ids, const bool *resident, uint32_t n)
{
	struct moecache_plan_queue q = {0};
	double end = 0, done = tm->now;
	uint32_t m = 0;
	int err;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = ids[i];

		if (id >= tm->n_ids)
			return -EINVAL;
		tm->pf_unused[id] = false;
		if (resident[i] && tm->state[id] == TM_READY)
			continue;
		if (m == MOECACHE_PLAN_MAX_ITEMS)
			return -EINVAL;
		tm->ids[m] = id;
		tm->copy_left[m++] = resident[i] ? tm->left[id] : tm->cost.copy_us;
		if (resident[i])
			tm->r.late++;
	}
	/* A batched step reads more experts' weights on the device. */
	tm->cost.layer_us = tm->base_layer_us;
	if (tm->ref_experts && n > tm->ref_experts)
		tm->cost.layer_us = tm->base_layer_us * n / tm->ref_experts;
	tm->r.resident_us += tm->cost.layer_us;
	for (uint32_t e = 0; e < tm->cost.n_engines; e++)
		q.engine_busy_us[e] = tm->free_at[e] > tm->now ? tm->free_at[e] - tm->now : 0;
	q.background_us = tm->background.left_us; /* prefetches yield to it */
	err = moecache_plan_layer(&tm->cost, &q, tm->copy_left, m, tm->action, &end);
	if (err)
		return err;
	for (uint32_t i = 0; i < m; i++) {
		uint32_t id = tm->ids[i];
		bool late = tm->state[id] == TM_BACKGROUND || tm->state[id] == TM_PREFETCH;

		tm->admit[id] = tm->action[i] == MOECACHE_PLAN_CPU ? 0 : 1 + tm->action[i];
		if (tm->action[i] == MOECACHE_PLAN_WAIT) {
			uint32_t best = 0;
			double start;

			for (uint32_t e = 1; e < tm->cost.n_engines; e++)
				if (tm->free_at[e] < tm->free_at[best])
					best = e;
			start = tm->free_at[best] > tm->now ? tm->free_at[best] : tm->now;
			tm->free_at[best] = start + tm->copy_left[i];
			tm->r.link_busy_us += tm->copy_left[i];
			if (tm->free_at[best] > done)
				done = tm->free_at[best];
			if (late) {
				tm_list_remove(tm, tm_list_of(tm, id), id);
				tm->left[id] = 0;
				tm->state[id] = TM_READY;
			} else {
				tm->r.copies++;
				tm->r.waited_copies++;
			}
		} else {
			tm->step_cpu++;
			tm->r.cpu_experts++;
		}
	}
	tm->step_end = tm->now + tm->cost.layer_us;
	if (done > tm->step_end)
		tm->step_end = done;
	if (tm->now + tm->step_cpu * tm->cost.cpu_us > tm->step_end)
		tm->step_end = tm->now + tm->step_cpu * tm->cost.cpu_us;
	return 0;
}

bool moe_timing_admit(const struct moe_timing *tm, uint32_t id)
{
	return id < tm->n_ids && tm->admit[id];
}

void moe_timing_filled(struct moe_timing *tm, uint32_t id, bool prefetch)
{
	if (id >= tm->n_ids)
		return;
	if (!prefetch && tm->admit[id] == 1 + MOECACHE_PLAN_WAIT) {
		tm->admit[id] = 0;
		tm->state[id] = TM_READY; /* waited for by this step */
		return;
	}
	tm->left[id] = tm->cost.copy_us;
	tm->r.copies++;
	if (!prefetch) {
		/* A CPU expert's background copy (or one the plan did not see: same). */
		tm->admit[id] = 0;
		tm->state[id] = TM_BACKGROUND;
		tm_list_push(tm, &tm->background, id);
		tm->r.background_copies++;
		return;
	}
	tm->state[id] = TM_PREFETCH;
	tm->pf_unused[id] = true;
	tm_list_push(tm, &tm->prefetch, id);
	tm->r.prefetch_copies++;
}

static void tm_waste(struct moe_timing *tm, uint32_t id)
{
	double copied =
	    tm->state[id] == TM_READY ? tm->cost.copy_us : tm->cost.copy_us - tm->left[id];

	if (tm->pf_unused[id] && tm->state[id] != TM_ABSENT)
		tm->r.wasted_prefetch_bytes += (uint64_t)(tm->bytes * copied / tm->cost.copy_us);
	tm->pf_unused[id] = false;
}

void moe_timing_evicted(struct moe_timing *tm, uint32_t id)
{
	struct tm_list *l;

	if (id >= tm->n_ids)
		return;
	tm_waste(tm, id);
	l = tm_list_of(tm, id);
	if (l)
		tm_list_remove(tm, l, id);
	tm->left[id] = 0;
	tm->state[id] = TM_ABSENT;
}

bool moe_timing_prefetch_useful(const struct moe_timing *tm)
{
	double idle = 0;

	for (uint32_t e = 0; e < tm->cost.n_engines; e++) {
		double from = tm->free_at[e] > tm->now ? tm->free_at[e] : tm->now;

		if (tm->step_end > from)
			idle += tm->step_end - from;
	}
	/* Room left, after what is queued, for the whole copy before the next step. */
	return idle >= tm->background.left_us + tm->prefetch.left_us + tm->cost.copy_us;
}

void moe_timing_step_end(struct moe_timing *tm)
{
	tm->now = tm->step_end;
}

void moe_timing_result(struct moe_timing *tm, struct moe_timing_result *out)
{
	for (uint32_t id = 0; id < tm->n_ids; id++)
		tm_waste(tm, id);
	tm->r.total_us = tm->now;
	tm->r.stall_us = tm->r.total_us - tm->r.resident_us;
	tm->r.modeled_speed = tm->r.total_us > 0 ? tm->r.resident_us / tm->r.total_us : 1.0;
	tm->r.link_utilisation =
	    tm->r.total_us > 0 ? tm->r.link_busy_us / (tm->r.total_us * tm->cost.n_engines) : 0;
	*out = tm->r;
}
