// SPDX-License-Identifier: MIT
/* Copy FIFOs and the finished-copy side shared by the copy engines. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
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

int agent_copy_engine_init(struct agent_copy_engine *e, uint32_t copy_delay_us)
{
	memset(e, 0, sizeof(*e));
	e->copy_delay_us = copy_delay_us;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->work, NULL);
	e->done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return e->done_fd < 0 ? -errno : 0;
}

void agent_copy_engine_fini(struct agent_copy_engine *e)
{
	agent_copy_queue_free(&e->done);
	if (e->done_fd >= 0)
		close(e->done_fd);
	e->done_fd = -1;
	pthread_cond_destroy(&e->work);
	pthread_mutex_destroy(&e->lock);
}

bool agent_copy_engine_done(struct agent_copy_engine *e, const struct agent_copy *c)
{
	bool was_empty = e->done.len == 0;

	agent_copy_queue_push(&e->done, c);
	return was_empty;
}

void agent_copy_engine_signal(struct agent_copy_engine *e)
{
	agent_done_signal(e->done_fd);
}

int agent_copy_engine_completion_fd(const void *priv)
{
	const struct agent_copy_engine *e = priv;

	return e->done_fd;
}

int agent_copy_engine_completions(void *priv, struct agent_copy *out, uint32_t max)
{
	struct agent_copy_engine *e = priv;
	uint64_t count;
	uint32_t n = 0;

	/* Clear the eventfd first: a copy finishing after it re-arms it. */
	if (read(e->done_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		return -errno;
	pthread_mutex_lock(&e->lock);
	while (n < max && agent_copy_queue_pop(&e->done, &out[n]))
		n++;
	e->inflight -= n;
	if (e->done.len) /* more than max were waiting: stay readable */
		agent_done_signal(e->done_fd);
	pthread_mutex_unlock(&e->lock);
	return (int)n;
}

uint32_t agent_copy_engine_inflight(const void *priv)
{
	struct agent_copy_engine *e = (struct agent_copy_engine *)priv;
	uint32_t n;

	pthread_mutex_lock(&e->lock);
	n = e->inflight;
	pthread_mutex_unlock(&e->lock);
	return n;
}

void agent_copy_engine_set_delay(void *priv, uint32_t copy_delay_us)
{
	struct agent_copy_engine *e = priv;

	pthread_mutex_lock(&e->lock);
	e->copy_delay_us = copy_delay_us;
	pthread_mutex_unlock(&e->lock);
}
