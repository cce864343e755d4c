/* SPDX-License-Identifier: MIT */
/*
 * A weighted fair queue of copies, one FIFO per tenant: what the link
 * serves next when several tenants wait for demand copies.
 *
 * Start-time fair queuing (Goyal, Vin and Cheng): a copy of cost c pushed
 * by tenant t gets the start tag S = max(V, F_t) and moves F_t to
 * S + c / w_t, where V is the start tag of the copy last popped and w_t
 * the tenant's weight; pop serves the head with the smallest start tag
 * (ties: the earlier push). Over any interval in which two tenants are
 * both backlogged, the link time each gets is in proportion to its weight,
 * within one copy; a tenant that was idle comes back at V, with no credit
 * saved up. In FIFO mode the tag is the push order: first come, first
 * served, the behaviour it replaces, kept to measure against.
 *
 * Room is reserved up front (capacity copies per tenant): push never
 * allocates and fails with -ENOSPC when the tenant's FIFO is full.
 * Single-threaded: the caller serialises.
 */
#ifndef MOECACHE_AGENT_FAIRQ_H
#define MOECACHE_AGENT_FAIRQ_H

#include <stdbool.h>
#include <stdint.h>

enum agent_fairq_mode {
	AGENT_FAIRQ_FAIR = 0,
	AGENT_FAIRQ_FIFO,
};

struct agent_fairq_item {
	uint32_t item; /* the caller's */
	double cost;
	double tag;
	uint64_t seq;
};

struct agent_fairq_tenant {
	double weight;
	double finish;		      /* F_t */
	double queued;		      /* cost of its queued copies */
	double batch_tag, batch_used; /* the open batch: its start tag, cost tagged so far */
	uint32_t head, len;
	struct agent_fairq_item *ring; /* capacity entries */
};

struct agent_fairq {
	enum agent_fairq_mode mode;
	uint32_t n_tenants, capacity;
	double vtime;	/* V */
	double quantum; /* cost of a batch served as one: 0, none */
	uint64_t seq;
	uint32_t len; /* copies queued, all tenants */
	struct agent_fairq_tenant *tenants;
};

/* Every weight 1. Returns 0, -EINVAL (no tenant, no capacity, bad mode) or -ENOMEM. */
int agent_fairq_init(struct agent_fairq *q, enum agent_fairq_mode mode, uint32_t n_tenants,
		     uint32_t capacity);
void agent_fairq_destroy(struct agent_fairq *q);
/*
 * Batches: a client's step waits for all its copies, so serving them one by
 * one turn about with other tenants' delays every step to the end of the
 * round. After agent_fairq_begin_batch(tenant), the tenant's pushes share
 * one start tag until they add up to the quantum: up to a quantum of a
 * step's copies are served back to back; the rest of a larger batch (a
 * prefill) is tagged copy by copy and so interleaved with other tenants.
 * The quantum is 0 (none) until set; returns 0 or -EINVAL (not finite, < 0).
 */
int agent_fairq_set_quantum(struct agent_fairq *q, double quantum);
/* Returns 0 or -EINVAL (no such tenant). */
int agent_fairq_begin_batch(struct agent_fairq *q, uint32_t tenant);
/* Returns 0 or -EINVAL (no such tenant, a weight not finite and > 0). */
int agent_fairq_set_weight(struct agent_fairq *q, uint32_t tenant, double weight);
/* Returns 0, -EINVAL (no such tenant, a cost not finite and >= 0) or -ENOSPC. */
int agent_fairq_push(struct agent_fairq *q, uint32_t tenant, uint32_t item, double cost);
/* The next copy to serve: true and *tenant, *item, *cost; false when empty. */
bool agent_fairq_pop(struct agent_fairq *q, uint32_t *tenant, uint32_t *item, double *cost);
/*
 * The cost the link serves before a batch tenant begins now: in FIFO mode
 * everything queued; in fair mode every queued copy whose start tag is at
 * most the batch's (its own queued copies among them), which is exact for
 * the batch's first quantum (later pushes by others are tagged after it).
 * What a plan takes as the copies ahead of it. 0 for no such tenant.
 */
double agent_fairq_ahead(const struct agent_fairq *q, uint32_t tenant);
/* Cost queued for tenant (0 for no such tenant). */
double agent_fairq_queued(const struct agent_fairq *q, uint32_t tenant);

#endif /* MOECACHE_AGENT_FAIRQ_H */
