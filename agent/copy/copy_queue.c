// SPDX-License-Identifier: MIT
/* Copy FIFOs and the finished-copy side shared by the copy engines. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copy_queue.h"

void *agent_ring_grow(void *items, size_t size, uint32_t *head, uint32_t len, uint32_t *cap,
		      uint32_t want, uint32_t first_cap)
{
	uint32_t new_cap = *cap ? *cap : first_cap;
	char *grown;

	if (want <= *cap)
		return items;
	while (new_cap < want)
		new_cap *= 2;
	grown = malloc((size_t)new_cap * size);
	if (!grown)
		return NULL;
	for (uint32_t i = 0; i < len; i++)
		memcpy(grown + (size_t)i * size,
		       (const char *)items + (size_t)((*head + i) % *cap) * size, size);
	free(items);
	*head = 0;
	*cap = new_cap;
	return grown;
}

int agent_copy_queue_reserve(struct agent_copy_queue *q, uint32_t want)
{
	struct agent_copy *items =
	    agent_ring_grow(q->items, sizeof(*q->items), &q->head, q->len, &q->cap, want, 64);

	if (!items)
		return -ENOMEM;
	q->items = items;
	return 0;
}

int agent_copy_queue_push(struct agent_copy_queue *q, const struct agent_copy *c)
{
	int ret = agent_copy_queue_reserve(q, q->len + 1);

	if (ret)
		return ret;
	q->items[(q->head + q->len) % q->cap] = *c;
	q->len++;
	return 0;
}

bool agent_copy_queue_pop(struct agent_copy_queue *q, struct agent_copy *out)
{
	if (!q->len)
		return false;
	*out = q->items[q->head];
	q->head = (q->head + 1) % q->cap;
	q->len--;
	return true;
}

void agent_copy_queue_free(struct agent_copy_queue *q)
{
	free(q->items);
	*q = (struct agent_copy_queue){0};
}

void agent_done_signal(int done_fd)
{
	uint64_t one = 1;
	ssize_t n = write(done_fd, &one, sizeof(one));

	(void)n; /* fails only if the counter would overflow: readable then anyway */
}

int agent_done_collect(int done_fd, pthread_mutex_t *lock, struct agent_copy_queue *done,
		       uint32_t *inflight, struct agent_copy *out, uint32_t max)
{
	uint64_t count;
	uint32_t n = 0;

	/* Clear the eventfd first: a copy finishing after it re-arms it. */
	if (read(done_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		return -errno;
	pthread_mutex_lock(lock);
	while (n < max && agent_copy_queue_pop(done, &out[n]))
		n++;
	*inflight -= n;
	if (done->len) /* more than max were waiting: stay readable */
		agent_done_signal(done_fd);
	pthread_mutex_unlock(lock);
	return (int)n;
}
