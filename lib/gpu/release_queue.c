// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "release_queue.h"

void mc_release_queue_init(struct mc_release_queue *q, const struct mc_release_ops *ops, void *ctx)
{
	memset(q, 0, sizeof(*q));
	q->ops = ops;
	q->ctx = ctx;
}

int mc_release_queue_push(struct mc_release_queue *q, void *marker, const uint32_t *slots,
			  uint32_t count)
{
	struct mc_release_entry *e;
	uint32_t *copy = NULL;

	if (count && !slots)
		return -EINVAL;
	if (q->len == q->cap) {
		uint32_t cap = q->cap ? q->cap * 2 : 8;
		struct mc_release_entry *items = realloc(q->items, cap * sizeof(*items));

		if (!items)
			return -ENOMEM;
		q->items = items;
		q->cap = cap;
	}
	if (count) {
		copy = malloc(count * sizeof(*copy));
		if (!copy)
			return -ENOMEM;
		memcpy(copy, slots, count * sizeof(*copy));
	}
	e = &q->items[q->len++];
	e->marker = marker;
	e->count = count;
	e->slots = copy;
	q->pending_slots += count;
	return 0;
}

/* Drops entry i's pins and removes it; entries after it keep their order. */
static int mc_release_entry_done(struct mc_release_queue *q, uint32_t i)
{
	struct mc_release_entry e = q->items[i];
	int ret = e.count ? q->ops->release(q->ctx, e.slots, e.count) : 0;

	if (q->ops->put_marker)
		q->ops->put_marker(q->ctx, e.marker);
	free(e.slots);
	q->pending_slots -= e.count;
	memmove(&q->items[i], &q->items[i + 1], (q->len - i - 1) * sizeof(*q->items));
	q->len--;
	return ret;
}

int mc_release_queue_poll(struct mc_release_queue *q)
{
	int first_err = 0, released = 0;

	for (uint32_t i = 0; i < q->len;) {
		int st = q->ops->query(q->ctx, q->items[i].marker), ret;

		if (st == 0) {
			i++;
			continue;
		}
		ret = mc_release_entry_done(q, i);
		released++;
		if (st < 0 && !first_err)
			first_err = st;
		if (ret && !first_err)
			first_err = ret;
	}
	return first_err ? first_err : released;
}

int mc_release_queue_flush(struct mc_release_queue *q)
{
	int first_err = 0;

	while (q->len) {
		int st, ret;

		if (q->ops->wait) {
			st = q->ops->wait(q->ctx, q->items[0].marker);
		} else {
			while ((st = q->ops->query(q->ctx, q->items[0].marker)) == 0)
				;
		}
		ret = mc_release_entry_done(q, 0);
		if (st < 0 && !first_err)
			first_err = st;
		if (ret && !first_err)
			first_err = ret;
	}
	return first_err;
}

uint32_t mc_release_queue_len(const struct mc_release_queue *q)
{
	return q->len;
}

void mc_release_queue_destroy(struct mc_release_queue *q)
{
	for (uint32_t i = 0; i < q->len; i++) {
		if (q->ops && q->ops->put_marker)
			q->ops->put_marker(q->ctx, q->items[i].marker);
		free(q->items[i].slots);
	}
	free(q->items);
	q->items = NULL;
	q->len = q->cap = 0;
	q->pending_slots = 0;
}
