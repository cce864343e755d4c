// SPDX-License-Identifier: MIT
/* The GPU copy engine over a vendor's device ops (see gpu.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/log.h"
#include "gpu.h"
#include "libmoecache.h"

/* Ids of engines (gpu.h: agent_gpu_engine.id), never reused. */
static uint64_t gpu_engine_ids;

/*
 * The device_addr of a host range that is not registered and that copies
 * cannot read from (ROCm); an unregistered range with device_addr 0 is
 * read through the driver's staging (CUDA).
 */
#define GPU_RANGE_UNUSABLE 1u

/* The completion thread's sleep bounds when the driver gives it nothing to wait on. */
#define GPU_POLL_MIN_NS 5000u
#define GPU_POLL_MAX_NS 100000u

const char *agent_gpu_engine_pool(const struct agent_gpu_engine *g)
{
	return g->pool[0] ? g->pool : NULL;
}

void agent_gpu_log_err(struct agent_gpu_engine *g)
{
	agent_logf(NULL, LOG_ERR, agent_gpu_engine_pool(g), "%s: %s", moecache_backend_name(g->ops->backend), g->err);
}

void agent_gpu_errf(struct agent_gpu_engine *g, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->err, sizeof(g->err), fmt, ap);
	va_end(ap);
	agent_gpu_log_err(g);
}

static void gpu_sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
			      .tv_nsec = (long)(ns % 1000000000u)};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- FIFOs ---- */

static int gpu_queue_push(struct agent_gpu_queue *q, const struct agent_gpu_copy *c)
{
	struct agent_gpu_copy *items =
	    agent_ring_grow(q->items, sizeof(*q->items), &q->head, q->len, &q->cap, q->len + 1, 32);

	if (!items)
		return -ENOMEM;
	q->items = items;
	q->items[(q->head + q->len) % q->cap] = *c;
	q->len++;
	return 0;
}

static struct agent_gpu_copy *gpu_queue_head(struct agent_gpu_queue *q)
{
	return q->len ? &q->items[q->head] : NULL;
}

static void gpu_queue_pop(struct agent_gpu_engine *g, uint32_t qi)
{
	struct agent_gpu_queue *q = &g->queues[qi];

	g->ops->retire(g, qi, &q->items[q->head]);
	q->head = (q->head + 1) % q->cap;
	q->len--;
}

/* ---- completion thread ---- */

/* A copy is over (under lock): to the collector, with status. Room was reserved by the copy. */
static void gpu_finish(struct agent_gpu_engine *g, struct agent_copy *c, int status)
{
	c->status = status;
	if (agent_copy_engine_done(&g->eng, c))
		agent_copy_engine_signal(&g->eng);
}

static int gpu_enqueue_on(struct agent_gpu_engine *g, uint32_t qi, struct agent_gpu_copy *gc);

/*
 * The piece after done (a copy of the entry that was just popped from
 * queue qi) onto the same queue; no allocation, since it takes the popped
 * entry's room. 0, or -errno from the device (the prefetch then fails).
 */
static int gpu_next_piece(struct agent_gpu_engine *g, uint32_t qi, struct agent_gpu_copy *done)
{
	uint64_t left;

	done->dst += done->bytes;
	done->src += done->bytes;
	done->off += done->bytes;
	left = g->cfg.expert_bytes - done->off;
	done->bytes = left < g->chunk_bytes ? left : g->chunk_bytes;
	done->gate_at_ns = 0;
	done->fence = done->gate_fence = done->end = 0;
	return gpu_enqueue_on(g, qi, done);
}

/*
 * Retires what has finished at the head of queue qi (under lock). Returns
 * true if something moved; *wait_ns gets how long a delayed copy wants.
 */
static bool gpu_queue_progress(struct agent_gpu_engine *g, uint32_t qi, uint64_t *wait_ns)
{
	struct agent_gpu_queue *q = &g->queues[qi];
	struct agent_gpu_copy *h;
	bool moved = false;

	while ((h = gpu_queue_head(q))) {
		int ret = g->ops->query(g, qi, h);

		if (ret == -EINPROGRESS)
			break;
		if (!ret && h->gate_at_ns) {
			uint64_t now = mc_gpu_now_ns();

			if (now < h->gate_at_ns) {
				if (h->gate_at_ns - now < *wait_ns)
					*wait_ns = h->gate_at_ns - now;
				break;
			}
			/* The slot has been half-written for the delay: the rest may go. */
			h->gate_at_ns = 0;
			moved = true;
			ret = g->ops->open_gate(g, qi, h);
			if (!ret)
				continue;
		}
		moved = true;
		if (ret)
			agent_logf(NULL, LOG_ERR, agent_gpu_engine_pool(g),
				   "%s: copy into slot %u failed: %s", moecache_backend_name(g->ops->backend), h->c.slot,
				   strerror(-ret));
		else if (!h->cancelled && h->off + h->bytes < g->cfg.expert_bytes) {
			/* A prefetch's piece: the next goes behind what was queued meanwhile. */
			struct agent_gpu_copy next = *h;

			gpu_queue_pop(g, qi);
			ret = gpu_next_piece(g, qi, &next);
			if (!ret)
				continue;
			gpu_finish(g, &next.c, ret);
			continue;
		}
		gpu_finish(g, &h->c, h->cancelled ? -ECANCELED : ret);
		gpu_queue_pop(g, qi);
	}
	return moved;
}

static void *gpu_completion_thread(void *arg)
{
	struct agent_gpu_engine *g = arg;
	uint64_t poll_ns = GPU_POLL_MIN_NS;

	pthread_mutex_lock(&g->eng.lock);
	for (;;) {
		uint64_t wait_ns = UINT64_MAX;
		uint32_t busy = 0, last = 0;
		bool moved = false;

		for (uint32_t i = 0; i < g->n_queues; i++) {
			moved |= gpu_queue_progress(g, i, &wait_ns);
			if (g->queues[i].len) {
				busy++;
				last = i;
			}
		}
		if (!busy) {
			if (g->eng.stopping)
				break;
			poll_ns = GPU_POLL_MIN_NS;
			pthread_cond_wait(&g->eng.work, &g->eng.lock);
			continue;
		}
		if (moved) {
			poll_ns = GPU_POLL_MIN_NS;
			continue;
		}
		if (wait_ns == UINT64_MAX) {
			/* Only device work to wait for: in the driver, where it can. */
			const struct agent_gpu_copy *head =
			    busy == 1 ? gpu_queue_head(&g->queues[last]) : NULL;
			struct agent_gpu_copy one;
			bool waited;

			if (head)
				one = *head; /* the FIFO may move while the lock is dropped */
			pthread_mutex_unlock(&g->eng.lock);
			waited = g->ops->wait(g, head ? &one : NULL);
			pthread_mutex_lock(&g->eng.lock);
			if (waited)
				continue;
		}
		pthread_mutex_unlock(&g->eng.lock);
		gpu_sleep_ns(wait_ns < poll_ns ? wait_ns : poll_ns);
		pthread_mutex_lock(&g->eng.lock);
		if (poll_ns < GPU_POLL_MAX_NS)
			poll_ns *= 2;
	}
	pthread_mutex_unlock(&g->eng.lock);
	return NULL;
}

/* ---- lifetime ---- */

static void gpu_release_bank(struct agent_gpu_engine *g)
{
	if (g->have_bank)
		g->ops->bank_release(g);
	if (g->bank_fd >= 0)
		close(g->bank_fd);
	if (g->budget_bytes && g->params.budget)
		mc_gpu_budget_release(g->params.budget, (uint32_t)g->device, g->budget_bytes);
	g->have_bank = false;
	g->bank_fd = -1;
	g->bank_va = 0;
	g->budget_bytes = 0;
}

void agent_gpu_backend_destroy(void *priv)
{
	struct agent_gpu_engine *g = priv;

	if (!g)
		return;
	if (g->thread_started) {
		pthread_mutex_lock(&g->eng.lock);
		g->eng.stopping = true;
		pthread_cond_broadcast(&g->eng.work);
		pthread_mutex_unlock(&g->eng.lock);
	}
	/* No DMA may still write into the bank or read the host pages. */
	if (g->bound)
		g->ops->drain(g);
	if (g->thread_started) {
		/* Drained: what is left is dropped, the thread sees the queues empty and ends. */
		pthread_mutex_lock(&g->eng.lock);
		for (uint32_t i = 0; i < g->n_queues; i++)
			while (g->queues[i].len)
				gpu_queue_pop(g, i);
		pthread_cond_broadcast(&g->eng.work);
		pthread_mutex_unlock(&g->eng.lock);
		pthread_join(g->thread, NULL);
	}
	if (g->bound)
		g->ops->unbind(g);
	for (uint32_t i = 0; i < g->host.n; i++)
		if (g->host.items[i].registered)
			g->ops->host_unregister(g, g->host.items[i].start);
	gpu_release_bank(g);
	g->ops->close(g);
	for (uint32_t i = 0; g->queues && i < g->n_queues; i++)
		free(g->queues[i].items);
	free(g->queues);
	mc_gpu_ranges_free(&g->host);
	agent_copy_engine_fini(&g->eng);
	free(g);
}

/* Fills g from cfg and params (NULL: defaults; unset fields from the environment). */
static int gpu_engine_init(struct agent_gpu_engine *g, const struct agent_backend_config *cfg,
			   const struct mc_gpu_params *params)
{
	int ret;

	g->cfg = *cfg;
	g->chunk_bytes = cfg->chunk_bytes ? cfg->chunk_bytes : AGENT_GPU_CHUNK_BYTES;
	ret = agent_copy_engine_init(&g->eng, cfg->copy_delay_us);
	if (ret) {
		snprintf(g->err, sizeof(g->err), "eventfd: %s", strerror(-ret));
		return ret;
	}
	if (params)
		g->params = *params;
	mc_gpu_params_from_env(&g->params);
	snprintf(g->pool, sizeof(g->pool), "%s", cfg->pool ? cfg->pool : "");
	g->cfg.pool = g->pool;
	g->cfg.gpu = NULL;
	if (g->params.devices) {
		if (strlen(g->params.devices) >= sizeof(g->devices)) {
			snprintf(g->err, sizeof(g->err), "the GPU device list is too long");
			return -E2BIG;
		}
		snprintf(g->devices, sizeof(g->devices), "%s", g->params.devices);
		g->params.devices = g->devices;
	}
	return 0;
}

/* The candidate devices: the one the layout names, else the spec's. */
static int gpu_candidates(struct agent_gpu_engine *g, uint32_t *devs, uint32_t *n_devs)
{
	if (g->cfg.fixed_device) {
		if (g->cfg.device >= g->n_devices) {
			snprintf(g->err, sizeof(g->err),
				 "bank %u names GPU %u, but %u GPU(s) are visible", g->cfg.bank,
				 g->cfg.device, g->n_devices);
			return -ENODEV;
		}
		devs[0] = g->cfg.device;
		*n_devs = 1;
		return 0;
	}
	return mc_gpu_devices_parse(g->params.devices, g->pool, g->n_devices, devs, n_devs, g->err,
				    sizeof(g->err));
}

int agent_gpu_backend_create(const struct agent_gpu_ops *ops,
			     const struct agent_backend_config *cfg,
			     const struct mc_gpu_params *params, void **priv, char *err,
			     size_t errlen)
{
	uint32_t devs[MC_GPU_MAX_DEVICES], n_devs;
	struct agent_gpu_engine *g;
	int ret;

	if (!cfg || !priv || !cfg->n_slots || !cfg->expert_bytes)
		return -EINVAL;
	g = calloc(1, ops->size);
	if (!g)
		return -ENOMEM;
	g->ops = ops;
	g->id = __atomic_add_fetch(&gpu_engine_ids, 1, __ATOMIC_RELAXED);
	g->bank_fd = -1;
	g->device = -1;
	ret = gpu_engine_init(g, cfg, params);
	if (!ret)
		ret = ops->open(g, &g->n_devices);
	/* Check the device list now: a typo is reported at start, not at the first bank. */
	if (!ret)
		ret = gpu_candidates(g, devs, &n_devs);
	if (ret)
		goto err;
	g->n_queues = mc_gpu_queue_count(&g->params, cfg->copy_threads);
	g->queues = calloc(g->n_queues, sizeof(*g->queues));
	if (!g->queues) {
		ret = -ENOMEM;
		goto err;
	}
	*priv = g;
	return 0;
err:
	if (g->err[0])
		agent_gpu_log_err(g);
	if (err && errlen)
		snprintf(err, errlen, "%s", g->err);
	agent_gpu_backend_destroy(g);
	return ret;
}

/* Binds the engine to a device: the vendor's queues, then the completion thread. */
static int gpu_bind(struct agent_gpu_engine *g, uint32_t device)
{
	int ret;

	g->device = (int)device;
	ret = g->ops->bind(g, device);
	g->bound = true; /* unbind undoes what bind did, even in part */
	if (ret)
		return ret;
	ret = -pthread_create(&g->thread, NULL, gpu_completion_thread, g);
	if (ret)
		return ret;
	g->thread_started = true;
	return 0;
}

/* Bank geometry on a device: slot stride and bank bytes. */
static int gpu_geometry(struct agent_gpu_engine *g, uint32_t device, uint64_t *mem_bytes,
			uint64_t *stride, uint64_t *bytes)
{
	uint64_t slot_align = 0, bank_align = 0;
	int ret = g->ops->device_info(g, device, mem_bytes, &slot_align, &bank_align);

	if (!ret)
		ret = mc_gpu_bank_geometry(g->cfg.expert_bytes, g->cfg.n_slots, slot_align, stride,
					   bytes);
	if (ret)
		return ret;
	if (*bytes > UINT64_MAX - bank_align)
		return -EOVERFLOW;
	*bytes = (*bytes + bank_align - 1) & ~(bank_align - 1);
	return 0;
}

/* The device for a new bank: the candidates, by budget room, then memory. */
static int gpu_pick_device(struct agent_gpu_engine *g, uint32_t *device)
{
	struct mc_gpu_candidate cand[MC_GPU_MAX_DEVICES];
	uint32_t devs[MC_GPU_MAX_DEVICES], n_devs = 0;
	uint64_t need = 0;
	int ret;

	ret = gpu_candidates(g, devs, &n_devs);
	if (ret) {
		agent_gpu_log_err(g);
		return ret;
	}
	for (uint32_t i = 0; i < n_devs; i++) {
		uint64_t mem = 0, stride, bytes;

		cand[i] = (struct mc_gpu_candidate){.device = devs[i]};
		if (gpu_geometry(g, devs[i], &mem, &stride, &bytes))
			continue;
		cand[i].free_bytes = mem;
		cand[i].room = g->params.budget ? mc_gpu_budget_room(g->params.budget, devs[i])
			       : g->params.device_budget ? g->params.device_budget
							 : UINT64_MAX;
		if (bytes > need)
			need = bytes;
	}
	ret = mc_gpu_pick(cand, n_devs, need);
	if (ret < 0) {
		agent_gpu_errf(
		    g,
		    "no GPU has room for a bank of %" PRIu64 " MiB (%u slots; budget %" PRIu64
		    " MiB per device): lower the pool's slots or raise the budget",
		    need >> 20, g->cfg.n_slots,
		    (g->params.budget ? g->params.budget->limit : g->params.device_budget) >> 20);
		return -ENOSPC;
	}
	*device = cand[ret].device;
	return 0;
}

/* Takes the bank's bytes from the budget; over it, -ENOSPC unless adopting (then a warning). */
static int gpu_budget_take(struct agent_gpu_engine *g, bool adopting)
{
	if (g->params.budget) {
		if (mc_gpu_budget_reserve(g->params.budget, (uint32_t)g->device, g->bank_bytes)) {
			/* An adopted bank exists and holds the residency: keep it, over budget. */
			if (adopting) {
				agent_logf(NULL, LOG_WARNING, agent_gpu_engine_pool(g),
					   "%s: the adopted bank exceeds GPU %d's budget",
					   moecache_backend_name(g->ops->backend), g->device);
				return 0;
			}
			agent_gpu_errf(
			    g, "a bank of %" PRIu64 " MiB exceeds what is left of GPU %d's budget",
			    g->bank_bytes >> 20, g->device);
			return -ENOSPC;
		}
		g->budget_bytes = g->bank_bytes;
	} else if (!adopting && g->params.device_budget &&
		   g->bank_bytes > g->params.device_budget) {
		agent_gpu_errf(g, "a bank of %" PRIu64 " MiB exceeds the budget of %" PRIu64 " MiB",
			       g->bank_bytes >> 20, g->params.device_budget >> 20);
		return -ENOSPC;
	}
	return 0;
}

static int gpu_host_range(struct agent_gpu_engine *g, const void *src, size_t len, bool writable,
			  const struct mc_gpu_range **out);

/* Registers the host region given by the agent now rather than on the first copy. */
static void gpu_register_host_region(struct agent_gpu_engine *g)
{
	const struct mc_gpu_range *r;

	if (g->params.host_base && g->params.host_size)
		gpu_host_range(g, g->params.host_base, g->params.host_size, false, &r);
}

int agent_gpu_backend_bank_create(void *priv, struct moecache_bank *desc)
{
	struct agent_gpu_engine *g = priv;
	uint64_t mem = 0;
	uint32_t device;
	int ret, fd = -1;

	if (g->have_bank)
		return -EALREADY;
	if (!g->bound) {
		ret = gpu_pick_device(g, &device);
		if (!ret)
			ret = gpu_bind(g, device);
		if (ret)
			return ret;
	}
	ret = gpu_geometry(g, (uint32_t)g->device, &mem, &g->slot_stride, &g->bank_bytes);
	if (!ret)
		ret = gpu_budget_take(g, false);
	if (ret)
		return ret;
	ret = g->ops->bank_create(g, g->bank_bytes, &fd, &g->bank_va);
	g->have_bank = true; /* bank_release undoes what bank_create did, even in part */
	if (ret) {
		gpu_release_bank(g);
		return ret;
	}
	g->bank_fd = fd;
	memset(desc, 0, sizeof(*desc));
	desc->fd = g->bank_fd;
	desc->backend = g->ops->backend;
	desc->bank_bytes = g->bank_bytes;
	desc->slot_stride = g->slot_stride;
	desc->device = (uint32_t)g->device;
	g->ops->bank_uuid(g, desc->device_uuid);
	gpu_register_host_region(g);
	return 0;
}

int agent_gpu_backend_bank_adopt(void *priv, const struct moecache_bank *desc)
{
	struct agent_gpu_engine *g = priv;
	uint32_t device;
	int ret;

	if (g->have_bank)
		return -EALREADY;
	if (desc->backend != g->ops->backend || desc->fd < 0 || !desc->slot_stride ||
	    desc->slot_stride < g->cfg.expert_bytes ||
	    g->cfg.n_slots > desc->bank_bytes / desc->slot_stride)
		return -EPROTO;
	/* Ordinals may change across a restart: the uuid (or PCI location) does not. */
	ret = g->ops->device_of(g, desc, &device);
	if (ret)
		return ret;
	if ((g->bound && g->device != (int)device) ||
	    (g->cfg.fixed_device && g->cfg.device != device))
		return -EPROTO;
	if (!g->bound) {
		ret = gpu_bind(g, device);
		if (ret)
			return ret;
	}
	g->bank_bytes = desc->bank_bytes;
	g->slot_stride = desc->slot_stride;
	ret = g->ops->bank_import(g, desc, &g->bank_va);
	g->have_bank = true;
	if (ret) {
		gpu_release_bank(g);
		return ret;
	}
	gpu_budget_take(g, true);
	g->bank_fd = desc->fd; /* ours now */
	gpu_register_host_region(g);
	return 0;
}

void *agent_gpu_backend_slot(void *priv, uint32_t slot)
{
	return NULL; /* device memory: not addressable from the host */
}

uint64_t agent_gpu_backend_slot_addr(void *priv, uint32_t slot)
{
	struct agent_gpu_engine *g = priv;

	if (!g || !g->bank_va || slot >= g->cfg.n_slots)
		return 0;
	return g->bank_va + (uint64_t)slot * g->slot_stride;
}

int agent_gpu_backend_device(const void *priv)
{
	const struct agent_gpu_engine *g = priv;

	return g && g->bound ? g->device : -1;
}

const char *agent_gpu_backend_error(const void *priv)
{
	const struct agent_gpu_engine *g = priv;

	return g ? g->err : "";
}

/*
 * The host mapping that holds [src, src + len), registered with the device
 * once (the pool's host region as a whole where src is in it). A mapping
 * that cannot be registered is remembered too: the vendor says whether
 * copies from it still work.
 */
static int gpu_host_range(struct agent_gpu_engine *g, const void *src, size_t len, bool writable,
			  const struct mc_gpu_range **out)
{
	uint64_t va = 0;
	uintptr_t start;
	size_t size;
	int ret;

	*out = mc_gpu_ranges_find(&g->host, src, len);
	if (*out)
		return (*out)->device_addr == GPU_RANGE_UNUSABLE && !(*out)->registered ? -EFAULT
											: 0;
	if (g->params.host_base && (uintptr_t)src >= (uintptr_t)g->params.host_base &&
	    (uintptr_t)src - (uintptr_t)g->params.host_base + len <= g->params.host_size) {
		start = (uintptr_t)g->params.host_base;
		size = g->params.host_size;
	} else if (mc_gpu_find_mapping(src, len, &start, &size)) {
		start = (uintptr_t)src;
		size = len;
	}
	ret = g->ops->host_register(g, start, size, writable, &va);
	if (ret < 0) {
		/* Remembered as unusable: not tried again. */
		mc_gpu_ranges_add(&g->host, start, size, GPU_RANGE_UNUSABLE, false);
		return ret;
	}
	if (ret > 0) {
		ret = mc_gpu_ranges_add(&g->host, start, size, 0, false);
	} else {
		ret = mc_gpu_ranges_add(&g->host, start, size, va == start ? 0 : va, true);
		if (ret)
			g->ops->host_unregister(g, start);
	}
	if (!ret)
		*out = &g->host.items[g->host.n - 1];
	return ret;
}

int agent_gpu_host_addr(struct agent_gpu_engine *g, const void *p, size_t len, bool writable,
			uint64_t *addr)
{
	const struct mc_gpu_range *r;
	int ret = gpu_host_range(g, p, len, writable, &r);

	if (!ret)
		*addr = (r->registered && r->device_addr ? r->device_addr : r->start) +
			((uintptr_t)p - r->start);
	return ret;
}

/* The queue with the fewest copies, prefetches off queue 0. */
static uint32_t gpu_pick_queue(const struct agent_gpu_engine *g, uint32_t flags)
{
	uint32_t first = (flags & MOECACHE_FILL_PREFETCH) && g->n_queues > 1 ? 1 : 0, best = first;

	for (uint32_t i = first + 1; i < g->n_queues; i++)
		if (g->queues[i].len < g->queues[best].len)
			best = i;
	return best;
}

/* Queues gc (a whole copy or a piece) on queue qi and tracks it (under lock). */
static int gpu_enqueue_on(struct agent_gpu_engine *g, uint32_t qi, struct agent_gpu_copy *gc)
{
	uint64_t half = g->cfg.expert_bytes / 2;
	int ret;

	gc->c.status = 0;
	gc->first = gc->bytes;
	/* With a delay, the piece that holds the expert's middle is queued in two parts. */
	if (g->eng.copy_delay_us && gc->bytes > 1 && gc->off <= half &&
	    half < gc->off + gc->bytes) {
		/* Half now, half after the delay: tests see a slot half-written. */
		gc->first = half > gc->off ? half - gc->off : gc->bytes / 2;
		gc->gate_at_ns = mc_gpu_now_ns() + (uint64_t)g->eng.copy_delay_us * 1000u;
	}
	ret = g->ops->enqueue(g, qi, gc);
	if (ret)
		return ret;
	ret = gpu_queue_push(&g->queues[qi], gc);
	if (ret) {
		/* Queued on the device but not tracked: wait so the slot is not reused under it. */
		g->ops->sync(g, qi, gc);
		g->ops->retire(g, qi, gc);
	}
	return ret;
}

/*
 * Queues a new copy (under lock, room reserved by the caller): a demand
 * copy whole, a prefetch's first piece.
 */
static int gpu_submit(struct agent_gpu_engine *g, struct agent_gpu_copy *gc)
{
	int ret;

	if ((gc->c.flags & MOECACHE_FILL_PREFETCH) && gc->bytes > g->chunk_bytes)
		gc->bytes = g->chunk_bytes;
	ret = gpu_enqueue_on(g, gpu_pick_queue(g, gc->c.flags), gc);
	if (ret)
		return ret;
	g->eng.inflight++;
	pthread_cond_signal(&g->eng.work);
	return 0;
}

int agent_gpu_backend_cancel(void *priv, uint32_t slot)
{
	struct agent_gpu_engine *g = priv;
	int ret = -ENOENT;

	pthread_mutex_lock(&g->eng.lock);
	for (uint32_t qi = 0; qi < g->n_queues && ret; qi++) {
		struct agent_gpu_queue *q = &g->queues[qi];

		for (uint32_t i = 0; i < q->len; i++) {
			struct agent_gpu_copy *gc = &q->items[(q->head + i) % q->cap];

			if (gc->c.slot == slot && (gc->c.flags & MOECACHE_FILL_PREFETCH)) {
				gc->cancelled = true;
				ret = 0;
				break;
			}
		}
	}
	pthread_mutex_unlock(&g->eng.lock);
	return ret;
}

int agent_gpu_backend_copy(void *priv, const struct agent_copy *c)
{
	struct agent_gpu_engine *g = priv;
	struct agent_gpu_copy gc = {0};
	int ret;

	if (!g->bank_va || !c || c->slot >= g->cfg.n_slots || !c->src)
		return -EINVAL;
	gc.c = *c;
	gc.dst = g->bank_va + (uint64_t)c->slot * g->slot_stride;
	gc.bytes = g->cfg.expert_bytes;
	pthread_mutex_lock(&g->eng.lock);
	ret = agent_gpu_host_addr(g, c->src, gc.bytes, false, &gc.src);
	if (!ret)
		ret = agent_copy_queue_reserve(&g->eng.done, g->eng.inflight + 1);
	if (!ret)
		ret = gpu_submit(g, &gc);
	pthread_mutex_unlock(&g->eng.lock);
	return ret;
}

bool agent_gpu_backend_can_peer(const void *dst_priv, const void *src_priv)
{
	const struct agent_gpu_engine *dst = dst_priv, *src = src_priv;

	/* Both on a device with a bank, two devices, one driver, and the driver says so. */
	return dst && src && dst != src && dst->ops == src->ops && dst->ops->can_peer &&
	       dst->bound && src->bound && dst->have_bank && src->have_bank &&
	       dst->device != src->device && dst->ops->can_peer(dst, src);
}

/* Where dst's queues see src's bank (mapped on first use). */
static int gpu_peer_va(struct agent_gpu_engine *dst, struct agent_gpu_engine *src, uint64_t *va)
{
	int ret;

	for (uint32_t i = 0; i < dst->n_peers; i++) {
		if (dst->peers[i].src_id == src->id) {
			*va = dst->peers[i].va;
			return 0;
		}
	}
	if (dst->n_peers == MC_GPU_MAX_DEVICES)
		return -ENOSPC;
	ret = dst->ops->peer_map(dst, src, dst->n_peers, va);
	if (ret)
		return ret;
	dst->peers[dst->n_peers].src_id = src->id;
	dst->peers[dst->n_peers++].va = *va;
	return 0;
}

int agent_gpu_backend_copy_peer(void *dst_priv, void *src_priv, uint32_t src_slot,
				const struct agent_copy *c)
{
	struct agent_gpu_engine *dst = dst_priv, *src = src_priv;
	struct agent_gpu_copy gc = {.peer = true};
	uint64_t src_va;
	int ret;

	if (!c || c->slot >= dst->cfg.n_slots || src_slot >= src->cfg.n_slots ||
	    dst->cfg.expert_bytes != src->cfg.expert_bytes)
		return -EINVAL;
	if (!agent_gpu_backend_can_peer(dst, src))
		return -EOPNOTSUPP;
	gc.c = *c;
	gc.c.src = NULL;
	gc.dst = dst->bank_va + (uint64_t)c->slot * dst->slot_stride;
	gc.bytes = dst->cfg.expert_bytes;
	pthread_mutex_lock(&dst->eng.lock);
	ret = gpu_peer_va(dst, src, &src_va);
	if (!ret)
		ret = agent_copy_queue_reserve(&dst->eng.done, dst->eng.inflight + 1);
	if (!ret) {
		gc.src = src_va + (uint64_t)src_slot * src->slot_stride;
		ret = gpu_submit(dst, &gc);
	}
	pthread_mutex_unlock(&dst->eng.lock);
	return ret;
}
