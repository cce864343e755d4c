// SPDX-License-Identifier: MIT
/* Copy FIFOs and the finished-copy side shared by the copy engines. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "copy_queue.h"

int agent_copy_queue_reserve(struct agent_copy_queue *q, uint32_t want)
{
	struct agent_copy *items;
	uint32_t cap;

	if (want <= q->cap)
		return 0;
	cap = q->cap ? q->cap : 64;
	while (cap < want)
		cap *= 2;
	items = malloc(cap * sizeof(*items));
	if (!items)
		return -ENOMEM;
	for (uint32_t i = 0; i < q->len; i++)
		items[i] = q->items[(q->head + i) % q->cap];
	free(q->items);
	q->items = items;
	q->head = 0;
	q->cap = cap;
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
