// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bank.h"

/* A deferred release's marker: a backend event, or a caller's callback. */
struct mc_gpu_marker {
	void *event;
	int (*done)(void *arg);
	void *arg;
};

/* Per thread, as dlerror(): an import that fails has no object to hold it. */
static __thread char mc_gpu_import_err[256];

void mc_gpu_set_import_error(const char *msg)
{
	snprintf(mc_gpu_import_err, sizeof(mc_gpu_import_err), "%s", msg ? msg : "");
}

const char *moecache_bank_import_error(void)
{
	return mc_gpu_import_err;
}

static struct mc_gpu_bank *mc_gpu_bank_of(const struct moecache_bank_map *b)
{
	if (!b || !b->base ||
	    (b->backend != MOECACHE_BACKEND_CUDA && b->backend != MOECACHE_BACKEND_ROCM))
		return NULL;
	return b->base;
}

static int mc_gpu_marker_query(void *ctx, void *marker)
{
	struct mc_gpu_bank *g = ctx;
	struct mc_gpu_marker *m = marker;

	if (m->done) {
		int st = m->done(m->arg);

		return st < 0 ? st : st > 0;
	}
	return g->ops->query(g, m->event);
}

static int mc_gpu_marker_wait(void *ctx, void *marker)
{
	struct mc_gpu_bank *g = ctx;
	struct mc_gpu_marker *m = marker;
	int st;

	if (!m->done && g->ops->wait)
		return g->ops->wait(g, m->event);
	while ((st = mc_gpu_marker_query(ctx, marker)) == 0) {
		struct timespec ts = {.tv_sec = 0, .tv_nsec = 20000};

		nanosleep(&ts, NULL);
	}
	return st < 0 ? st : 0;
}

static int mc_gpu_marker_release(void *ctx, const uint32_t *slots, uint32_t count)
{
	struct mc_gpu_bank *g = ctx;
	int ret = moecache_release(g->mc, slots, count);

	if (ret)
		snprintf(g->err, sizeof(g->err), "dropping %u deferred pins: %s", count,
			 strerror(-ret));
	return ret;
}

static void mc_gpu_marker_put(void *ctx, void *marker)
{
	struct mc_gpu_bank *g = ctx;
	struct mc_gpu_marker *m = marker;

	if (m->event && g->ops->put)
		g->ops->put(g, m->event);
	free(m);
}

static const struct mc_release_ops mc_gpu_release_ops = {
    .query = mc_gpu_marker_query,
    .wait = mc_gpu_marker_wait,
    .release = mc_gpu_marker_release,
    .put_marker = mc_gpu_marker_put,
};

int mc_gpu_bank_init(struct mc_gpu_bank *g, const struct moecache_bank_map *b,
		     const struct mc_gpu_bank_ops *ops)
{
	g->backend = b->backend;
	g->n_slots = b->n_slots;
	g->slot_stride = b->slot_stride;
	g->ops = ops;
	g->err[0] = '\0';
	mc_release_queue_init(&g->rq, &mc_gpu_release_ops, g);
	return -pthread_mutex_init(&g->lock, NULL);
}

void mc_gpu_bank_fini(struct mc_gpu_bank *g)
{
	mc_release_queue_destroy(&g->rq);
	pthread_mutex_destroy(&g->lock);
}

uint64_t moecache_bank_slot_addr(const struct moecache_bank_map *b, uint32_t slot)
{
	const struct mc_gpu_bank *g = mc_gpu_bank_of(b);

	/* A global slot; the object holds the bank's own, from slot_begin (below wraps). */
	if (!g || !g->dev_base || slot - b->slot_begin >= g->n_slots)
		return 0;
	return g->dev_base + (uint64_t)(slot - b->slot_begin) * g->slot_stride;
}

const char *moecache_bank_error(const struct moecache_bank_map *b)
{
	const struct mc_gpu_bank *g = mc_gpu_bank_of(b);

	return g ? g->err : "";
}

/* The queue's pins all belong to one handle: the first that defers a release. */
static int mc_gpu_bank_bind_mc(struct mc_gpu_bank *g, struct moecache *mc)
{
	if (!mc)
		return -EINVAL;
	if (g->mc && g->mc != mc) {
		snprintf(g->err, sizeof(g->err),
			 "deferred releases of one bank map must use one moecache handle");
		return -EINVAL;
	}
	g->mc = mc;
	return 0;
}

int moecache_bank_acquire(struct moecache *mc, struct moecache_bank_map *b, void *stream,
			  uint32_t layer, const uint32_t *experts, uint32_t count, uint32_t *slots,
			  uint32_t flags, uint32_t timeout_ms, struct moecache_acquire_result *res)
{
	struct mc_gpu_bank *g = mc_gpu_bank_of(b);
	int ret = 0;

	if (!g)
		return -EINVAL;
	pthread_mutex_lock(&g->lock);
	if (g->ops->check_stream)
		ret = g->ops->check_stream(g, stream);
	/* Pins of finished steps go first: a waiting acquire may need their slots. */
	if (!ret && g->mc == mc && mc_release_queue_len(&g->rq))
		mc_release_queue_poll(&g->rq);
	pthread_mutex_unlock(&g->lock);
	if (ret)
		return ret;
	return moecache_acquire(mc, layer, experts, count, slots, flags, timeout_ms, res);
}

/* Queues marker m for slots; m is freed on failure. Under g->lock. */
static int mc_gpu_bank_defer(struct mc_gpu_bank *g, struct mc_gpu_marker *m, const uint32_t *slots,
			     uint32_t count)
{
	int ret = mc_release_queue_push(&g->rq, m, slots, count);

	if (ret) {
		mc_gpu_marker_put(g, m);
		return ret;
	}
	/* Keep the queue short: retire what has already passed (errors land in g->err). */
	mc_release_queue_poll(&g->rq);
	return 0;
}

int moecache_bank_release_after(struct moecache *mc, struct moecache_bank_map *b, void *stream,
				const uint32_t *slots, uint32_t count)
{
	struct mc_gpu_bank *g = mc_gpu_bank_of(b);
	struct mc_gpu_marker *m;
	int ret;

	if (!g || (count && !slots))
		return -EINVAL;
	if (!g->ops->marker)
		return -EOPNOTSUPP;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_mutex_lock(&g->lock);
	ret = mc_gpu_bank_bind_mc(g, mc);
	if (!ret && g->ops->check_stream)
		ret = g->ops->check_stream(g, stream);
	if (!ret)
		ret = g->ops->marker(g, stream, &m->event);
	if (ret) {
		free(m);
	} else {
		ret = mc_gpu_bank_defer(g, m, slots, count);
	}
	pthread_mutex_unlock(&g->lock);
	return ret;
}

int moecache_bank_release_when(struct moecache *mc, struct moecache_bank_map *b,
			       int (*done)(void *arg), void *arg, const uint32_t *slots,
			       uint32_t count)
{
	struct mc_gpu_bank *g = mc_gpu_bank_of(b);
	struct mc_gpu_marker *m;
	int ret;

	if (!g || !done || (count && !slots))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->done = done;
	m->arg = arg;
	pthread_mutex_lock(&g->lock);
	ret = mc_gpu_bank_bind_mc(g, mc);
	if (ret)
		free(m);
	else
		ret = mc_gpu_bank_defer(g, m, slots, count);
	pthread_mutex_unlock(&g->lock);
	return ret;
}

int moecache_bank_release_poll(struct moecache_bank_map *b)
{
	struct mc_gpu_bank *g = mc_gpu_bank_of(b);
	int ret;

	if (!g)
		return -EINVAL;
	pthread_mutex_lock(&g->lock);
	ret = mc_release_queue_poll(&g->rq);
	pthread_mutex_unlock(&g->lock);
	return ret;
}

int moecache_bank_release_flush(struct moecache_bank_map *b)
{
	struct mc_gpu_bank *g = mc_gpu_bank_of(b);
	int ret;

	if (!g)
		return -EINVAL;
	pthread_mutex_lock(&g->lock);
	ret = mc_release_queue_flush(&g->rq);
	pthread_mutex_unlock(&g->lock);
	return ret;
}

uint32_t moecache_bank_release_pending(const struct moecache_bank_map *b)
{
	struct mc_gpu_bank *g = mc_gpu_bank_of(b);
	uint32_t n;

	if (!g)
		return 0;
	pthread_mutex_lock(&g->lock);
	n = mc_release_queue_len(&g->rq);
	pthread_mutex_unlock(&g->lock);
	return n;
}
