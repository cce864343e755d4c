// SPDX-License-Identifier: MIT
/*
 * The CUDA backend. The bank is one cuMemCreate allocation with a POSIX
 * file descriptor handle, mapped into this process with
 * cuMemAddressReserve + cuMemMap + cuMemSetAccess; the exported fd is what
 * the driver keeps and hands to clients (and back to the next agent, which
 * imports and maps it again: warm restart).
 *
 * Copies are cuMemcpyHtoDAsync from the host pages (registered once with
 * cuMemHostRegister, so the DMA engines read them directly) on several
 * copy streams, demand copies on the least loaded stream and prefetches
 * kept off stream 0 so that a demand never queues behind a batch of
 * prefetches. An event recorded after each copy marks its end; a
 * completion thread polls the oldest event of each stream and queues the
 * finished copies, signalling an eventfd. The agent commits a fill only
 * once it has collected it from there, so no slot is published before its
 * bytes are on the GPU.
 *
 * Every CUDA call is made with the device's primary context current: the
 * agent may serve pools on several GPUs from one thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "lib/gpu/cuda_api.h"
#include "copy_queue.h"
#include "gpu.h"
#include "agent/log.h"

/* The completion thread's poll period bounds, while copies are in flight. */
#define CUDA_POLL_MIN_NS 5000u
#define CUDA_POLL_MAX_NS 100000u

/* One copy in flight on a stream. */
struct cuda_copy {
	struct agent_copy c;
	cu_event done; /* recorded after the copy (or its first half) */
	cu_deviceptr dst;
	uint64_t rest_off;   /* with a delay: where the second half starts; 0 if queued */
	uint64_t rest_at_ns; /* with a delay: when to queue the second half */
};

/* A copy stream and its copies, oldest first. */
struct cuda_queue {
	cu_stream stream;
	struct cuda_copy *items;
	uint32_t head, len, cap;
};

struct cuda_backend {
	struct agent_gpu_engine g; /* first: the shared ops take priv as it */
	struct mc_cuda_api cu;

	/* The device, once a bank is made or adopted. */
	bool bound;
	cu_device dev;
	int ordinal;
	cu_context ctx;
	uint8_t uuid[16];
	size_t granularity;

	/* The bank. */
	cu_mem_handle handle;
	bool have_handle;
	cu_deviceptr base;
	bool reserved, mapped;
	uint64_t bank_bytes, slot_stride;
	int bank_fd;
	uint64_t budget_bytes; /* reserved in params.budget */

	struct mc_gpu_ranges host; /* host ranges registered (or tried) */

	/* Under eng.lock. */
	struct cuda_queue *queues;
	uint32_t n_queues;
	cu_event *spare_events;
	uint32_t n_spare, cap_spare;
	pthread_t thread;
	bool thread_started;
};

static void cuda_log_err(struct cuda_backend *cb)
{
	agent_logf(NULL, LOG_ERR, agent_gpu_engine_pool(&cb->g), "cuda: %s", cb->g.err);
}

/* Records a failed call in cb->g.err, logs it, returns its -errno. */
static int cuda_fail(struct cuda_backend *cb, cu_result res, const char *what)
{
	int ret = mc_cuda_fail(&cb->cu, res, what, cb->g.err, sizeof(cb->g.err));

	cuda_log_err(cb);
	return ret;
}

static int cuda_set_ctx(struct cuda_backend *cb)
{
	cu_result res = cb->cu.cuCtxSetCurrent(cb->ctx);

	return res == MC_CU_SUCCESS ? 0 : cuda_fail(cb, res, "cuCtxSetCurrent");
}

/* ---- FIFOs ---- */

static int cuda_queue_push(struct cuda_queue *q, const struct cuda_copy *c)
{
	struct cuda_copy *items =
	    agent_ring_grow(q->items, sizeof(*q->items), &q->head, q->len, &q->cap, q->len + 1, 32);

	if (!items)
		return -ENOMEM;
	q->items = items;
	q->items[(q->head + q->len) % q->cap] = *c;
	q->len++;
	return 0;
}

static struct cuda_copy *cuda_queue_head(struct cuda_queue *q)
{
	return q->len ? &q->items[q->head] : NULL;
}

static void cuda_queue_pop(struct cuda_queue *q)
{
	q->head = (q->head + 1) % q->cap;
	q->len--;
}

/* ---- events ---- */

static int cuda_get_event(struct cuda_backend *cb, cu_event *out)
{
	cu_result res;

	if (cb->n_spare) {
		*out = cb->spare_events[--cb->n_spare];
		return 0;
	}
	/* Blocking sync: the completion thread sleeps in cuEventSynchronize. */
	res = cb->cu.cuEventCreate(out, MC_CU_EVENT_BLOCKING_SYNC | MC_CU_EVENT_DISABLE_TIMING);
	return res == MC_CU_SUCCESS ? 0 : cuda_fail(cb, res, "cuEventCreate");
}

static void cuda_put_event(struct cuda_backend *cb, cu_event ev)
{
	if (cb->n_spare == cb->cap_spare) {
		uint32_t cap = cb->cap_spare ? cb->cap_spare * 2 : 32;
		cu_event *p = realloc(cb->spare_events, cap * sizeof(*p));

		if (!p) {
			cb->cu.cuEventDestroy(ev);
			return;
		}
		cb->spare_events = p;
		cb->cap_spare = cap;
	}
	cb->spare_events[cb->n_spare++] = ev;
}

/* ---- completion thread ---- */

static void cuda_sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
			      .tv_nsec = (long)(ns % 1000000000u)};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * Retires what has finished at the head of queue q (under lock). Returns
 * true if something moved; *wait_ns gets how long a delayed copy wants.
 */
static bool cuda_queue_progress(struct cuda_backend *cb, struct cuda_queue *q, uint64_t *wait_ns)
{
	bool moved = false;
	struct cuda_copy *h;

	while ((h = cuda_queue_head(q))) {
		cu_result res = cb->cu.cuEventQuery(h->done);

		if (res == MC_CU_ERROR_NOT_READY)
			break;
		if (res == MC_CU_SUCCESS && h->rest_off) {
			uint64_t now = mc_gpu_now_ns();

			if (now < h->rest_at_ns) {
				uint64_t w = h->rest_at_ns - now;

				if (w < *wait_ns)
					*wait_ns = w;
				break;
			}
			/* The slot has been half-written for the delay: queue the rest. */
			res = cb->cu.cuMemcpyHtoDAsync(
			    h->dst + h->rest_off, (const char *)h->c.src + h->rest_off,
			    cb->g.cfg.expert_bytes - h->rest_off, q->stream);
			if (res == MC_CU_SUCCESS)
				res = cb->cu.cuEventRecord(h->done, q->stream);
			h->rest_off = 0;
			moved = true;
			if (res == MC_CU_SUCCESS)
				continue;
		}
		h->c.status =
		    res == MC_CU_SUCCESS ? 0 : (mc_cuda_errno(res) ? mc_cuda_errno(res) : -EIO);
		if (h->c.status)
			agent_logf(NULL, LOG_ERR, agent_gpu_engine_pool(&cb->g),
				   "cuda: copy into slot %u failed: %s", h->c.slot,
				   mc_cuda_error_name(&cb->cu, res));
		if (agent_copy_engine_done(&cb->g.eng, &h->c)) /* room reserved by cuda_copy */
			agent_copy_engine_signal(&cb->g.eng);
		cuda_put_event(cb, h->done);
		cuda_queue_pop(q);
		moved = true;
	}
	return moved;
}

static void *cuda_completion_thread(void *arg)
{
	struct cuda_backend *cb = arg;
	uint64_t poll_ns = CUDA_POLL_MIN_NS;

	/* The thread's own current context: events belong to it. */
	cb->cu.cuCtxSetCurrent(cb->ctx);
	pthread_mutex_lock(&cb->g.eng.lock);
	for (;;) {
		uint64_t wait_ns = UINT64_MAX;
		uint32_t busy = 0, last = 0;
		bool moved = false;

		for (uint32_t i = 0; i < cb->n_queues; i++) {
			moved |= cuda_queue_progress(cb, &cb->queues[i], &wait_ns);
			if (cb->queues[i].len) {
				busy++;
				last = i;
			}
		}
		if (!busy) {
			if (cb->g.eng.stopping)
				break;
			poll_ns = CUDA_POLL_MIN_NS;
			pthread_cond_wait(&cb->g.eng.work, &cb->g.eng.lock);
			continue;
		}
		if (moved) {
			poll_ns = CUDA_POLL_MIN_NS;
			continue;
		}
		if (busy == 1 && wait_ns == UINT64_MAX) {
			/* One stream busy: sleep in the driver until its oldest copy ends. */
			cu_event ev = cuda_queue_head(&cb->queues[last])->done;

			pthread_mutex_unlock(&cb->g.eng.lock);
			cb->cu.cuEventSynchronize(ev);
			pthread_mutex_lock(&cb->g.eng.lock);
			continue;
		}
		pthread_mutex_unlock(&cb->g.eng.lock);
		cuda_sleep_ns(wait_ns < poll_ns ? wait_ns : poll_ns);
		pthread_mutex_lock(&cb->g.eng.lock);
		if (poll_ns < CUDA_POLL_MAX_NS)
			poll_ns *= 2;
	}
	pthread_mutex_unlock(&cb->g.eng.lock);
	return NULL;
}

/* ---- lifetime ---- */

static void cuda_release_bank(struct cuda_backend *cb)
{
	if (cb->mapped)
		cb->cu.cuMemUnmap(cb->base, cb->bank_bytes);
	if (cb->reserved)
		cb->cu.cuMemAddressFree(cb->base, cb->bank_bytes);
	if (cb->have_handle)
		cb->cu.cuMemRelease(cb->handle);
	if (cb->bank_fd >= 0)
		close(cb->bank_fd);
	if (cb->budget_bytes && cb->g.params.budget)
		mc_gpu_budget_release(cb->g.params.budget, (uint32_t)cb->ordinal, cb->budget_bytes);
	cb->mapped = cb->reserved = cb->have_handle = false;
	cb->bank_fd = -1;
	cb->budget_bytes = 0;
	cb->base = 0;
}

static void cuda_destroy(void *priv)
{
	struct cuda_backend *cb = priv;

	if (!cb)
		return;
	if (cb->thread_started) {
		pthread_mutex_lock(&cb->g.eng.lock);
		cb->g.eng.stopping = true;
		pthread_cond_broadcast(&cb->g.eng.work);
		pthread_mutex_unlock(&cb->g.eng.lock);
	}
	if (cb->bound) {
		cb->cu.cuCtxSetCurrent(cb->ctx);
		/* No DMA may still write into the bank or read the host pages. */
		for (uint32_t i = 0; i < cb->n_queues; i++)
			if (cb->queues[i].stream)
				cb->cu.cuStreamSynchronize(cb->queues[i].stream);
	}
	if (cb->thread_started) {
		/* The queues are drained by now: the thread sees them empty and ends. */
		pthread_mutex_lock(&cb->g.eng.lock);
		for (uint32_t i = 0; i < cb->n_queues; i++) {
			struct cuda_queue *q = &cb->queues[i];

			while (q->len) {
				cuda_put_event(cb, cuda_queue_head(q)->done);
				cuda_queue_pop(q);
			}
		}
		pthread_cond_broadcast(&cb->g.eng.work);
		pthread_mutex_unlock(&cb->g.eng.lock);
		pthread_join(cb->thread, NULL);
	}
	if (cb->bound) {
		for (uint32_t i = 0; i < cb->n_queues; i++) {
			if (cb->queues[i].stream)
				cb->cu.cuStreamDestroy(cb->queues[i].stream);
			free(cb->queues[i].items);
		}
		for (uint32_t i = 0; i < cb->n_spare; i++)
			cb->cu.cuEventDestroy(cb->spare_events[i]);
		for (uint32_t i = 0; i < cb->host.n; i++)
			if (cb->host.items[i].registered)
				cb->cu.cuMemHostUnregister((void *)cb->host.items[i].start);
		cuda_release_bank(cb);
		cb->cu.cuDevicePrimaryCtxRelease(cb->dev);
	}
	free(cb->queues);
	free(cb->spare_events);
	mc_gpu_ranges_free(&cb->host);
	if (cb->bank_fd >= 0)
		close(cb->bank_fd);
	agent_copy_engine_fini(&cb->g.eng);
	if (cb->cu.lib)
		mc_cuda_api_unload(&cb->cu);
	free(cb);
}

int agent_cuda_backend_create(const struct agent_backend_config *cfg,
			      const struct mc_gpu_params *params, void **priv, char *err,
			      size_t errlen)
{
	struct cuda_backend *cb;
	int ret, count = 0;
	uint32_t devs[MC_GPU_MAX_DEVICES], n_devs;
	cu_result res;

	if (!cfg || !priv || !cfg->n_slots || !cfg->expert_bytes)
		return -EINVAL;
	cb = calloc(1, sizeof(*cb));
	if (!cb)
		return -ENOMEM;
	cb->bank_fd = -1;
	cb->ordinal = -1;
	ret = agent_gpu_engine_init(&cb->g, cfg, params);
	if (ret)
		goto err_logged;

	ret = mc_cuda_api_load(&cb->cu, cb->g.params.library, cb->g.err, sizeof(cb->g.err));
	if (!ret)
		ret = mc_cuda_init(&cb->cu, cb->g.err, sizeof(cb->g.err));
	if (ret)
		goto err_logged;
	res = cb->cu.cuDeviceGetCount(&count);
	if (res != MC_CU_SUCCESS) {
		ret = cuda_fail(cb, res, "cuDeviceGetCount");
		goto err;
	}
	/* Check the device list now: a typo is reported at start, not at the first bank. */
	ret = mc_gpu_devices_parse(cb->g.params.devices, cb->g.pool, (uint32_t)count, devs, &n_devs,
				   cb->g.err, sizeof(cb->g.err));
	if (ret)
		goto err_logged;
	cb->n_queues = mc_gpu_queue_count(&cb->g.params, cfg->copy_threads);
	cb->queues = calloc(cb->n_queues, sizeof(*cb->queues));
	if (!cb->queues) {
		ret = -ENOMEM;
		goto err;
	}
	*priv = cb;
	return 0;
err_logged:
	cuda_log_err(cb);
err:
	if (err && errlen)
		snprintf(err, errlen, "%s", cb->g.err);
	cuda_destroy(cb);
	return ret;
}

static int cuda_create(const struct agent_backend_config *cfg, void **priv)
{
	return agent_cuda_backend_create(cfg, cfg->gpu, priv, NULL, 0);
}

/* Checks the device can hold an exportable VMM bank. */
static int cuda_check_device(struct cuda_backend *cb, cu_device dev, int ordinal)
{
	int vmm = 0, posix_fd = 0;

	cb->cu.cuDeviceGetAttribute(
	    &vmm, MC_CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
	cb->cu.cuDeviceGetAttribute(
	    &posix_fd, MC_CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev);
	if (!vmm || !posix_fd) {
		snprintf(cb->g.err, sizeof(cb->g.err),
			 "GPU %d cannot export memory as a file descriptor (virtual memory "
			 "management %s, POSIX fd handles %s)",
			 ordinal, vmm ? "yes" : "no", posix_fd ? "yes" : "no");
		cuda_log_err(cb);
		return -EOPNOTSUPP;
	}
	return 0;
}

static void cuda_bank_prop(const struct cuda_backend *cb, int ordinal,
			   struct cu_mem_allocation_prop *prop)
{
	memset(prop, 0, sizeof(*prop));
	prop->type = MC_CU_MEM_ALLOCATION_TYPE_PINNED;
	prop->requested_handle_types = MC_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	prop->location.type = MC_CU_MEM_LOCATION_TYPE_DEVICE;
	prop->location.id = ordinal;
}

static int cuda_granularity(struct cuda_backend *cb, int ordinal, size_t *out)
{
	struct cu_mem_allocation_prop prop;
	cu_result res;

	cuda_bank_prop(cb, ordinal, &prop);
	res = cb->cu.cuMemGetAllocationGranularity(out, &prop,
						   MC_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
	if (res != MC_CU_SUCCESS || !*out)
		res = cb->cu.cuMemGetAllocationGranularity(out, &prop,
							   MC_CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuMemGetAllocationGranularity");
	if (!*out || (*out & (*out - 1))) {
		snprintf(cb->g.err, sizeof(cb->g.err), "GPU %d: odd allocation granularity %zu",
			 ordinal, *out);
		cuda_log_err(cb);
		return -EPROTO;
	}
	return 0;
}

/* Binds the backend to a device: its context, copy streams and completion thread. */
static int cuda_bind(struct cuda_backend *cb, int ordinal)
{
	cu_uuid uuid;
	cu_result res;
	int ret;

	res = cb->cu.cuDeviceGet(&cb->dev, ordinal);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuDeviceGet");
	ret = cuda_check_device(cb, cb->dev, ordinal);
	if (ret)
		return ret;
	res = cb->cu.cuDevicePrimaryCtxRetain(&cb->ctx, cb->dev);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuDevicePrimaryCtxRetain");
	cb->bound = true;
	cb->ordinal = ordinal;
	ret = cuda_set_ctx(cb);
	if (ret)
		return ret;
	res = cb->cu.cuDeviceGetUuid(&uuid, cb->dev);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuDeviceGetUuid");
	memcpy(cb->uuid, uuid.bytes, sizeof(cb->uuid));
	ret = cuda_granularity(cb, ordinal, &cb->granularity);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < cb->n_queues; i++) {
		/* Non-blocking: the legacy default stream of clients never waits on us. */
		res = cb->cu.cuStreamCreate(&cb->queues[i].stream, MC_CU_STREAM_NON_BLOCKING);
		if (res != MC_CU_SUCCESS)
			return cuda_fail(cb, res, "cuStreamCreate");
	}
	ret = -pthread_create(&cb->thread, NULL, cuda_completion_thread, cb);
	if (ret)
		return ret;
	cb->thread_started = true;
	return 0;
}

/* The device for a new bank: the spec's candidates, by budget room, then memory. */
static int cuda_pick_device(struct cuda_backend *cb, int *ordinal)
{
	struct mc_gpu_candidate cand[MC_GPU_MAX_DEVICES];
	uint32_t devs[MC_GPU_MAX_DEVICES], n_devs = 0;
	uint64_t need = 0;
	int count = 0, ret;

	cb->cu.cuDeviceGetCount(&count);
	ret = mc_gpu_devices_parse(cb->g.params.devices, cb->g.pool, (uint32_t)count, devs, &n_devs,
				   cb->g.err, sizeof(cb->g.err));
	if (ret) {
		cuda_log_err(cb);
		return ret;
	}
	for (uint32_t i = 0; i < n_devs; i++) {
		size_t gran = 0, total = 0;
		uint64_t stride, bytes;
		cu_device dev;

		cand[i] = (struct mc_gpu_candidate){.device = devs[i]};
		if (cb->cu.cuDeviceGet(&dev, (int)devs[i]) != MC_CU_SUCCESS ||
		    cuda_granularity(cb, (int)devs[i], &gran) ||
		    mc_gpu_bank_geometry(cb->g.cfg.expert_bytes, cb->g.cfg.n_slots, gran, &stride,
					 &bytes))
			continue;
		/* Total memory, not free: free memory needs a context on every GPU. */
		cb->cu.cuDeviceTotalMem(&total, dev);
		cand[i].free_bytes = total;
		cand[i].room = cb->g.params.budget
				   ? mc_gpu_budget_room(cb->g.params.budget, devs[i])
			       : cb->g.params.device_budget ? cb->g.params.device_budget
							    : UINT64_MAX;
		if (bytes > need)
			need = bytes;
	}
	ret = mc_gpu_pick(cand, n_devs, need);
	if (ret < 0) {
		snprintf(cb->g.err, sizeof(cb->g.err),
			 "no GPU has room for a bank of %" PRIu64 " MiB (%u slots; budget %" PRIu64
			 " MiB per device): lower the pool's slots or raise the budget",
			 need >> 20, cb->g.cfg.n_slots,
			 (cb->g.params.budget ? cb->g.params.budget->limit
					      : cb->g.params.device_budget) >>
			     20);
		cuda_log_err(cb);
		return -ENOSPC;
	}
	*ordinal = (int)cand[ret].device;
	return 0;
}

/* Reserves a VA range for the bank, maps the allocation and opens it to the device. */
static int cuda_map_bank(struct cuda_backend *cb)
{
	struct cu_mem_access_desc access = {
	    .location = {.type = MC_CU_MEM_LOCATION_TYPE_DEVICE, .id = cb->ordinal},
	    .flags = MC_CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	};
	cu_result res;

	res = cb->cu.cuMemAddressReserve(&cb->base, cb->bank_bytes, cb->granularity, 0, 0);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuMemAddressReserve");
	cb->reserved = true;
	res = cb->cu.cuMemMap(cb->base, cb->bank_bytes, 0, cb->handle, 0);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuMemMap");
	cb->mapped = true;
	res = cb->cu.cuMemSetAccess(cb->base, cb->bank_bytes, &access, 1);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuMemSetAccess");
	return 0;
}

static void cuda_fill_desc(const struct cuda_backend *cb, struct moecache_bank *desc)
{
	memset(desc, 0, sizeof(*desc));
	desc->fd = cb->bank_fd;
	desc->backend = MOECACHE_BACKEND_CUDA;
	desc->bank_bytes = cb->bank_bytes;
	desc->slot_stride = cb->slot_stride;
	desc->device = (uint32_t)cb->ordinal;
	memcpy(desc->device_uuid, cb->uuid, sizeof(desc->device_uuid));
}

static int cuda_host_range(struct cuda_backend *cb, const void *src, size_t len);

/* Pins the host region given by the agent now rather than on the first copy. */
static void cuda_register_host_region(struct cuda_backend *cb)
{
	if (cb->g.params.host_base && cb->g.params.host_size)
		cuda_host_range(cb, cb->g.params.host_base, cb->g.params.host_size);
}

static int cuda_bank_create(void *priv, struct moecache_bank *desc)
{
	struct cuda_backend *cb = priv;
	struct cu_mem_allocation_prop prop;
	int ordinal, ret, fd = -1;
	cu_result res;

	if (cb->have_handle)
		return -EALREADY;
	if (!cb->bound) {
		ret = cuda_pick_device(cb, &ordinal);
		if (!ret)
			ret = cuda_bind(cb, ordinal);
		if (ret)
			return ret;
	}
	ret = cuda_set_ctx(cb);
	if (ret)
		return ret;
	ret = mc_gpu_bank_geometry(cb->g.cfg.expert_bytes, cb->g.cfg.n_slots, cb->granularity,
				   &cb->slot_stride, &cb->bank_bytes);
	if (ret)
		return ret;
	if (cb->g.params.budget) {
		ret = mc_gpu_budget_reserve(cb->g.params.budget, (uint32_t)cb->ordinal,
					    cb->bank_bytes);
		if (ret) {
			snprintf(cb->g.err, sizeof(cb->g.err),
				 "a bank of %" PRIu64
				 " MiB exceeds what is left of GPU %d's budget",
				 cb->bank_bytes >> 20, cb->ordinal);
			cuda_log_err(cb);
			return ret;
		}
		cb->budget_bytes = cb->bank_bytes;
	} else if (cb->g.params.device_budget && cb->bank_bytes > cb->g.params.device_budget) {
		snprintf(cb->g.err, sizeof(cb->g.err),
			 "a bank of %" PRIu64 " MiB exceeds the budget of %" PRIu64 " MiB",
			 cb->bank_bytes >> 20, cb->g.params.device_budget >> 20);
		cuda_log_err(cb);
		return -ENOSPC;
	}
	cuda_bank_prop(cb, cb->ordinal, &prop);
	res = cb->cu.cuMemCreate(&cb->handle, cb->bank_bytes, &prop, 0);
	if (res != MC_CU_SUCCESS) {
		ret = cuda_fail(cb, res, "cuMemCreate (the bank)");
		goto err;
	}
	cb->have_handle = true;
	ret = cuda_map_bank(cb);
	if (ret)
		goto err;
	res = cb->cu.cuMemExportToShareableHandle(&fd, cb->handle,
						  MC_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	if (res != MC_CU_SUCCESS) {
		ret = cuda_fail(cb, res, "cuMemExportToShareableHandle");
		goto err;
	}
	cb->bank_fd = fd;
	cuda_fill_desc(cb, desc);
	cuda_register_host_region(cb);
	return 0;
err:
	cuda_release_bank(cb);
	return ret;
}

static int cuda_bank_adopt(void *priv, const struct moecache_bank *desc)
{
	struct cuda_backend *cb = priv;
	char uuid_text[41];
	cu_device dev;
	int ordinal, ret;
	cu_result res;

	if (cb->have_handle)
		return -EALREADY;
	if (desc->backend != MOECACHE_BACKEND_CUDA || desc->fd < 0 || !desc->slot_stride ||
	    desc->slot_stride < cb->g.cfg.expert_bytes ||
	    cb->g.cfg.n_slots > desc->bank_bytes / desc->slot_stride)
		return -EPROTO;
	/* Ordinals may change across a restart (CUDA_VISIBLE_DEVICES): the uuid does not. */
	if (mc_cuda_device_by_uuid(&cb->cu, desc->device_uuid, &dev)) {
		mc_cuda_uuid_format(desc->device_uuid, uuid_text);
		snprintf(cb->g.err, sizeof(cb->g.err),
			 "the bank lives on %s, which is not visible here", uuid_text);
		cuda_log_err(cb);
		return -EPROTO;
	}
	ordinal = (int)dev; /* CUdevice is the ordinal */
	if (cb->bound && cb->ordinal != ordinal)
		return -EPROTO;
	if (!cb->bound) {
		ret = cuda_bind(cb, ordinal);
		if (ret)
			return ret;
	}
	ret = cuda_set_ctx(cb);
	if (ret)
		return ret;
	if (desc->slot_stride % cb->granularity || desc->bank_bytes % cb->granularity)
		return -EPROTO;
	res = cb->cu.cuMemImportFromShareableHandle(&cb->handle, (void *)(intptr_t)desc->fd,
						    MC_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuMemImportFromShareableHandle (adopting the bank)");
	cb->have_handle = true;
	cb->bank_bytes = desc->bank_bytes;
	cb->slot_stride = desc->slot_stride;
	ret = cuda_map_bank(cb);
	if (ret) {
		cuda_release_bank(cb);
		return ret;
	}
	if (cb->g.params.budget) {
		/* Count it, even over budget: the bank exists and holds the residency. */
		if (mc_gpu_budget_reserve(cb->g.params.budget, (uint32_t)ordinal, cb->bank_bytes))
			agent_logf(NULL, LOG_WARNING, agent_gpu_engine_pool(&cb->g),
				   "cuda: the adopted bank exceeds GPU %d's budget", ordinal);
		else
			cb->budget_bytes = cb->bank_bytes;
	}
	cb->bank_fd = desc->fd; /* ours now */
	cuda_register_host_region(cb);
	return 0;
}

static void *cuda_slot(void *priv, uint32_t slot)
{
	return NULL; /* device memory: not addressable from the host */
}

uint64_t agent_cuda_backend_slot_addr(void *priv, uint32_t slot)
{
	struct cuda_backend *cb = priv;

	if (!cb || !cb->mapped || slot >= cb->g.cfg.n_slots)
		return 0;
	return cb->base + (uint64_t)slot * cb->slot_stride;
}

int agent_cuda_backend_device(const void *priv)
{
	const struct cuda_backend *cb = priv;

	return cb && cb->bound ? cb->ordinal : -1;
}

const char *agent_cuda_backend_error(const void *priv)
{
	const struct cuda_backend *cb = priv;

	return cb ? cb->g.err : "";
}

/*
 * Registers the host mapping that holds [src, src + len) once. A mapping
 * that cannot be registered is remembered too: copies from it still work
 * (the driver stages them), only slower, and the log says so once.
 */
static int cuda_host_range(struct cuda_backend *cb, const void *src, size_t len)
{
	uintptr_t start;
	size_t size;
	cu_result res;
	int ret;

	if (mc_gpu_ranges_find(&cb->host, src, len))
		return 0;
	if (cb->g.params.host_base && (uintptr_t)src >= (uintptr_t)cb->g.params.host_base &&
	    (uintptr_t)src - (uintptr_t)cb->g.params.host_base + len <= cb->g.params.host_size) {
		start = (uintptr_t)cb->g.params.host_base;
		size = cb->g.params.host_size;
	} else {
		ret = mc_gpu_find_mapping(src, len, &start, &size);
		if (ret) {
			start = (uintptr_t)src;
			size = len;
		}
	}
	/* Read-only: the agent maps the host pages read-only, and only reads them. */
	res = cb->cu.cuMemHostRegister(
	    (void *)start, size, MC_CU_MEMHOSTREGISTER_PORTABLE | MC_CU_MEMHOSTREGISTER_READ_ONLY);
	if (res == MC_CU_ERROR_NOT_SUPPORTED || res == MC_CU_ERROR_INVALID_VALUE)
		res = cb->cu.cuMemHostRegister((void *)start, size, MC_CU_MEMHOSTREGISTER_PORTABLE);
	if (res != MC_CU_SUCCESS && res != MC_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
		agent_logf(NULL, LOG_WARNING, agent_gpu_engine_pool(&cb->g),
			   "cuda: cannot register the host pages at %#" PRIxPTR " (%zu bytes): %s; "
			   "copies will be staged and slower",
			   start, size, mc_cuda_error_name(&cb->cu, res));
	return mc_gpu_ranges_add(&cb->host, start, size, 0, res == MC_CU_SUCCESS);
}

/* The stream for a copy: the least loaded, prefetches off stream 0. */
static struct cuda_queue *cuda_pick_queue(struct cuda_backend *cb, uint32_t flags)
{
	uint32_t first = (flags & MOECACHE_FILL_PREFETCH) && cb->n_queues > 1 ? 1 : 0;
	struct cuda_queue *best = &cb->queues[first];

	for (uint32_t i = first + 1; i < cb->n_queues; i++)
		if (cb->queues[i].len < best->len)
			best = &cb->queues[i];
	return best;
}

static int cuda_copy(void *priv, const struct agent_copy *c)
{
	struct cuda_backend *cb = priv;
	struct cuda_copy cc = {.c = *c};
	struct cuda_queue *q;
	uint64_t first_bytes;
	cu_result res;
	int ret;

	if (!cb->mapped || !c || c->slot >= cb->g.cfg.n_slots || !c->src)
		return -EINVAL;
	cc.c.status = 0;
	cc.dst = cb->base + (uint64_t)c->slot * cb->slot_stride;
	pthread_mutex_lock(&cb->g.eng.lock);
	ret = cuda_set_ctx(cb);
	if (!ret)
		ret = cuda_host_range(cb, c->src, cb->g.cfg.expert_bytes);
	if (!ret)
		ret = agent_copy_queue_reserve(&cb->g.eng.done, cb->g.eng.inflight + 1);
	if (!ret)
		ret = cuda_get_event(cb, &cc.done);
	if (ret)
		goto out;
	first_bytes = cb->g.cfg.expert_bytes;
	if (cb->g.eng.copy_delay_us && cb->g.cfg.expert_bytes > 1) {
		/* Half now, half after the delay: tests see a slot half-written. */
		first_bytes = cb->g.cfg.expert_bytes / 2;
		cc.rest_off = first_bytes;
		cc.rest_at_ns = mc_gpu_now_ns() + (uint64_t)cb->g.eng.copy_delay_us * 1000u;
	}
	q = cuda_pick_queue(cb, c->flags);
	res = cb->cu.cuMemcpyHtoDAsync(cc.dst, c->src, first_bytes, q->stream);
	if (res == MC_CU_SUCCESS)
		res = cb->cu.cuEventRecord(cc.done, q->stream);
	if (res != MC_CU_SUCCESS) {
		cuda_put_event(cb, cc.done);
		ret = cuda_fail(cb, res, "cuMemcpyHtoDAsync");
		goto out;
	}
	ret = cuda_queue_push(q, &cc);
	if (ret) {
		/* Queued on the GPU but not tracked: wait so the slot is not reused under it. */
		cb->cu.cuStreamSynchronize(q->stream);
		cuda_put_event(cb, cc.done);
		goto out;
	}
	cb->g.eng.inflight++;
	pthread_cond_signal(&cb->g.eng.work);
out:
	pthread_mutex_unlock(&cb->g.eng.lock);
	return ret;
}

const struct agent_backend_ops agent_cuda_backend = {
    .name = "cuda",
    .id = MOECACHE_BACKEND_CUDA,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .bank_create = cuda_bank_create,
    .bank_adopt = cuda_bank_adopt,
    .slot = cuda_slot,
    .copy = cuda_copy,
    .completion_fd = agent_copy_engine_completion_fd,
    .completions = agent_copy_engine_completions,
    .inflight = agent_copy_engine_inflight,
    .set_delay = agent_copy_engine_set_delay,
};
