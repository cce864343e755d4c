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

/* ---- the order of copies: demand first, prefetches in chunks, cancellable ---- */

#define SCHED_NONE UINT32_MAX

int agent_copy_sched_init(struct agent_copy_sched *s, uint32_t n_workers, uint64_t expert_bytes,
			  uint64_t chunk_bytes)
{
	memset(s, 0, sizeof(*s));
	if (!n_workers || !expert_bytes)
		return -EINVAL;
	s->started = calloc(n_workers, sizeof(*s->started));
	if (!s->started)
		return -ENOMEM;
	s->n_started = n_workers;
	s->expert_bytes = expert_bytes;
	s->chunk_bytes = chunk_bytes ? chunk_bytes : AGENT_COPY_CHUNK_BYTES;
	return 0;
}

void agent_copy_sched_fini(struct agent_copy_sched *s)
{
	agent_copy_queue_free(&s->demand);
	agent_copy_queue_free(&s->prefetch);
	free(s->started);
	s->started = NULL;
	s->n_started = 0;
}

int agent_copy_sched_push(struct agent_copy_sched *s, const struct agent_copy *c)
{
	return agent_copy_queue_push(c->flags & MOECACHE_FILL_PREFETCH ? &s->prefetch : &s->demand,
				     c);
}

static void sched_piece(struct agent_copy_sched *s, uint32_t w, struct agent_copy_piece *p)
{
	struct agent_copy_started *st = &s->started[w];
	uint64_t left = s->expert_bytes - st->done;

	st->running = true;
	p->copy = st->copy;
	p->offset = st->done;
	p->len = left < s->chunk_bytes ? left : s->chunk_bytes;
	p->worker = w;
}

bool agent_copy_sched_next(struct agent_copy_sched *s, struct agent_copy_piece *p)
{
	uint32_t free_w = SCHED_NONE;

	if (agent_copy_queue_pop(&s->demand, &p->copy)) {
		p->offset = 0;
		p->len = s->expert_bytes;
		p->worker = SCHED_NONE;
		return true;
	}
	for (uint32_t w = 0; w < s->n_started; w++) {
		if (s->started[w].used && !s->started[w].running) {
			sched_piece(s, w, p);
			return true;
		}
		if (!s->started[w].used && free_w == SCHED_NONE)
			free_w = w;
	}
	/* Every started one is running: free_w exists while workers are n_started at most. */
	if (free_w == SCHED_NONE || !s->prefetch.len)
		return false;
	agent_copy_queue_pop(&s->prefetch, &s->started[free_w].copy);
	s->started[free_w].used = true;
	s->started[free_w].done = 0;
	s->started[free_w].cancelled = false;
	s->started[free_w].status = 0;
	sched_piece(s, free_w, p);
	return true;
}

bool agent_copy_sched_piece_done(struct agent_copy_sched *s, const struct agent_copy_piece *p,
				 int status, struct agent_copy *done)
{
	struct agent_copy_started *st;

	if (p->worker == SCHED_NONE) {
		*done = p->copy;
		done->status = status;
		return true;
	}
	st = &s->started[p->worker];
	st->running = false;
	st->done += p->len;
	if (status && !st->status)
		st->status = status;
	if (st->cancelled || st->status || st->done >= s->expert_bytes) {
		*done = st->copy;
		done->status = st->cancelled ? -ECANCELED : st->status;
		st->used = false;
		return true;
	}
	s->n_overtaken += s->demand.len > 0;
	return false;
}

int agent_copy_sched_cancel(struct agent_copy_sched *s, uint32_t slot, struct agent_copy *out)
{
	struct agent_copy_queue *q = &s->prefetch;

	for (uint32_t w = 0; w < s->n_started; w++) {
		struct agent_copy_started *st = &s->started[w];

		if (!st->used || st->copy.slot != slot)
			continue;
		s->n_cancelled++;
		if (st->running) {
			st->cancelled = true;
			return -EINPROGRESS;
		}
		*out = st->copy;
		out->status = -ECANCELED;
		st->used = false;
		return 0;
	}
	for (uint32_t i = 0; i < q->len; i++) {
		uint32_t at = (q->head + i) % q->cap;

		if (q->items[at].slot != slot)
			continue;
		*out = q->items[at];
		out->status = -ECANCELED;
		/* Close the gap: the later entries move up by one, in order. */
		for (uint32_t j = i; j + 1 < q->len; j++)
			q->items[(q->head + j) % q->cap] = q->items[(q->head + j + 1) % q->cap];
		q->len--;
		s->n_cancelled++;
		return 0;
	}
	return -ENOENT;
}

bool agent_copy_sched_idle(const struct agent_copy_sched *s)
{
	if (s->demand.len || s->prefetch.len)
		return false;
	for (uint32_t w = 0; w < s->n_started; w++)
		if (s->started[w].used)
			return false;
	return true;
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
	agent_copy_queue_push(&e->done, c);
	if (e->signalled || (c->published && e->done.len < AGENT_COPY_PUBLISHED_BATCH))
		return false;
	e->signalled = true;
	return true;
}

bool agent_copy_engine_flush(struct agent_copy_engine *e)
{
	if (e->signalled || !e->done.len)
		return false;
	e->signalled = true;
	return true;
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
	/*
	 * More than max were waiting: stay readable (still signalled). Else
	 * the next finished copy decides again; one that finished between the
	 * read above and the lock saw signalled set and was taken here.
	 */
	if (e->done.len)
		agent_done_signal(e->done_fd);
	else
		e->signalled = false;
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
