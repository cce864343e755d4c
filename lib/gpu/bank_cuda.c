// SPDX-License-Identifier: MIT
/*
 * CUDA bank import: the fd from BANK_GET is the agent's exported
 * cuMemCreate allocation. It is imported (cuMemImportFromShareableHandle),
 * mapped at a VA reserved in this process (cuMemAddressReserve, cuMemMap)
 * and opened to the bank's GPU (cuMemSetAccess: read-only for clients,
 * read-write for an agent's import). The driver library is loaded at run
 * time, so CPU-only users of libmoecache never need it.
 *
 * The import is made in the caller's current context when it is on the
 * bank's GPU (the usual case: a framework that already uses that GPU),
 * else in that GPU's primary context, which is made current only for the
 * duration of each call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_api.h"
#include "bank.h"
#include "../mc_internal.h"

struct mc_cuda_bank {
	struct mc_gpu_bank g; /* first: moecache_bank_map.base points here */
	struct mc_cuda_api cu;
	cu_device dev;
	cu_context ctx;
	bool primary; /* ctx is the retained primary context */
	cu_mem_handle handle;
	bool have_handle, reserved, mapped;
	cu_deviceptr base;
	uint64_t bytes;
	cu_event *spare;
	uint32_t n_spare, cap_spare;
};

/* Makes cb's context current; *prev gets what was, for mc_cuda_leave. */
static int mc_cuda_enter(struct mc_cuda_bank *cb, cu_context *prev)
{
	cu_result res;

	if (cb->cu.cuCtxGetCurrent(prev) != MC_CU_SUCCESS)
		*prev = NULL;
	if (*prev == cb->ctx)
		return 0;
	res = cb->cu.cuCtxSetCurrent(cb->ctx);
	return res == MC_CU_SUCCESS
		   ? 0
		   : mc_cuda_fail(&cb->cu, res, "cuCtxSetCurrent", cb->g.err, sizeof(cb->g.err));
}

static void mc_cuda_leave(struct mc_cuda_bank *cb, cu_context prev)
{
	if (prev != cb->ctx)
		cb->cu.cuCtxSetCurrent(prev);
}

static int mc_cuda_check_stream(struct mc_gpu_bank *g, void *stream)
{
	struct mc_cuda_bank *cb = (struct mc_cuda_bank *)g;
	cu_capture_status st = MC_CU_STREAM_CAPTURE_STATUS_NONE;
	cu_context prev;
	cu_result res;
	int ret;

	ret = mc_cuda_enter(cb, &prev);
	if (ret)
		return ret;
	res = cb->cu.cuStreamIsCapturing((cu_stream)stream, &st);
	mc_cuda_leave(cb, prev);
	/* Capturing the legacy stream: the query itself is refused as unsupported. */
	if (res == MC_CU_ERROR_STREAM_CAPTURE_UNSUPPORTED)
		st = MC_CU_STREAM_CAPTURE_STATUS_ACTIVE;
	else if (res != MC_CU_SUCCESS)
		return mc_cuda_fail(&cb->cu, res, "cuStreamIsCapturing", g->err, sizeof(g->err));
	if (st != MC_CU_STREAM_CAPTURE_STATUS_NONE) {
		snprintf(g->err, sizeof(g->err),
			 "the stream is capturing a CUDA graph: pins taken or released now would "
			 "be replayed with stale slots; acquire and release outside the capture");
		return -EBUSY;
	}
	return 0;
}

static int mc_cuda_marker(struct mc_gpu_bank *g, void *stream, void **event)
{
	struct mc_cuda_bank *cb = (struct mc_cuda_bank *)g;
	cu_context prev;
	cu_event ev;
	cu_result res;
	int ret;

	ret = mc_cuda_enter(cb, &prev);
	if (ret)
		return ret;
	if (cb->n_spare) {
		ev = cb->spare[--cb->n_spare];
		res = MC_CU_SUCCESS;
	} else {
		res = cb->cu.cuEventCreate(&ev, MC_CU_EVENT_DISABLE_TIMING);
	}
	if (res == MC_CU_SUCCESS) {
		res = cb->cu.cuEventRecord(ev, (cu_stream)stream);
		if (res != MC_CU_SUCCESS)
			cb->cu.cuEventDestroy(ev);
	}
	mc_cuda_leave(cb, prev);
	if (res != MC_CU_SUCCESS)
		return mc_cuda_fail(&cb->cu, res, "cuEventRecord", g->err, sizeof(g->err));
	*event = ev;
	return 0;
}

static int mc_cuda_query(struct mc_gpu_bank *g, void *event)
{
	struct mc_cuda_bank *cb = (struct mc_cuda_bank *)g;
	cu_result res = cb->cu.cuEventQuery((cu_event)event);

	if (res == MC_CU_SUCCESS)
		return 1;
	if (res == MC_CU_ERROR_NOT_READY)
		return 0;
	return mc_cuda_fail(&cb->cu, res, "cuEventQuery", g->err, sizeof(g->err));
}

static int mc_cuda_wait(struct mc_gpu_bank *g, void *event)
{
	struct mc_cuda_bank *cb = (struct mc_cuda_bank *)g;
	cu_result res = cb->cu.cuEventSynchronize((cu_event)event);

	return res == MC_CU_SUCCESS
		   ? 0
		   : mc_cuda_fail(&cb->cu, res, "cuEventSynchronize", g->err, sizeof(g->err));
}

static void mc_cuda_put(struct mc_gpu_bank *g, void *event)
{
	struct mc_cuda_bank *cb = (struct mc_cuda_bank *)g;

	if (cb->n_spare == cb->cap_spare) {
		uint32_t cap = cb->cap_spare ? cb->cap_spare * 2 : 16;
		cu_event *p = realloc(cb->spare, cap * sizeof(*p));

		if (!p) {
			cb->cu.cuEventDestroy((cu_event)event);
			return;
		}
		cb->spare = p;
		cb->cap_spare = cap;
	}
	cb->spare[cb->n_spare++] = (cu_event)event;
}

static const struct mc_gpu_bank_ops mc_cuda_bank_ops = {
    .check_stream = mc_cuda_check_stream,
    .marker = mc_cuda_marker,
    .query = mc_cuda_query,
    .wait = mc_cuda_wait,
    .put = mc_cuda_put,
};

static void mc_cuda_bank_free(struct mc_cuda_bank *cb)
{
	cu_context prev = NULL;
	bool entered = cb->ctx && !mc_cuda_enter(cb, &prev);

	mc_gpu_bank_fini(&cb->g);
	for (uint32_t i = 0; i < cb->n_spare; i++)
		cb->cu.cuEventDestroy(cb->spare[i]);
	if (cb->mapped)
		cb->cu.cuMemUnmap(cb->base, cb->bytes);
	if (cb->reserved)
		cb->cu.cuMemAddressFree(cb->base, cb->bytes);
	if (cb->have_handle)
		cb->cu.cuMemRelease(cb->handle);
	if (entered)
		mc_cuda_leave(cb, prev);
	if (cb->primary)
		cb->cu.cuDevicePrimaryCtxRelease(cb->dev);
	free(cb->spare);
	if (cb->cu.lib)
		mc_cuda_api_unload(&cb->cu);
	free(cb);
}

/* The caller's context if it is on dev, else dev's primary context. */
static int mc_cuda_pick_context(struct mc_cuda_bank *cb)
{
	cu_context cur = NULL;
	cu_device cur_dev;
	cu_result res;

	if (cb->cu.cuCtxGetCurrent(&cur) == MC_CU_SUCCESS && cur &&
	    cb->cu.cuCtxGetDevice(&cur_dev) == MC_CU_SUCCESS && cur_dev == cb->dev) {
		cb->ctx = cur;
		return 0;
	}
	res = cb->cu.cuDevicePrimaryCtxRetain(&cb->ctx, cb->dev);
	if (res != MC_CU_SUCCESS)
		return mc_cuda_fail(&cb->cu, res, "cuDevicePrimaryCtxRetain", cb->g.err,
				    sizeof(cb->g.err));
	cb->primary = true;
	return 0;
}

static int mc_cuda_map(struct mc_cuda_bank *cb, const struct moecache_bank_map *b)
{
	struct cu_mem_allocation_prop prop = {
	    .type = MC_CU_MEM_ALLOCATION_TYPE_PINNED,
	    .requested_handle_types = MC_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
	    .location = {.type = MC_CU_MEM_LOCATION_TYPE_DEVICE, .id = cb->dev},
	};
	struct cu_mem_access_desc access = {
	    .location = {.type = MC_CU_MEM_LOCATION_TYPE_DEVICE, .id = cb->dev},
	    .flags = b->writable ? MC_CU_MEM_ACCESS_FLAGS_PROT_READWRITE
				 : MC_CU_MEM_ACCESS_FLAGS_PROT_READ,
	};
	char *err = cb->g.err;
	size_t errlen = sizeof(cb->g.err), gran = 0;
	cu_result res;

	res =
	    cb->cu.cuMemGetAllocationGranularity(&gran, &prop, MC_CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (res != MC_CU_SUCCESS)
		return mc_cuda_fail(&cb->cu, res, "cuMemGetAllocationGranularity", err, errlen);
	if (!gran || b->bytes % gran) {
		snprintf(err, errlen, "the bank's size is not a multiple of the GPU's granularity");
		return -EPROTO;
	}
	res = cb->cu.cuMemImportFromShareableHandle(&cb->handle, (void *)(intptr_t)b->fd,
						    MC_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	if (res != MC_CU_SUCCESS)
		return mc_cuda_fail(&cb->cu, res, "cuMemImportFromShareableHandle", err, errlen);
	cb->have_handle = true;
	cb->bytes = b->bytes;
	res = cb->cu.cuMemAddressReserve(&cb->base, cb->bytes, gran, 0, 0);
	if (res != MC_CU_SUCCESS)
		return mc_cuda_fail(&cb->cu, res, "cuMemAddressReserve", err, errlen);
	cb->reserved = true;
	res = cb->cu.cuMemMap(cb->base, cb->bytes, 0, cb->handle, 0);
	if (res != MC_CU_SUCCESS)
		return mc_cuda_fail(&cb->cu, res, "cuMemMap", err, errlen);
	cb->mapped = true;
	res = cb->cu.cuMemSetAccess(cb->base, cb->bytes, &access, 1);
	if (res != MC_CU_SUCCESS)
		return mc_cuda_fail(&cb->cu, res, "cuMemSetAccess", err, errlen);
	return 0;
}

int mc_cuda_bank_import(struct moecache_bank_map *b)
{
	struct mc_cuda_bank *cb;
	cu_context prev = NULL;
	char uuid[41];
	int ret;

	cb = calloc(1, sizeof(*cb));
	if (!cb)
		return -ENOMEM;
	ret = mc_gpu_bank_init(&cb->g, b, &mc_cuda_bank_ops);
	if (ret) {
		free(cb);
		mc_gpu_set_import_error("out of resources");
		return ret;
	}
	ret = mc_cuda_api_load(&cb->cu, NULL, cb->g.err, sizeof(cb->g.err));
	if (!ret)
		ret = mc_cuda_init(&cb->cu, cb->g.err, sizeof(cb->g.err));
	if (ret)
		goto err;
	ret = mc_cuda_device_by_uuid(&cb->cu, b->desc.device_uuid, &cb->dev);
	if (ret) {
		mc_cuda_uuid_format(b->desc.device_uuid, uuid);
		snprintf(
		    cb->g.err, sizeof(cb->g.err),
		    "the bank lives on %s, which this process cannot see (CUDA_VISIBLE_DEVICES?)",
		    uuid);
		goto err;
	}
	ret = mc_cuda_pick_context(cb);
	if (!ret)
		ret = mc_cuda_enter(cb, &prev);
	if (ret)
		goto err;
	ret = mc_cuda_map(cb, b);
	mc_cuda_leave(cb, prev);
	if (ret)
		goto err;
	cb->g.dev_base = cb->base;
	b->base = cb;
	mc_gpu_set_import_error(NULL);
	return 0;
err:
	mc_gpu_set_import_error(cb->g.err);
	mc_cuda_bank_free(cb);
	return ret;
}

void mc_cuda_bank_unimport(struct moecache_bank_map *b)
{
	if (b && b->base)
		mc_cuda_bank_free(b->base);
}
