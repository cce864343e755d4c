// SPDX-License-Identifier: MIT
/*
 * The CUDA device ops of the GPU copy engine (gpu.h). The bank is one
 * cuMemCreate allocation with a POSIX file descriptor handle, mapped into
 * this process with cuMemAddressReserve + cuMemMap + cuMemSetAccess; the
 * exported fd is what the driver keeps and hands to clients (and back to
 * the next agent, which imports and maps it again: warm restart).
 *
 * Copies are cuMemcpyHtoDAsync from the host pages (registered once with
 * cuMemHostRegister, so the DMA engines read them directly) on several
 * copy streams; an event recorded after each copy marks its end, and the
 * engine's completion thread sleeps in cuEventSynchronize when one stream
 * is busy, or polls the events.
 *
 * Peer copies: where cuDeviceCanAccessPeer says this bank's device can
 * reach the other bank's, the other bank's fd is imported and mapped here
 * with access for this device, and copies are cuMemcpyDtoDAsync between
 * the two mappings; where it says no, there is no peer path and the agent
 * copies from the host pages.
 *
 * Every CUDA call is made with the device's primary context current: the
 * agent may serve pools on several GPUs from one thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/log.h"
#include "gpu.h"
#include "lib/gpu/cuda_api.h"

/* A mapping of a bank: ours, or a peer's imported for peer copies. */
struct cuda_mapping {
	cu_mem_handle handle;
	bool have_handle, reserved, mapped;
	cu_deviceptr base;
	uint64_t bytes;
};

struct cuda_backend {
	struct agent_gpu_engine g; /* first */
	struct mc_cuda_api cu;

	/* The device, once bound. */
	bool ctx_retained;
	cu_device dev;
	cu_context ctx;
	uint8_t uuid[16];
	size_t granularity;

	struct cuda_mapping bank;
	struct cuda_mapping peers[MC_GPU_MAX_DEVICES]; /* as the engine's g.peers */

	cu_stream *streams; /* g.n_queues */
	cu_event *spare_events;
	uint32_t n_spare, cap_spare;
};

static struct cuda_backend *cuda_of(struct agent_gpu_engine *g)
{
	return (struct cuda_backend *)g;
}

/* Records a failed call in g->err, logs it, returns its -errno. */
static int cuda_fail(struct cuda_backend *cb, cu_result res, const char *what)
{
	int ret = mc_cuda_fail(&cb->cu, res, what, cb->g.err, sizeof(cb->g.err));

	agent_gpu_log_err(&cb->g);
	return ret;
}

static int cuda_set_ctx(struct cuda_backend *cb)
{
	cu_result res = cb->cu.cuCtxSetCurrent(cb->ctx);

	return res == MC_CU_SUCCESS ? 0 : cuda_fail(cb, res, "cuCtxSetCurrent");
}

/* ---- the driver ---- */

static int cuda_open(struct agent_gpu_engine *g, uint32_t *n_devices)
{
	struct cuda_backend *cb = cuda_of(g);
	int ret, count = 0;
	cu_result res;

	ret = mc_cuda_api_load(&cb->cu, g->params.library, g->err, sizeof(g->err));
	if (!ret)
		ret = mc_cuda_init(&cb->cu, g->err, sizeof(g->err));
	if (ret)
		return ret;
	res = cb->cu.cuDeviceGetCount(&count);
	if (res != MC_CU_SUCCESS)
		return mc_cuda_fail(&cb->cu, res, "cuDeviceGetCount", g->err, sizeof(g->err));
	*n_devices = (uint32_t)count;
	return 0;
}

static void cuda_close(struct agent_gpu_engine *g)
{
	struct cuda_backend *cb = cuda_of(g);

	if (cb->ctx_retained)
		cb->cu.cuDevicePrimaryCtxRelease(cb->dev);
	free(cb->streams);
	free(cb->spare_events);
	if (cb->cu.lib)
		mc_cuda_api_unload(&cb->cu);
}

static void cuda_bank_prop(int ordinal, struct cu_mem_allocation_prop *prop)
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

	cuda_bank_prop(ordinal, &prop);
	res = cb->cu.cuMemGetAllocationGranularity(out, &prop,
						   MC_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
	if (res != MC_CU_SUCCESS || !*out)
		res = cb->cu.cuMemGetAllocationGranularity(out, &prop,
							   MC_CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuMemGetAllocationGranularity");
	if (!*out || (*out & (*out - 1))) {
		agent_gpu_errf(&cb->g, "GPU %d: odd allocation granularity %zu", ordinal, *out);
		return -EPROTO;
	}
	return 0;
}

static int cuda_device_info(struct agent_gpu_engine *g, uint32_t device, uint64_t *mem_bytes,
			    uint64_t *slot_align, uint64_t *bank_align)
{
	struct cuda_backend *cb = cuda_of(g);
	size_t gran = 0, total = 0;
	cu_device dev;
	int ret;

	if (cb->cu.cuDeviceGet(&dev, (int)device) != MC_CU_SUCCESS)
		return -ENODEV;
	ret = cuda_granularity(cb, (int)device, &gran);
	if (ret)
		return ret;
	/* Total memory, not free: free memory needs a context on every GPU. */
	cb->cu.cuDeviceTotalMem(&total, dev);
	*mem_bytes = total;
	*slot_align = *bank_align = gran;
	return 0;
}

static int cuda_device_of(struct agent_gpu_engine *g, const struct moecache_bank *desc,
			  uint32_t *device)
{
	struct cuda_backend *cb = cuda_of(g);
	char uuid_text[41];
	cu_device dev;

	if (mc_cuda_device_by_uuid(&cb->cu, desc->device_uuid, &dev)) {
		mc_cuda_uuid_format(desc->device_uuid, uuid_text);
		agent_gpu_errf(g, "the bank lives on %s, which is not visible here", uuid_text);
		return -EPROTO;
	}
	*device = (uint32_t)dev; /* CUdevice is the ordinal */
	return 0;
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
		agent_gpu_errf(&cb->g,
			       "GPU %d cannot export memory as a file descriptor (virtual memory "
			       "management %s, POSIX fd handles %s)",
			       ordinal, vmm ? "yes" : "no", posix_fd ? "yes" : "no");
		return -EOPNOTSUPP;
	}
	return 0;
}

/* The device's context and copy streams. */
static int cuda_bind(struct agent_gpu_engine *g, uint32_t device)
{
	struct cuda_backend *cb = cuda_of(g);
	int ret, ordinal = (int)device;
	cu_uuid uuid;
	cu_result res;

	res = cb->cu.cuDeviceGet(&cb->dev, ordinal);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuDeviceGet");
	ret = cuda_check_device(cb, cb->dev, ordinal);
	if (ret)
		return ret;
	res = cb->cu.cuDevicePrimaryCtxRetain(&cb->ctx, cb->dev);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuDevicePrimaryCtxRetain");
	cb->ctx_retained = true;
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
	cb->streams = calloc(g->n_queues, sizeof(*cb->streams));
	if (!cb->streams)
		return -ENOMEM;
	for (uint32_t i = 0; i < g->n_queues; i++) {
		/* Non-blocking: the legacy default stream of clients never waits on us. */
		res = cb->cu.cuStreamCreate(&cb->streams[i], MC_CU_STREAM_NON_BLOCKING);
		if (res != MC_CU_SUCCESS)
			return cuda_fail(cb, res, "cuStreamCreate");
	}
	return 0;
}

/* Calls fn on each stream there is. */
static void cuda_streams(struct cuda_backend *cb, cu_result (*fn)(cu_stream))
{
	cb->cu.cuCtxSetCurrent(cb->ctx);
	for (uint32_t i = 0; cb->streams && i < cb->g.n_queues; i++)
		if (cb->streams[i])
			fn(cb->streams[i]);
}

static void cuda_drain(struct agent_gpu_engine *g)
{
	cuda_streams(cuda_of(g), cuda_of(g)->cu.cuStreamSynchronize);
}

static void cuda_unmap(struct cuda_backend *cb, struct cuda_mapping *m)
{
	if (m->mapped)
		cb->cu.cuMemUnmap(m->base, m->bytes);
	if (m->reserved)
		cb->cu.cuMemAddressFree(m->base, m->bytes);
	if (m->have_handle)
		cb->cu.cuMemRelease(m->handle);
	*m = (struct cuda_mapping){0};
}

static void cuda_unbind(struct agent_gpu_engine *g)
{
	struct cuda_backend *cb = cuda_of(g);

	cuda_streams(cb, cb->cu.cuStreamDestroy);
	for (uint32_t i = 0; i < cb->n_spare; i++)
		cb->cu.cuEventDestroy(cb->spare_events[i]);
	cb->n_spare = 0;
	for (uint32_t i = 0; i < g->n_peers; i++)
		cuda_unmap(cb, &cb->peers[i]);
}

/* ---- the bank ---- */

/* Reserves a VA range for handle, maps it and opens it to this device. */
static int cuda_map(struct cuda_backend *cb, struct cuda_mapping *m)
{
	struct cu_mem_access_desc access = {
	    .location = {.type = MC_CU_MEM_LOCATION_TYPE_DEVICE, .id = cb->g.device},
	    .flags = MC_CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	};
	cu_result res;

	res = cb->cu.cuMemAddressReserve(&m->base, m->bytes, cb->granularity, 0, 0);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuMemAddressReserve");
	m->reserved = true;
	res = cb->cu.cuMemMap(m->base, m->bytes, 0, m->handle, 0);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuMemMap");
	m->mapped = true;
	res = cb->cu.cuMemSetAccess(m->base, m->bytes, &access, 1);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuMemSetAccess");
	return 0;
}

/* Imports an exported bank of bytes and maps it for this device. */
static int cuda_import(struct cuda_backend *cb, int fd, uint64_t bytes, struct cuda_mapping *m)
{
	cu_result res;
	int ret = cuda_set_ctx(cb);

	if (ret)
		return ret;
	res = cb->cu.cuMemImportFromShareableHandle(&m->handle, (void *)(intptr_t)fd,
						    MC_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuMemImportFromShareableHandle");
	m->have_handle = true;
	m->bytes = bytes;
	return cuda_map(cb, m);
}

static int cuda_bank_create(struct agent_gpu_engine *g, uint64_t bytes, int *fd, uint64_t *va)
{
	struct cuda_backend *cb = cuda_of(g);
	struct cu_mem_allocation_prop prop;
	cu_result res;
	int ret = cuda_set_ctx(cb);

	if (ret)
		return ret;
	cuda_bank_prop(g->device, &prop);
	res = cb->cu.cuMemCreate(&cb->bank.handle, bytes, &prop, 0);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuMemCreate (the bank)");
	cb->bank.have_handle = true;
	cb->bank.bytes = bytes;
	ret = cuda_map(cb, &cb->bank);
	if (ret)
		return ret;
	res = cb->cu.cuMemExportToShareableHandle(fd, cb->bank.handle,
						  MC_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	if (res != MC_CU_SUCCESS)
		return cuda_fail(cb, res, "cuMemExportToShareableHandle");
	*va = cb->bank.base;
	return 0;
}

static int cuda_bank_import(struct agent_gpu_engine *g, const struct moecache_bank *desc,
			    uint64_t *va)
{
	struct cuda_backend *cb = cuda_of(g);
	int ret;

	if (desc->slot_stride % cb->granularity || desc->bank_bytes % cb->granularity)
		return -EPROTO;
	ret = cuda_import(cb, desc->fd, desc->bank_bytes, &cb->bank);
	if (!ret)
		*va = cb->bank.base;
	return ret;
}

static void cuda_bank_release(struct agent_gpu_engine *g)
{
	cuda_unmap(cuda_of(g), &cuda_of(g)->bank);
}

static void cuda_bank_uuid(const struct agent_gpu_engine *g, uint8_t uuid[16])
{
	memcpy(uuid, ((const struct cuda_backend *)g)->uuid, 16);
}

/*
 * Registers host pages once. Pages that cannot be registered still work
 * as a source (the driver stages them), only slower, and the log says so.
 */
static int cuda_host_register(struct agent_gpu_engine *g, uintptr_t start, size_t size,
			      bool writable, uint64_t *device_addr)
{
	struct cuda_backend *cb = cuda_of(g);
	unsigned int flags = MC_CU_MEMHOSTREGISTER_PORTABLE;
	cu_result res;

	if (cuda_set_ctx(cb))
		return 1;
	/* Read-only where it can: the agent maps the host pages read-only, and only reads them. */
	res = cb->cu.cuMemHostRegister((void *)start, size,
				       writable ? flags : flags | MC_CU_MEMHOSTREGISTER_READ_ONLY);
	if (res == MC_CU_ERROR_NOT_SUPPORTED || res == MC_CU_ERROR_INVALID_VALUE)
		res = cb->cu.cuMemHostRegister((void *)start, size, flags);
	*device_addr = start; /* unified addressing */
	if (res == MC_CU_SUCCESS)
		return 0;
	if (res != MC_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
		agent_logf(NULL, LOG_WARNING, agent_gpu_engine_pool(g),
			   "cuda: cannot register the host pages at %#lx (%zu bytes): %s; "
			   "copies will be staged and slower",
			   (unsigned long)start, size, mc_cuda_error_name(&cb->cu, res));
	return 1;
}

static void cuda_host_unregister(struct agent_gpu_engine *g, uintptr_t start)
{
	cuda_of(g)->cu.cuMemHostUnregister((void *)start);
}

/* ---- copies ---- */

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

static cu_event cuda_event(const struct agent_gpu_copy *gc)
{
	return (cu_event)(uintptr_t)gc->fence;
}

/* Queues bytes at offset off of gc on stream s, then its event. */
static cu_result cuda_queue_part(struct cuda_backend *cb, cu_stream s,
				 const struct agent_gpu_copy *gc, uint64_t off, uint64_t bytes)
{
	cu_result res =
	    gc->peer ? cb->cu.cuMemcpyDtoDAsync(gc->dst + off, gc->src + off, bytes, s)
		     : cb->cu.cuMemcpyHtoDAsync(gc->dst + off,
						(const void *)(uintptr_t)(gc->src + off), bytes, s);

	return res == MC_CU_SUCCESS ? cb->cu.cuEventRecord(cuda_event(gc), s) : res;
}

static int cuda_enqueue(struct agent_gpu_engine *g, uint32_t q, struct agent_gpu_copy *gc)
{
	struct cuda_backend *cb = cuda_of(g);
	cu_event ev;
	cu_result res;
	int ret = cuda_set_ctx(cb);

	if (!ret)
		ret = cuda_get_event(cb, &ev);
	if (ret)
		return ret;
	gc->fence = (uint64_t)(uintptr_t)ev;
	res = cuda_queue_part(cb, cb->streams[q], gc, 0, gc->first);
	if (res != MC_CU_SUCCESS) {
		cuda_put_event(cb, ev);
		return cuda_fail(cb, res, gc->peer ? "cuMemcpyDtoDAsync" : "cuMemcpyHtoDAsync");
	}
	return 0;
}

static int cuda_errno(cu_result res)
{
	return mc_cuda_errno(res) ? mc_cuda_errno(res) : -EIO;
}

static int cuda_query(struct agent_gpu_engine *g, uint32_t q, const struct agent_gpu_copy *gc)
{
	cu_result res = cuda_of(g)->cu.cuEventQuery(cuda_event(gc));

	if (res == MC_CU_ERROR_NOT_READY)
		return -EINPROGRESS;
	return res == MC_CU_SUCCESS ? 0 : cuda_errno(res);
}

static int cuda_open_gate(struct agent_gpu_engine *g, uint32_t q, struct agent_gpu_copy *gc)
{
	struct cuda_backend *cb = cuda_of(g);
	cu_result res = cb->cu.cuCtxSetCurrent(cb->ctx); /* the completion thread's */

	if (res == MC_CU_SUCCESS)
		res = cuda_queue_part(cb, cb->streams[q], gc, gc->first, gc->bytes - gc->first);
	return res == MC_CU_SUCCESS ? 0 : cuda_errno(res);
}

static void cuda_retire(struct agent_gpu_engine *g, uint32_t q, const struct agent_gpu_copy *gc)
{
	cuda_put_event(cuda_of(g), cuda_event(gc));
}

static bool cuda_wait(struct agent_gpu_engine *g, const struct agent_gpu_copy *head)
{
	struct cuda_backend *cb = cuda_of(g);

	/* One stream busy: sleep in the driver until its oldest copy ends. */
	if (!head)
		return false;
	cb->cu.cuCtxSetCurrent(cb->ctx); /* the thread's own current context */
	cb->cu.cuEventSynchronize(cuda_event(head));
	return true;
}

static void cuda_sync(struct agent_gpu_engine *g, uint32_t q, struct agent_gpu_copy *gc)
{
	cuda_of(g)->cu.cuStreamSynchronize(cuda_of(g)->streams[q]);
}

/* ---- peers ---- */

static bool cuda_can_peer(const struct agent_gpu_engine *dst, const struct agent_gpu_engine *src)
{
	const struct cuda_backend *cb = (const struct cuda_backend *)dst;
	int can = 0;

	/* Can dst's device read memory that lives on src's? */
	return cb->cu.cuDeviceCanAccessPeer(&can, (cu_device)dst->device, (cu_device)src->device) ==
		   MC_CU_SUCCESS &&
	       can;
}

static int cuda_peer_map(struct agent_gpu_engine *dst, struct agent_gpu_engine *src, uint32_t index,
			 uint64_t *va)
{
	struct cuda_backend *cb = cuda_of(dst);
	int ret = cuda_import(cb, src->bank_fd, src->bank_bytes, &cb->peers[index]);

	if (ret) {
		cuda_unmap(cb, &cb->peers[index]);
		return ret;
	}
	*va = cb->peers[index].base;
	return 0;
}

AGENT_GPU_BACKEND(cuda, MOECACHE_BACKEND_CUDA, struct cuda_backend);
