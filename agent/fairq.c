// SPDX-License-Identifier: MIT
/* The weighted fair queue of copies (see fairq.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "fairq.h"

int agent_fairq_init(struct agent_fairq *q, enum agent_fairq_mode mode, uint32_t n_tenants,
		     uint32_t capacity)
{
	*q = (struct agent_fairq){0};
	if (!n_tenants || !capacity || (mode != AGENT_FAIRQ_FAIR && mode != AGENT_FAIRQ_FIFO))
		return -EINVAL;
	q->tenants = calloc(n_tenants, sizeof(*q->tenants));
	if (!q->tenants)
		return -ENOMEM;
	q->mode = mode;
	q->n_tenants = n_tenants;
	q->capacity = capacity;
	for (uint32_t t = 0; t < n_tenants; t++) {
		q->tenants[t].weight = 1.0;
		q->tenants[t].batch_used = -1; /* no batch open */
		q->tenants[t].ring = calloc(capacity, sizeof(*q->tenants[t].ring));
		if (!q->tenants[t].ring) {
			agent_fairq_destroy(q);
			return -ENOMEM;
		}
	}
	return 0;
}

void agent_fairq_destroy(struct agent_fairq *q)
{
	for (uint32_t t = 0; q->tenants && t < q->n_tenants; t++)
		free(q->tenants[t].ring);
	free(q->tenants);
	*q = (struct agent_fairq){0};
}

int agent_fairq_set_weight(struct agent_fairq *q, uint32_t tenant, double weight)
{
	if (tenant >= q->n_tenants || !isfinite(weight) || !(weight > 0))
		return -EINVAL;
	q->tenants[tenant].weight = weight;
	return 0;
}

int agent_fairq_push(struct agent_fairq *q, uint32_t tenant, uint32_t item, double cost)
{
	struct agent_fairq_tenant *t;
	struct agent_fairq_item *it;

	if (tenant >= q->n_tenants || !isfinite(cost) || cost < 0)
		return -EINVAL;
	t = &q->tenants[tenant];
	if (t->len == q->capacity)
		return -ENOSPC;
	it = &t->ring[(t->head + t->len) % q->capacity];
	it->item = item;
	it->cost = cost;
	it->seq = q->seq++;
	if (q->mode == AGENT_FAIRQ_FIFO) {
		it->tag = (double)it->seq;
	} else if (t->batch_used >= 0 && t->batch_used + cost <= q->quantum) {
		/* Inside the open batch's quantum: its start tag, served with it. */
		it->tag = t->batch_tag;
		t->batch_used += cost;
		if (t->batch_tag + t->batch_used / t->weight > t->finish)
			t->finish = t->batch_tag + t->batch_used / t->weight;
	} else {
		t->batch_used = -1; /* the batch is past its quantum */
		it->tag = t->finish > q->vtime ? t->finish : q->vtime;
		t->finish = it->tag + cost / t->weight;
	}
	t->len++;
	t->queued += cost;
	q->len++;
	return 0;
}

bool agent_fairq_pop(struct agent_fairq *q, uint32_t *tenant, uint32_t *item, double *cost)
{
	struct agent_fairq_item *best = NULL, *it;
	uint32_t best_t = 0;

	for (uint32_t i = 0; i < q->n_tenants; i++) {
		struct agent_fairq_tenant *t = &q->tenants[i];

		if (!t->len)
			continue;
		it = &t->ring[t->head];
		if (!best || it->tag < best->tag || (it->tag == best->tag && it->seq < best->seq)) {
			best = it;
			best_t = i;
		}
	}
	if (!best)
		return false;
	*tenant = best_t;
	*item = best->item;
	*cost = best->cost;
	if (q->mode == AGENT_FAIRQ_FAIR)
		q->vtime = best->tag;
	q->tenants[best_t].head = (q->tenants[best_t].head + 1) % q->capacity;
	q->tenants[best_t].len--;
	q->tenants[best_t].queued -= best->cost;
	if (!q->tenants[best_t].len)
		q->tenants[best_t].queued = 0; /* no drift from repeated sums */
	q->len--;
	return true;
}

double agent_fairq_ahead(const struct agent_fairq *q, uint32_t tenant)
{
	const struct agent_fairq_tenant *own;
	double start, ahead = 0;

	if (tenant >= q->n_tenants)
		return 0;
	own = &q->tenants[tenant];
	start = own->finish > q->vtime ? own->finish : q->vtime;
	for (uint32_t i = 0; i < q->n_tenants; i++) {
		const struct agent_fairq_tenant *t = &q->tenants[i];

		if (q->mode == AGENT_FAIRQ_FIFO) {
			ahead += t->queued;
			continue;
		}
		for (uint32_t j = 0; j < t->len; j++) {
			const struct agent_fairq_item *it = &t->ring[(t->head + j) % q->capacity];

			if (it->tag > start)
				break; /* a tenant's tags never decrease */
			ahead += it->cost;
		}
	}
	return ahead;
}

int agent_fairq_set_quantum(struct agent_fairq *q, double quantum)
{
	if (!isfinite(quantum) || quantum < 0)
		return -EINVAL;
	q->quantum = quantum;
	return 0;
}

int agent_fairq_begin_batch(struct agent_fairq *q, uint32_t tenant)
{
	struct agent_fairq_tenant *t;

	if (tenant >= q->n_tenants)
		return -EINVAL;
	t = &q->tenants[tenant];
	t->batch_tag = t->finish > q->vtime ? t->finish : q->vtime;
	t->batch_used = 0;
	return 0;
}

double agent_fairq_queued(const struct agent_fairq *q, uint32_t tenant)
{
	return tenant < q->n_tenants ? q->tenants[tenant].queued : 0;
}
