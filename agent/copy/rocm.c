// SPDX-License-Identifier: MIT
/*
 * The ROCm device ops of the GPU copy engine (gpu.h), on the kernel
 * interfaces directly (no HIP runtime in the agent): libhsakmt for the
 * KFD and libdrm_amdgpu for the bank.
 *
 * Discovery: hsaKmtOpenKFD and the KFD topology (hsaKmtAcquireSystemProperties,
 * hsaKmtGetNodeProperties) list the GPUs with their PCI location, render
 * node and SDMA engines; libdrm_amdgpu on that render node answers the
 * VRAM heap size and use (the budget check). One engine serves one bank
 * on one GPU (one KFD node).
 *
 * The bank is an amdgpu BO in VRAM exported as a dma-buf fd, which the
 * driver keeps and hands to clients and to the next agent. So that the
 * SDMA engine can write it, the dma-buf is imported into this process's
 * KFD address space (hsaKmtRegisterGraphicsHandleToNodes) and mapped
 * (hsaKmtMapMemoryToGPUNodes); the host pages are registered the same way
 * (a userptr: hsaKmtRegisterMemoryToNodes, hsaKmtMapMemoryToGPUNodes).
 *
 * Copies go to KFD SDMA queues (hsaKmtCreateQueue(HSA_QUEUE_SDMA)) that
 * this file feeds itself: COPY_LINEAR packets (agent/copy/sdma.c), then a
 * FENCE that writes the copy's sequence number into a word of host
 * memory, then a TRAP that signals a KFD event. The engine's completion
 * thread waits on the event (with a short timeout as a backstop) and
 * retires every copy whose sequence number the fence word has reached.
 *
 * Peer copies: the KFD topology lists, per node, IO links to other nodes
 * (hsaKmtGetNodeIoLinkProperties; libhsakmt counts the KFD's io_links and
 * p2p_links in NumIOLinks). Where this bank's node has a link to the
 * other bank's node that does not say NoPeerToPeerDMA, the other bank's
 * dma-buf is imported into this node's address space and this node's SDMA
 * engine copies VRAM to VRAM; where there is no such link, there is no
 * peer path and the agent copies from the host pages.
 *
 * SOC15 and later only (GFX9+): 64-bit ring pointers and doorbells in
 * bytes, COPY_LINEAR counts of bytes - 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/log.h"
#include "gpu.h"
#include "lib/gpu/rocm_api.h"
#include "sdma.h"

#define ROCM_SLOT_ALIGN 4096u
#define ROCM_BANK_ALIGN (2u << 20) /* VRAM BOs in 2 MiB pages */
#define ROCM_RING_MIN (64u << 10)
#define ROCM_RING_MAX (16u << 20)
/* Waits on the KFD event time out after this, then the fences are read anyway. */
#define ROCM_EVENT_WAIT_MS 1u

/* One SDMA queue: its ring and its fence and gate words. */
struct rocm_ring {
	HsaQueueResource res;
	bool created;
	uint32_t *ring;
	uint64_t ring_bytes;	  /* a power of two */
	uint64_t wptr;		  /* bytes written, monotonic */
	uint64_t consumed;	  /* ring position the engine is known to be past */
	volatile uint32_t *fence; /* written by FENCE packets */
	volatile uint32_t *gate;  /* polled by POLL_REGMEM (delayed copies) */
	uint64_t fence_gpu, gate_gpu;
	uint32_t seq; /* last sequence number used */
};

/* A dma-buf imported into this node's KFD address space. */
struct rocm_import {
	void *kfd; /* KFD's handle address */
	bool registered, mapped;
};

struct rocm_backend {
	struct agent_gpu_engine g; /* first */
	struct mc_hsakmt_api kmt;
	struct mc_drm_amdgpu_api drm;
	bool kfd_open, sysprops;

	/* GPUs: KFD node ids in GPU index order. */
	uint32_t gpu_nodes[MC_GPU_MAX_DEVICES];
	uint32_t n_gpus;

	/* The device, once bound. */
	uint32_t node; /* KFD node */
	HsaNodeProperties props;
	uint32_t fence_mtype;
	int drm_fd;
	amdgpu_device_handle dev;

	amdgpu_bo_handle bo;
	struct rocm_import bank;
	struct rocm_import peers[MC_GPU_MAX_DEVICES]; /* as the engine's g.peers */

	/* Queues and their host memory (rings, then one page of fence and gate words). */
	void *qmem;
	uint64_t qmem_bytes;
	bool qmem_mapped;
	struct rocm_ring *rings; /* g.n_queues */
	HsaEvent *event;
};

static struct rocm_backend *rocm_of(struct agent_gpu_engine *g)
{
	return (struct rocm_backend *)g;
}

static int rocm_kmt_fail(struct rocm_backend *rb, HSAKMT_STATUS st, const char *what)
{
	agent_gpu_errf(&rb->g, "%s: %s (%d)", what, mc_hsakmt_status_name(st), st);
	return mc_hsakmt_errno(st) ? mc_hsakmt_errno(st) : -EIO;
}

static int rocm_drm_fail(struct rocm_backend *rb, int ret, const char *what)
{
	agent_gpu_errf(&rb->g, "%s: %s", what, strerror(ret < 0 ? -ret : EIO));
	return ret < 0 ? ret : -EIO;
}

static bool rocm_seq_reached(uint32_t fence, uint32_t seq)
{
	return (int32_t)(fence - seq) >= 0;
}

static void rocm_pause_us(long us)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = us * 1000};

	nanosleep(&ts, NULL);
}

/* ---- the driver ---- */

/* Lists the KFD nodes that are GPUs (the others are CPUs). */
static int rocm_discover(struct rocm_backend *rb)
{
	HsaSystemProperties sys;
	HSAKMT_STATUS st;

	st = rb->kmt.hsaKmtAcquireSystemProperties(&sys);
	if (st != HSAKMT_STATUS_SUCCESS)
		return rocm_kmt_fail(rb, st, "hsaKmtAcquireSystemProperties");
	rb->sysprops = true;
	for (uint32_t n = 0; n < sys.NumNodes && rb->n_gpus < MC_GPU_MAX_DEVICES; n++) {
		HsaNodeProperties props;

		if (rb->kmt.hsaKmtGetNodeProperties(n, &props) != HSAKMT_STATUS_SUCCESS)
			continue;
		if (props.NumFComputeCores)
			rb->gpu_nodes[rb->n_gpus++] = n;
	}
	if (!rb->n_gpus) {
		snprintf(rb->g.err, sizeof(rb->g.err), "the KFD lists no GPU");
		return -ENODEV;
	}
	return 0;
}

static int rocm_open(struct agent_gpu_engine *g, uint32_t *n_devices)
{
	struct rocm_backend *rb = rocm_of(g);
	HSAKMT_STATUS st;
	int ret;

	rb->drm_fd = -1;
	ret = mc_hsakmt_api_load(&rb->kmt, NULL, g->err, sizeof(g->err));
	if (!ret)
		ret = mc_drm_amdgpu_api_load(&rb->drm, NULL, g->err, sizeof(g->err));
	if (ret)
		return ret;
	/* The thunk's own message for a missing /dev/kfd is a bare status code. */
	if (access(mc_rocm_kfd_path(), R_OK | W_OK)) {
		snprintf(g->err, sizeof(g->err),
			 "%s: %s: no AMD GPU with the amdgpu driver's compute (KFD) support, or "
			 "no permission (the render group)",
			 mc_rocm_kfd_path(), strerror(errno));
		return -ENODEV;
	}
	st = rb->kmt.hsaKmtOpenKFD();
	if (st != HSAKMT_STATUS_SUCCESS) {
		snprintf(g->err, sizeof(g->err), "hsaKmtOpenKFD: %s (%d)",
			 mc_hsakmt_status_name(st), st);
		return mc_hsakmt_errno(st) ? mc_hsakmt_errno(st) : -EIO;
	}
	rb->kfd_open = true;
	ret = rocm_discover(rb);
	*n_devices = rb->n_gpus;
	return ret;
}

static void rocm_close(struct agent_gpu_engine *g)
{
	struct rocm_backend *rb = rocm_of(g);

	if (rb->dev)
		rb->drm.amdgpu_device_deinitialize(rb->dev);
	if (rb->drm_fd >= 0)
		close(rb->drm_fd);
	if (rb->sysprops)
		rb->kmt.hsaKmtReleaseSystemProperties();
	if (rb->kfd_open)
		rb->kmt.hsaKmtCloseKFD();
	free(rb->rings);
	if (rb->drm.lib)
		mc_drm_amdgpu_api_unload(&rb->drm);
	if (rb->kmt.lib)
		mc_hsakmt_api_unload(&rb->kmt);
}

static int rocm_device_info(struct agent_gpu_engine *g, uint32_t device, uint64_t *mem_bytes,
			    uint64_t *slot_align, uint64_t *bank_align)
{
	struct rocm_backend *rb = rocm_of(g);
	HsaNodeProperties props;

	if (rb->kmt.hsaKmtGetNodeProperties(rb->gpu_nodes[device], &props) == HSAKMT_STATUS_SUCCESS)
		*mem_bytes = props.LocalMemSize;
	*slot_align = ROCM_SLOT_ALIGN;
	*bank_align = ROCM_BANK_ALIGN;
	return 0;
}

/* GPU indexes may change across a restart: the PCI location does not. */
static int rocm_device_of(struct agent_gpu_engine *g, const struct moecache_bank *desc,
			  uint32_t *device)
{
	struct rocm_backend *rb = rocm_of(g);
	uint32_t domain, location;
	uint16_t device_id;

	if (mc_rocm_uuid_parse(desc->device_uuid, &domain, &location, &device_id))
		return -EPROTO;
	for (uint32_t i = 0; i < rb->n_gpus; i++) {
		HsaNodeProperties props;

		if (rb->kmt.hsaKmtGetNodeProperties(rb->gpu_nodes[i], &props) ==
			HSAKMT_STATUS_SUCCESS &&
		    props.Domain == domain && props.LocationId == location) {
			*device = i;
			return 0;
		}
	}
	agent_gpu_errf(g,
		       "the bank lives on the GPU at PCI %04x:%02x:%02x.%x, which is not visible",
		       domain, location >> 8, (location >> 3) & 0x1f, location & 7);
	return -EPROTO;
}

static uint64_t rocm_round_pow2(uint64_t v)
{
	uint64_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

/* Dwords of the packets of one copy, the delayed form included. */
static uint32_t rocm_copy_dwords(uint64_t expert_bytes)
{
	return 2 * mc_sdma_copy_dwords(expert_bytes) + 2 * MC_SDMA_FENCE_DW +
	       MC_SDMA_POLL_REGMEM_DW + MC_SDMA_TRAP_DW;
}

/* Maps system memory allocated by the thunk (rings, fences) to the GPU. */
static int rocm_alloc_queue_memory(struct rocm_backend *rb, uint64_t ring_bytes)
{
	uint32_t n_queues = rb->g.n_queues;
	HsaMemFlags flags = {0};
	HsaMemMapFlags mflags = {0};
	HSAuint64 va = 0;
	HSAKMT_STATUS st;
	uint8_t *words;

	rb->qmem_bytes = ring_bytes * n_queues + 4096;
	flags.ui32.HostAccess = 1;
	flags.ui32.ExecuteAccess = 1;
	flags.ui32.PageSize = HSA_PAGE_SIZE_4KB;
	/* Node 0 is system memory (the CPU node), as the thunk's own queue allocations. */
	st = rb->kmt.hsaKmtAllocMemory(0, rb->qmem_bytes, flags, &rb->qmem);
	if (st != HSAKMT_STATUS_SUCCESS) {
		rb->qmem = NULL;
		return rocm_kmt_fail(rb, st, "hsaKmtAllocMemory (SDMA rings)");
	}
	st = rb->kmt.hsaKmtMapMemoryToGPUNodes(rb->qmem, rb->qmem_bytes, &va, mflags, 1, &rb->node);
	if (st != HSAKMT_STATUS_SUCCESS)
		return rocm_kmt_fail(rb, st, "hsaKmtMapMemoryToGPUNodes (SDMA rings)");
	rb->qmem_mapped = true;
	memset(rb->qmem, 0, rb->qmem_bytes);
	/* The thunk's system memory has the same address for the CPU and the GPU. */
	if (!va)
		va = (uintptr_t)rb->qmem;
	words = (uint8_t *)rb->qmem + ring_bytes * n_queues;
	for (uint32_t i = 0; i < n_queues; i++) {
		struct rocm_ring *q = &rb->rings[i];
		uint64_t woff = (uint64_t)(words - (uint8_t *)rb->qmem) + i * 64u;

		q->ring = (uint32_t *)((uint8_t *)rb->qmem + ring_bytes * i);
		q->ring_bytes = ring_bytes;
		q->fence = (volatile uint32_t *)(words + i * 64u);
		q->gate = (volatile uint32_t *)(words + i * 64u + 4);
		q->fence_gpu = va + woff;
		q->gate_gpu = va + woff + 4;
	}
	return 0;
}

/* Binds to GPU index gpu: render node, SDMA queues, event. */
static int rocm_bind(struct agent_gpu_engine *g, uint32_t gpu)
{
	struct rocm_backend *rb = rocm_of(g);
	HsaEventDescriptor ed = {0};
	uint64_t ring_bytes;
	uint32_t major, minor;
	HSAKMT_STATUS st;
	int ret;

	rb->node = rb->gpu_nodes[gpu];
	st = rb->kmt.hsaKmtGetNodeProperties(rb->node, &rb->props);
	if (st != HSAKMT_STATUS_SUCCESS)
		return rocm_kmt_fail(rb, st, "hsaKmtGetNodeProperties");
	if (rb->props.EngineId.ui32.Major < 9) {
		agent_gpu_errf(
		    g, "GPU %u is GFX%u: SDMA copies need GFX9 or later (64-bit ring pointers)",
		    gpu, rb->props.EngineId.ui32.Major);
		return -EOPNOTSUPP;
	}
	rb->fence_mtype = rb->props.EngineId.ui32.Major >= 10 ? MC_SDMA_MTYPE_UC : 0;
	rb->drm_fd = mc_rocm_open_render_minor(rb->props.DrmRenderMinor);
	if (rb->drm_fd < 0) {
		agent_gpu_errf(g, "render node renderD%d of GPU %u: %s", rb->props.DrmRenderMinor,
			       gpu, strerror(-rb->drm_fd));
		rb->drm_fd = -1;
		return -ENODEV;
	}
	ret = rb->drm.amdgpu_device_initialize(rb->drm_fd, &major, &minor, &rb->dev);
	if (ret) {
		rb->dev = NULL;
		return rocm_drm_fail(rb, ret, "amdgpu_device_initialize");
	}
	rb->rings = calloc(g->n_queues, sizeof(*rb->rings));
	if (!rb->rings)
		return -ENOMEM;
	ring_bytes = rocm_round_pow2((uint64_t)(g->cfg.n_slots + 1) * 4 *
				     rocm_copy_dwords(g->cfg.expert_bytes));
	if (ring_bytes < ROCM_RING_MIN)
		ring_bytes = ROCM_RING_MIN;
	if (ring_bytes > ROCM_RING_MAX)
		ring_bytes = ROCM_RING_MAX;
	ret = rocm_alloc_queue_memory(rb, ring_bytes);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < g->n_queues; i++) {
		struct rocm_ring *q = &rb->rings[i];

		st = rb->kmt.hsaKmtCreateQueue(rb->node, HSA_QUEUE_SDMA, 100,
					       HSA_QUEUE_PRIORITY_NORMAL, q->ring, q->ring_bytes,
					       NULL, &q->res);
		if (st != HSAKMT_STATUS_SUCCESS)
			return rocm_kmt_fail(rb, st, "hsaKmtCreateQueue (SDMA)");
		q->created = true;
		q->wptr = q->consumed = *q->res.Queue_write_ptr_aql;
	}
	ed.EventType = HSA_EVENTTYPE_SIGNAL;
	ed.NodeId = rb->node;
	if (rb->kmt.hsaKmtCreateEvent(&ed, false, false, &rb->event) != HSAKMT_STATUS_SUCCESS) {
		rb->event = NULL; /* the completion thread polls instead */
		agent_logf(NULL, LOG_WARNING, agent_gpu_engine_pool(g),
			   "rocm: no KFD event: completions are polled");
	}
	return 0;
}

/* Waits (bounded) until the engine is past every fence queued on q. */
static void rocm_ring_drain(struct rocm_ring *q, uint64_t deadline)
{
	while (!rocm_seq_reached(__atomic_load_n(q->fence, __ATOMIC_ACQUIRE), q->seq) &&
	       mc_gpu_now_ns() < deadline)
		rocm_pause_us(100);
}

/* The completion thread still runs meanwhile and opens the gates of delayed copies. */
static void rocm_drain(struct agent_gpu_engine *g)
{
	struct rocm_backend *rb = rocm_of(g);
	uint64_t deadline = mc_gpu_now_ns() + 5000000000ull;

	for (uint32_t i = 0; rb->rings && i < g->n_queues; i++)
		if (rb->rings[i].created)
			rocm_ring_drain(&rb->rings[i], deadline);
}

static void rocm_unimport(struct rocm_backend *rb, struct rocm_import *im)
{
	if (im->mapped)
		rb->kmt.hsaKmtUnmapMemoryToGPU(im->kfd);
	if (im->registered)
		rb->kmt.hsaKmtDeregisterMemory(im->kfd);
	*im = (struct rocm_import){0};
}

static void rocm_unbind(struct agent_gpu_engine *g)
{
	struct rocm_backend *rb = rocm_of(g);

	for (uint32_t i = 0; rb->rings && i < g->n_queues; i++)
		if (rb->rings[i].created)
			rb->kmt.hsaKmtDestroyQueue(rb->rings[i].res.QueueId);
	if (rb->event)
		rb->kmt.hsaKmtDestroyEvent(rb->event);
	rb->event = NULL;
	if (rb->qmem) {
		if (rb->qmem_mapped)
			rb->kmt.hsaKmtUnmapMemoryToGPU(rb->qmem);
		rb->kmt.hsaKmtFreeMemory(rb->qmem, rb->qmem_bytes);
	}
	rb->qmem = NULL;
	for (uint32_t i = 0; i < g->n_peers; i++)
		rocm_unimport(rb, &rb->peers[i]);
}

/* ---- the bank ---- */

/* Imports a dma-buf into this node's KFD address space so that its SDMA engine reaches it. */
static int rocm_import(struct rocm_backend *rb, int fd, uint64_t bytes, struct rocm_import *im,
		       uint64_t *va)
{
	HsaGraphicsResourceInfo info = {0};
	HsaMemMapFlags mflags = {0};
	HSAuint64 gpu_va = 0;
	HSAKMT_STATUS st;

	st = rb->kmt.hsaKmtRegisterGraphicsHandleToNodes((HSAuint64)fd, &info, 1, &rb->node);
	if (st != HSAKMT_STATUS_SUCCESS)
		return rocm_kmt_fail(rb, st, "hsaKmtRegisterGraphicsHandleToNodes (a bank)");
	im->kfd = info.MemoryAddress;
	im->registered = true;
	if (info.SizeInBytes < bytes) {
		agent_gpu_errf(&rb->g, "the bank's dma-buf has %llu bytes, not %llu",
			       (unsigned long long)info.SizeInBytes, (unsigned long long)bytes);
		return -EPROTO;
	}
	st = rb->kmt.hsaKmtMapMemoryToGPUNodes(info.MemoryAddress, info.SizeInBytes, &gpu_va,
					       mflags, 1, &rb->node);
	if (st != HSAKMT_STATUS_SUCCESS)
		return rocm_kmt_fail(rb, st, "hsaKmtMapMemoryToGPUNodes (a bank)");
	im->mapped = true;
	*va = gpu_va ? gpu_va : (uintptr_t)info.MemoryAddress;
	return 0;
}

static int rocm_bank_create(struct agent_gpu_engine *g, uint64_t bytes, int *fd, uint64_t *va)
{
	struct rocm_backend *rb = rocm_of(g);
	struct amdgpu_bo_alloc_request req = {0};
	struct amdgpu_heap_info heap = {0};
	uint32_t shared = 0;
	int ret;

	ret = rb->drm.amdgpu_query_heap_info(rb->dev, AMDGPU_GEM_DOMAIN_VRAM, 0, &heap);
	if (!ret && (heap.heap_size - heap.heap_usage < bytes || heap.max_allocation < bytes)) {
		agent_gpu_errf(
		    g,
		    "GPU %d has %llu MiB of VRAM free (largest BO %llu MiB): a bank of "
		    "%llu MiB does not fit",
		    g->device, (unsigned long long)(heap.heap_size - heap.heap_usage) >> 20,
		    (unsigned long long)heap.max_allocation >> 20, (unsigned long long)bytes >> 20);
		return -ENOSPC;
	}
	req.alloc_size = bytes;
	req.phys_alignment = ROCM_BANK_ALIGN;
	req.preferred_heap = AMDGPU_GEM_DOMAIN_VRAM;
	/* The CPU never touches it: any VRAM will do, not just the BAR-visible part. */
	req.flags = AMDGPU_GEM_CREATE_NO_CPU_ACCESS;
	ret = rb->drm.amdgpu_bo_alloc(rb->dev, &req, &rb->bo);
	if (ret) {
		rb->bo = NULL;
		return rocm_drm_fail(rb, ret, "amdgpu_bo_alloc (the bank, VRAM)");
	}
	ret = rb->drm.amdgpu_bo_export(rb->bo, amdgpu_bo_handle_type_dma_buf_fd, &shared);
	if (ret)
		return rocm_drm_fail(rb, ret, "amdgpu_bo_export (dma-buf)");
	*fd = (int)shared;
	return rocm_import(rb, *fd, bytes, &rb->bank, va);
}

static int rocm_bank_import(struct agent_gpu_engine *g, const struct moecache_bank *desc,
			    uint64_t *va)
{
	return rocm_import(rocm_of(g), desc->fd, desc->bank_bytes, &rocm_of(g)->bank, va);
}

static void rocm_bank_release(struct agent_gpu_engine *g)
{
	struct rocm_backend *rb = rocm_of(g);

	rocm_unimport(rb, &rb->bank);
	if (rb->bo)
		rb->drm.amdgpu_bo_free(rb->bo);
	rb->bo = NULL;
}

static void rocm_bank_uuid(const struct agent_gpu_engine *g, uint8_t uuid[16])
{
	const struct rocm_backend *rb = (const struct rocm_backend *)g;

	mc_rocm_uuid_make(rb->props.Domain, rb->props.LocationId, rb->props.DeviceId, uuid);
}

/*
 * Host pages as a userptr, registered and mapped to the GPU. No fallback:
 * SDMA reads only memory mapped into its address space.
 */
static int rocm_host_register(struct agent_gpu_engine *g, uintptr_t start, size_t size,
			      bool writable, uint64_t *device_addr)
{
	struct rocm_backend *rb = rocm_of(g);
	HsaMemMapFlags mflags = {0};
	HSAuint64 va = 0;
	HSAKMT_STATUS st;

	st = rb->kmt.hsaKmtRegisterMemoryToNodes((void *)start, size, 1, &rb->node);
	if (st == HSAKMT_STATUS_SUCCESS) {
		mflags.ui32.ReadOnly = !writable;
		st = rb->kmt.hsaKmtMapMemoryToGPUNodes((void *)start, size, &va, mflags, 1,
						       &rb->node);
		if (st != HSAKMT_STATUS_SUCCESS)
			rb->kmt.hsaKmtDeregisterMemory((void *)start);
	}
	if (st != HSAKMT_STATUS_SUCCESS) {
		agent_gpu_errf(
		    g,
		    "cannot register the host pages at %#lx (%zu bytes) with the GPU: %s "
		    "(the agent must map them read-write for a userptr)",
		    (unsigned long)start, size, mc_hsakmt_status_name(st));
		return -EFAULT;
	}
	*device_addr = va ? va : start;
	return 0;
}

static void rocm_host_unregister(struct agent_gpu_engine *g, uintptr_t start)
{
	struct rocm_backend *rb = rocm_of(g);

	rb->kmt.hsaKmtUnmapMemoryToGPU((void *)start);
	rb->kmt.hsaKmtDeregisterMemory((void *)start);
}

/* ---- the ring ---- */

/*
 * Writes n dwords of packets at the ring's write position (a packet never
 * wraps: NOPs fill the end first) and rings the doorbell. -EAGAIN if the
 * engine has not consumed enough yet.
 */
static int rocm_ring_submit(struct rocm_ring *q, const uint32_t *dw, uint32_t n)
{
	uint64_t bytes = (uint64_t)n * 4, off = q->wptr & (q->ring_bytes - 1), pad = 0;

	if (off + bytes > q->ring_bytes)
		pad = q->ring_bytes - off;
	if (pad + bytes > q->ring_bytes - (q->wptr - q->consumed))
		return -EAGAIN;
	if (pad) {
		mc_sdma_nop(q->ring + off / 4, (uint32_t)(pad / 4));
		off = 0;
	}
	memcpy(q->ring + off / 4, dw, bytes);
	q->wptr += pad + bytes;
	/* The packets are in memory before the engine hears of them. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(q->res.Queue_write_ptr_aql, q->wptr, __ATOMIC_RELEASE);
	__atomic_store_n(q->res.Queue_DoorBell_aql, q->wptr, __ATOMIC_RELEASE);
	return 0;
}

/* ---- copies ---- */

/*
 * The packets of gc: without a gate, the copy, a fence and a trap; with
 * one, the first half, a fence, a wait on the gate word that the engine
 * opens after the delay, then the rest.
 */
static int rocm_enqueue(struct agent_gpu_engine *g, uint32_t qi, struct agent_gpu_copy *gc)
{
	struct rocm_backend *rb = rocm_of(g);
	struct rocm_ring *q = &rb->rings[qi];
	uint32_t max_dw = rocm_copy_dwords(gc->bytes), n = 0;
	uint32_t *dw = malloc((size_t)max_dw * 4);
	uint64_t off;
	int ret;

	if (!dw)
		return -ENOMEM;
	if (gc->first < gc->bytes) {
		gc->gate_fence = ++q->seq;
		n += mc_sdma_copy(dw + n, max_dw - n, gc->dst, gc->src, gc->first);
		n += mc_sdma_fence(dw + n, q->fence_gpu, (uint32_t)gc->gate_fence, rb->fence_mtype);
		n += mc_sdma_poll_mem(dw + n, q->gate_gpu, (uint32_t)gc->gate_fence, 0xffffffffu,
				      MC_SDMA_POLL_FUNC_EQUAL, 10, 0xfff);
	}
	off = gc->first < gc->bytes ? gc->first : 0;
	n += mc_sdma_copy(dw + n, max_dw - n, gc->dst + off, gc->src + off, gc->bytes - off);
	gc->fence = ++q->seq;
	n += mc_sdma_fence(dw + n, q->fence_gpu, (uint32_t)gc->fence, rb->fence_mtype);
	if (rb->event)
		n += mc_sdma_trap(dw + n, rb->event->EventId);
	ret = rocm_ring_submit(q, dw, n);
	free(dw);
	if (ret) {
		q->seq -= gc->first < gc->bytes ? 2 : 1;
		agent_gpu_errf(g, "SDMA ring full (%u copies queued)", g->queues[qi].len);
		return ret;
	}
	gc->end = q->wptr;
	return 0;
}

static int rocm_query(struct agent_gpu_engine *g, uint32_t qi, const struct agent_gpu_copy *gc)
{
	uint32_t fence = __atomic_load_n(rocm_of(g)->rings[qi].fence, __ATOMIC_ACQUIRE);

	/* Before the gate opens, the first half's fence; after, the whole copy's. */
	return rocm_seq_reached(fence, (uint32_t)(gc->gate_at_ns ? gc->gate_fence : gc->fence))
		   ? 0
		   : -EINPROGRESS;
}

static int rocm_open_gate(struct agent_gpu_engine *g, uint32_t qi, struct agent_gpu_copy *gc)
{
	__atomic_store_n(rocm_of(g)->rings[qi].gate, (uint32_t)gc->gate_fence, __ATOMIC_RELEASE);
	return 0;
}

static void rocm_retire(struct agent_gpu_engine *g, uint32_t qi, const struct agent_gpu_copy *gc)
{
	struct rocm_ring *q = &rocm_of(g)->rings[qi];

	if ((int64_t)(gc->end - q->consumed) > 0)
		q->consumed = gc->end;
}

static bool rocm_wait(struct agent_gpu_engine *g, const struct agent_gpu_copy *head)
{
	struct rocm_backend *rb = rocm_of(g);

	if (!rb->event)
		return false;
	rb->kmt.hsaKmtWaitOnEvent(rb->event, ROCM_EVENT_WAIT_MS);
	return true;
}

static void rocm_sync(struct agent_gpu_engine *g, uint32_t qi, struct agent_gpu_copy *gc)
{
	struct rocm_ring *q = &rocm_of(g)->rings[qi];

	if (gc->gate_at_ns)
		rocm_open_gate(g, qi, gc);
	while (!rocm_seq_reached(__atomic_load_n(q->fence, __ATOMIC_ACQUIRE), (uint32_t)gc->fence))
		rocm_pause_us(50);
}

int agent_rocm_backend_read_slot(void *priv, uint32_t slot, void *dst, uint64_t bytes)
{
	struct rocm_backend *rb = priv;
	struct agent_gpu_engine *g = priv;
	uint64_t dev_dst, deadline, end;
	uint32_t max_dw, n, seq;
	struct rocm_ring *q;
	uint32_t *dw;
	int ret;

	if (!rb || !g->bank_va || slot >= g->cfg.n_slots || !dst || !bytes ||
	    bytes > g->slot_stride)
		return -EINVAL;
	max_dw = mc_sdma_copy_dwords(bytes) + MC_SDMA_FENCE_DW;
	dw = malloc((size_t)max_dw * 4);
	if (!dw)
		return -ENOMEM;
	pthread_mutex_lock(&g->eng.lock);
	q = &rb->rings[0];
	ret = agent_gpu_host_addr(g, dst, bytes, true, &dev_dst);
	if (ret)
		goto unlock;
	n = mc_sdma_copy(dw, max_dw, dev_dst, g->bank_va + (uint64_t)slot * g->slot_stride, bytes);
	seq = ++q->seq;
	n += mc_sdma_fence(dw + n, q->fence_gpu, seq, rb->fence_mtype);
	ret = rocm_ring_submit(q, dw, n);
	if (ret)
		q->seq--;
	end = q->wptr;
unlock:
	pthread_mutex_unlock(&g->eng.lock);
	free(dw);
	if (ret)
		return ret;
	deadline = mc_gpu_now_ns() + 10000000000ull;
	while (!rocm_seq_reached(__atomic_load_n(q->fence, __ATOMIC_ACQUIRE), seq)) {
		if (mc_gpu_now_ns() > deadline)
			return -ETIMEDOUT;
		rocm_pause_us(50);
	}
	pthread_mutex_lock(&g->eng.lock);
	/* No copy after it to move the ring's consumed mark: move it here. */
	if (!g->queues[0].len && (int64_t)(end - q->consumed) > 0)
		q->consumed = end;
	pthread_mutex_unlock(&g->eng.lock);
	return 0;
}

/* ---- peers ---- */

/* Does the KFD list a link from node from to node to that allows peer DMA? */
static bool rocm_link_allows_p2p(const struct rocm_backend *rb, uint32_t from, uint32_t to)
{
	HsaIoLinkProperties links[64];
	HsaNodeProperties props;
	uint32_t n;

	if (rb->kmt.hsaKmtGetNodeProperties(from, &props) != HSAKMT_STATUS_SUCCESS)
		return false;
	n = props.NumIOLinks < 64 ? props.NumIOLinks : 64;
	if (!n || rb->kmt.hsaKmtGetNodeIoLinkProperties(from, n, links) != HSAKMT_STATUS_SUCCESS)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (links[i].NodeTo == to && links[i].IoLinkType != HSA_IOLINKTYPE_UNDEFINED &&
		    !links[i].Flags.ui32.NoPeerToPeerDMA)
			return true;
	return false;
}

static bool rocm_can_peer(const struct agent_gpu_engine *dst, const struct agent_gpu_engine *src)
{
	const struct rocm_backend *d = (const struct rocm_backend *)dst;
	const struct rocm_backend *s = (const struct rocm_backend *)src;

	/* dst's SDMA engine reads src's VRAM: a link from dst's node to src's. */
	return rocm_link_allows_p2p(d, d->node, s->node);
}

static int rocm_peer_map(struct agent_gpu_engine *dst, struct agent_gpu_engine *src, uint32_t index,
			 uint64_t *va)
{
	struct rocm_backend *rb = rocm_of(dst);
	int ret = rocm_import(rb, src->bank_fd, src->bank_bytes, &rb->peers[index], va);

	if (ret)
		rocm_unimport(rb, &rb->peers[index]);
	return ret;
}

AGENT_GPU_BACKEND(rocm, MOECACHE_BACKEND_ROCM, struct rocm_backend);
