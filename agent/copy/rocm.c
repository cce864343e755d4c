// SPDX-License-Identifier: MIT
/*
 * The ROCm backend, on the kernel interfaces directly (no HIP runtime in
 * the agent): libhsakmt for the KFD and libdrm_amdgpu for the bank.
 *
 * Discovery: hsaKmtOpenKFD and the KFD topology (hsaKmtAcquireSystemProperties,
 * hsaKmtGetNodeProperties) list the GPUs with their PCI location, render
 * node and SDMA engines; libdrm_amdgpu on that render node answers the
 * VRAM heap size and use (the budget check).
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
 * memory, then a TRAP that signals a KFD event. The completion thread
 * waits on the event (with a short timeout as a backstop) and retires
 * every copy whose sequence number the fence word has reached. The agent
 * commits a fill only once it has collected it, so nothing is published
 * before the engine has written the last byte.
 *
 * SOC15 and later only (GFX9+): 64-bit ring pointers and doorbells in
 * bytes, COPY_LINEAR counts of bytes - 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "copy_queue.h"
#include "gpu.h"
#include "lib/gpu/rocm_api.h"
#include "sdma.h"
#include "agent/log.h"

#define ROCM_SLOT_ALIGN 4096u
#define ROCM_BANK_ALIGN (2u << 20) /* VRAM BOs in 2 MiB pages */
#define ROCM_RING_MIN (64u << 10)
#define ROCM_RING_MAX (16u << 20)
/* Waits on the KFD event time out after this, then the fences are read anyway. */
#define ROCM_EVENT_WAIT_MS 1u
#define ROCM_POLL_NS 20000u

/* One copy on a queue, oldest first. */
struct rocm_copy {
	struct agent_copy c;
	uint32_t seq;	     /* the fence value once the whole copy is done */
	uint32_t gate_seq;   /* with a delay: fence value after the first half; 0 if none */
	uint64_t gate_at_ns; /* with a delay: when to open the gate */
	uint64_t end;	     /* ring position (bytes, monotonic) after its packets */
};

struct rocm_queue {
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
	struct rocm_copy *items;
	uint32_t head, len, cap;
};

struct rocm_backend {
	struct agent_gpu_engine g; /* first: the shared ops take priv as it */
	struct mc_hsakmt_api kmt;
	struct mc_drm_amdgpu_api drm;
	bool kfd_open, sysprops;

	/* GPUs: KFD node ids in GPU index order. */
	uint32_t gpu_nodes[MC_GPU_MAX_DEVICES];
	uint32_t n_gpus;

	/* The device, once a bank is made or adopted. */
	bool bound;
	int gpu;       /* GPU index */
	uint32_t node; /* KFD node */
	HsaNodeProperties props;
	uint32_t fence_mtype;
	int drm_fd;
	amdgpu_device_handle dev;

	/* The bank. */
	amdgpu_bo_handle bo;
	int bank_fd;
	void *bank_kfd; /* KFD's handle address of the imported dma-buf */
	bool bank_registered, bank_mapped;
	uint64_t bank_va; /* where the SDMA engine sees slot 0 */
	uint64_t bank_bytes, slot_stride;
	uint64_t budget_bytes;

	struct mc_gpu_ranges host;

	/* Queues and their host memory (rings, then one page of fence and gate words). */
	void *qmem;
	uint64_t qmem_bytes;
	bool qmem_mapped;
	struct rocm_queue *queues;
	uint32_t n_queues;
	HsaEvent *event;

	pthread_t thread;
	bool thread_started;
};

static void rocm_log_err(struct rocm_backend *rb)
{
	agent_logf(NULL, LOG_ERR, agent_gpu_engine_pool(&rb->g), "rocm: %s", rb->g.err);
}

static int rocm_kmt_fail(struct rocm_backend *rb, HSAKMT_STATUS st, const char *what)
{
	snprintf(rb->g.err, sizeof(rb->g.err), "%s: %s (%d)", what, mc_hsakmt_status_name(st), st);
	rocm_log_err(rb);
	return mc_hsakmt_errno(st) ? mc_hsakmt_errno(st) : -EIO;
}

static int rocm_drm_fail(struct rocm_backend *rb, int ret, const char *what)
{
	snprintf(rb->g.err, sizeof(rb->g.err), "%s: %s", what, strerror(ret < 0 ? -ret : EIO));
	rocm_log_err(rb);
	return ret < 0 ? ret : -EIO;
}

static bool rocm_seq_reached(uint32_t fence, uint32_t seq)
{
	return (int32_t)(fence - seq) >= 0;
}

/* ---- FIFOs ---- */

static int rocm_queue_push(struct rocm_queue *q, const struct rocm_copy *c)
{
	struct rocm_copy *items =
	    agent_ring_grow(q->items, sizeof(*q->items), &q->head, q->len, &q->cap, q->len + 1, 32);

	if (!items)
		return -ENOMEM;
	q->items = items;
	q->items[(q->head + q->len) % q->cap] = *c;
	q->len++;
	return 0;
}

/* ---- the ring ---- */

/*
 * Writes n dwords of packets at the ring's write position (a packet never
 * wraps: NOPs fill the end first) and rings the doorbell. -EAGAIN if the
 * engine has not consumed enough yet.
 */
static int rocm_ring_submit(struct rocm_queue *q, const uint32_t *dw, uint32_t n)
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

/* ---- completion thread ---- */

static bool rocm_queue_progress(struct rocm_backend *rb, struct rocm_queue *q, uint64_t *wait_ns)
{
	uint32_t fence = __atomic_load_n(q->fence, __ATOMIC_ACQUIRE);
	bool moved = false;

	while (q->len) {
		struct rocm_copy *h = &q->items[q->head];

		if (h->gate_seq) {
			uint64_t now;

			if (!rocm_seq_reached(fence, h->gate_seq))
				break;
			now = mc_gpu_now_ns();
			if (now < h->gate_at_ns) {
				if (h->gate_at_ns - now < *wait_ns)
					*wait_ns = h->gate_at_ns - now;
				break;
			}
			/* Half-written for the delay: let the engine copy the rest. */
			__atomic_store_n(q->gate, h->gate_seq, __ATOMIC_RELEASE);
			h->gate_seq = 0;
			moved = true;
		}
		if (!rocm_seq_reached(fence, h->seq))
			break;
		h->c.status = 0;
		if (agent_copy_engine_done(&rb->g.eng, &h->c)) /* room reserved by rocm_copy */
			agent_copy_engine_signal(&rb->g.eng);
		q->consumed = h->end;
		q->head = (q->head + 1) % q->cap;
		q->len--;
		moved = true;
	}
	return moved;
}

static void *rocm_completion_thread(void *arg)
{
	struct rocm_backend *rb = arg;

	pthread_mutex_lock(&rb->g.eng.lock);
	for (;;) {
		uint64_t wait_ns = UINT64_MAX;
		bool moved = false, busy = false;

		for (uint32_t i = 0; i < rb->n_queues; i++) {
			moved |= rocm_queue_progress(rb, &rb->queues[i], &wait_ns);
			busy |= rb->queues[i].len != 0;
		}
		if (!busy) {
			if (rb->g.eng.stopping)
				break;
			pthread_cond_wait(&rb->g.eng.work, &rb->g.eng.lock);
			continue;
		}
		if (moved)
			continue;
		pthread_mutex_unlock(&rb->g.eng.lock);
		if (rb->event && wait_ns == UINT64_MAX) {
			rb->kmt.hsaKmtWaitOnEvent(rb->event, ROCM_EVENT_WAIT_MS);
		} else {
			uint64_t ns = wait_ns < ROCM_POLL_NS ? wait_ns : ROCM_POLL_NS;
			struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ns};

			nanosleep(&ts, NULL);
		}
		pthread_mutex_lock(&rb->g.eng.lock);
	}
	pthread_mutex_unlock(&rb->g.eng.lock);
	return NULL;
}

/* ---- lifetime ---- */

static void rocm_release_bank(struct rocm_backend *rb)
{
	if (rb->bank_mapped)
		rb->kmt.hsaKmtUnmapMemoryToGPU(rb->bank_kfd);
	if (rb->bank_registered)
		rb->kmt.hsaKmtDeregisterMemory(rb->bank_kfd);
	if (rb->bo)
		rb->drm.amdgpu_bo_free(rb->bo);
	if (rb->bank_fd >= 0)
		close(rb->bank_fd);
	if (rb->budget_bytes && rb->g.params.budget)
		mc_gpu_budget_release(rb->g.params.budget, (uint32_t)rb->gpu, rb->budget_bytes);
	rb->bank_mapped = rb->bank_registered = false;
	rb->bo = NULL;
	rb->bank_fd = -1;
	rb->bank_kfd = NULL;
	rb->bank_va = 0;
	rb->budget_bytes = 0;
}

/*
 * Waits (bounded) for the engines to finish what was queued; the
 * completion thread still runs and opens the gates of delayed copies.
 */
static void rocm_drain(struct rocm_backend *rb)
{
	uint64_t deadline = mc_gpu_now_ns() + 5000000000ull;

	for (uint32_t i = 0; i < rb->n_queues; i++) {
		struct rocm_queue *q = &rb->queues[i];

		if (!q->created)
			continue;
		while (!rocm_seq_reached(__atomic_load_n(q->fence, __ATOMIC_ACQUIRE), q->seq) &&
		       mc_gpu_now_ns() < deadline) {
			struct timespec ts = {.tv_sec = 0, .tv_nsec = 100000};

			nanosleep(&ts, NULL);
		}
	}
}

static void rocm_destroy(void *priv)
{
	struct rocm_backend *rb = priv;

	if (!rb)
		return;
	if (rb->thread_started) {
		pthread_mutex_lock(&rb->g.eng.lock);
		rb->g.eng.stopping = true;
		pthread_mutex_unlock(&rb->g.eng.lock);
	}
	if (rb->bound)
		rocm_drain(rb);
	if (rb->thread_started) {
		pthread_mutex_lock(&rb->g.eng.lock);
		for (uint32_t i = 0; i < rb->n_queues; i++)
			rb->queues[i].len = 0; /* completions are dropped */
		pthread_cond_broadcast(&rb->g.eng.work);
		pthread_mutex_unlock(&rb->g.eng.lock);
		pthread_join(rb->thread, NULL);
	}
	for (uint32_t i = 0; rb->queues && i < rb->n_queues; i++) {
		if (rb->queues[i].created)
			rb->kmt.hsaKmtDestroyQueue(rb->queues[i].res.QueueId);
		free(rb->queues[i].items);
	}
	if (rb->event)
		rb->kmt.hsaKmtDestroyEvent(rb->event);
	if (rb->qmem) {
		if (rb->qmem_mapped)
			rb->kmt.hsaKmtUnmapMemoryToGPU(rb->qmem);
		rb->kmt.hsaKmtFreeMemory(rb->qmem, rb->qmem_bytes);
	}
	for (uint32_t i = 0; i < rb->host.n; i++) {
		if (!rb->host.items[i].registered)
			continue;
		rb->kmt.hsaKmtUnmapMemoryToGPU((void *)rb->host.items[i].start);
		rb->kmt.hsaKmtDeregisterMemory((void *)rb->host.items[i].start);
	}
	if (rb->bound)
		rocm_release_bank(rb);
	if (rb->bank_fd >= 0)
		close(rb->bank_fd);
	if (rb->dev)
		rb->drm.amdgpu_device_deinitialize(rb->dev);
	if (rb->drm_fd >= 0)
		close(rb->drm_fd);
	if (rb->sysprops)
		rb->kmt.hsaKmtReleaseSystemProperties();
	if (rb->kfd_open)
		rb->kmt.hsaKmtCloseKFD();
	free(rb->queues);
	mc_gpu_ranges_free(&rb->host);
	agent_copy_engine_fini(&rb->g.eng);
	if (rb->drm.lib)
		mc_drm_amdgpu_api_unload(&rb->drm);
	if (rb->kmt.lib)
		mc_hsakmt_api_unload(&rb->kmt);
	free(rb);
}

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
		rocm_log_err(rb);
		return -ENODEV;
	}
	return 0;
}

int agent_rocm_backend_create(const struct agent_backend_config *cfg,
			      const struct mc_gpu_params *params, void **priv, char *err,
			      size_t errlen)
{
	uint32_t devs[MC_GPU_MAX_DEVICES], n_devs;
	struct rocm_backend *rb;
	HSAKMT_STATUS st;
	int ret;

	if (!cfg || !priv || !cfg->n_slots || !cfg->expert_bytes)
		return -EINVAL;
	rb = calloc(1, sizeof(*rb));
	if (!rb)
		return -ENOMEM;
	rb->bank_fd = -1;
	rb->drm_fd = -1;
	rb->gpu = -1;
	ret = agent_gpu_engine_init(&rb->g, cfg, params);
	if (ret)
		goto err_logged;

	ret = mc_hsakmt_api_load(&rb->kmt, NULL, rb->g.err, sizeof(rb->g.err));
	if (!ret)
		ret = mc_drm_amdgpu_api_load(&rb->drm, NULL, rb->g.err, sizeof(rb->g.err));
	if (ret)
		goto err_logged;
	/* The thunk's own message for a missing /dev/kfd is a bare status code. */
	if (access(mc_rocm_kfd_path(), R_OK | W_OK)) {
		snprintf(rb->g.err, sizeof(rb->g.err),
			 "%s: %s: no AMD GPU with the amdgpu driver's compute (KFD) support, or "
			 "no permission (the render group)",
			 mc_rocm_kfd_path(), strerror(errno));
		ret = -ENODEV;
		goto err_logged;
	}
	st = rb->kmt.hsaKmtOpenKFD();
	if (st != HSAKMT_STATUS_SUCCESS) {
		ret = rocm_kmt_fail(rb, st, "hsaKmtOpenKFD");
		goto err;
	}
	rb->kfd_open = true;
	ret = rocm_discover(rb);
	if (ret)
		goto err;
	ret = mc_gpu_devices_parse(rb->g.params.devices, rb->g.pool, rb->n_gpus, devs, &n_devs,
				   rb->g.err, sizeof(rb->g.err));
	if (ret)
		goto err_logged;
	rb->n_queues = mc_gpu_queue_count(&rb->g.params, cfg->copy_threads);
	rb->queues = calloc(rb->n_queues, sizeof(*rb->queues));
	if (!rb->queues) {
		ret = -ENOMEM;
		goto err;
	}
	*priv = rb;
	return 0;
err_logged:
	rocm_log_err(rb);
err:
	if (err && errlen)
		snprintf(err, errlen, "%s", rb->g.err);
	rocm_destroy(rb);
	return ret;
}

static int rocm_create(const struct agent_backend_config *cfg, void **priv)
{
	return agent_rocm_backend_create(cfg, cfg->gpu, priv, NULL, 0);
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
	HsaMemFlags flags = {0};
	HsaMemMapFlags mflags = {0};
	HSAuint64 va = 0;
	HSAKMT_STATUS st;
	uint8_t *words;

	rb->qmem_bytes = ring_bytes * rb->n_queues + 4096;
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
	words = (uint8_t *)rb->qmem + ring_bytes * rb->n_queues;
	for (uint32_t i = 0; i < rb->n_queues; i++) {
		struct rocm_queue *q = &rb->queues[i];
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

/* Binds to GPU index gpu: render node, SDMA queues, event, completion thread. */
static int rocm_bind(struct rocm_backend *rb, int gpu)
{
	HsaEventDescriptor ed = {0};
	uint64_t ring_bytes;
	uint32_t major, minor;
	HSAKMT_STATUS st;
	int ret;

	rb->gpu = gpu;
	rb->node = rb->gpu_nodes[gpu];
	st = rb->kmt.hsaKmtGetNodeProperties(rb->node, &rb->props);
	if (st != HSAKMT_STATUS_SUCCESS)
		return rocm_kmt_fail(rb, st, "hsaKmtGetNodeProperties");
	if (rb->props.EngineId.ui32.Major < 9) {
		snprintf(rb->g.err, sizeof(rb->g.err),
			 "GPU %d is GFX%u: SDMA copies need GFX9 or later (64-bit ring pointers)",
			 gpu, rb->props.EngineId.ui32.Major);
		rocm_log_err(rb);
		return -EOPNOTSUPP;
	}
	rb->fence_mtype = rb->props.EngineId.ui32.Major >= 10 ? MC_SDMA_MTYPE_UC : 0;
	rb->drm_fd = mc_rocm_open_render_minor(rb->props.DrmRenderMinor);
	if (rb->drm_fd < 0) {
		snprintf(rb->g.err, sizeof(rb->g.err), "render node renderD%d of GPU %d: %s",
			 rb->props.DrmRenderMinor, gpu, strerror(-rb->drm_fd));
		rocm_log_err(rb);
		rb->drm_fd = -1;
		return -ENODEV;
	}
	ret = rb->drm.amdgpu_device_initialize(rb->drm_fd, &major, &minor, &rb->dev);
	if (ret) {
		rb->dev = NULL;
		return rocm_drm_fail(rb, ret, "amdgpu_device_initialize");
	}
	rb->bound = true;

	ring_bytes = rocm_round_pow2((uint64_t)(rb->g.cfg.n_slots + 1) * 4 *
				     rocm_copy_dwords(rb->g.cfg.expert_bytes));
	if (ring_bytes < ROCM_RING_MIN)
		ring_bytes = ROCM_RING_MIN;
	if (ring_bytes > ROCM_RING_MAX)
		ring_bytes = ROCM_RING_MAX;
	ret = rocm_alloc_queue_memory(rb, ring_bytes);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < rb->n_queues; i++) {
		struct rocm_queue *q = &rb->queues[i];

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
		agent_logf(NULL, LOG_WARNING, agent_gpu_engine_pool(&rb->g),
			   "rocm: no KFD event: completions are polled");
	}
	ret = -pthread_create(&rb->thread, NULL, rocm_completion_thread, rb);
	if (ret)
		return ret;
	rb->thread_started = true;
	return 0;
}

/* The GPU for a new bank: the spec's candidates, by budget room, then VRAM size. */
static int rocm_pick_gpu(struct rocm_backend *rb, uint64_t need, int *gpu)
{
	struct mc_gpu_candidate cand[MC_GPU_MAX_DEVICES];
	uint32_t devs[MC_GPU_MAX_DEVICES], n_devs = 0;
	int ret;

	ret = mc_gpu_devices_parse(rb->g.params.devices, rb->g.pool, rb->n_gpus, devs, &n_devs,
				   rb->g.err, sizeof(rb->g.err));
	if (ret) {
		rocm_log_err(rb);
		return ret;
	}
	for (uint32_t i = 0; i < n_devs; i++) {
		HsaNodeProperties props;

		cand[i] = (struct mc_gpu_candidate){.device = devs[i]};
		if (rb->kmt.hsaKmtGetNodeProperties(rb->gpu_nodes[devs[i]], &props) ==
		    HSAKMT_STATUS_SUCCESS)
			cand[i].free_bytes = props.LocalMemSize;
		cand[i].room = rb->g.params.budget
				   ? mc_gpu_budget_room(rb->g.params.budget, devs[i])
			       : rb->g.params.device_budget ? rb->g.params.device_budget
							    : UINT64_MAX;
	}
	ret = mc_gpu_pick(cand, n_devs, need);
	if (ret < 0) {
		snprintf(rb->g.err, sizeof(rb->g.err),
			 "no GPU has room for a bank of %" PRIu64 " MiB (%u slots): lower the "
			 "pool's slots or raise the budget",
			 need >> 20, rb->g.cfg.n_slots);
		rocm_log_err(rb);
		return -ENOSPC;
	}
	*gpu = (int)cand[ret].device;
	return 0;
}

/* Imports the bank's dma-buf into the KFD address space so SDMA can write it. */
static int rocm_map_bank(struct rocm_backend *rb, int fd)
{
	HsaGraphicsResourceInfo info = {0};
	HsaMemMapFlags mflags = {0};
	HSAuint64 va = 0;
	HSAKMT_STATUS st;

	st = rb->kmt.hsaKmtRegisterGraphicsHandleToNodes((HSAuint64)fd, &info, 1, &rb->node);
	if (st != HSAKMT_STATUS_SUCCESS)
		return rocm_kmt_fail(rb, st, "hsaKmtRegisterGraphicsHandleToNodes (the bank)");
	rb->bank_kfd = info.MemoryAddress;
	rb->bank_registered = true;
	if (info.SizeInBytes < rb->bank_bytes) {
		snprintf(rb->g.err, sizeof(rb->g.err),
			 "the bank's dma-buf has %" PRIu64 " bytes, not %" PRIu64,
			 (uint64_t)info.SizeInBytes, rb->bank_bytes);
		rocm_log_err(rb);
		return -EPROTO;
	}
	st = rb->kmt.hsaKmtMapMemoryToGPUNodes(info.MemoryAddress, info.SizeInBytes, &va, mflags, 1,
					       &rb->node);
	if (st != HSAKMT_STATUS_SUCCESS)
		return rocm_kmt_fail(rb, st, "hsaKmtMapMemoryToGPUNodes (the bank)");
	rb->bank_mapped = true;
	rb->bank_va = va ? va : (uintptr_t)info.MemoryAddress;
	return 0;
}

static void rocm_fill_desc(const struct rocm_backend *rb, struct moecache_bank *desc)
{
	memset(desc, 0, sizeof(*desc));
	desc->fd = rb->bank_fd;
	desc->backend = MOECACHE_BACKEND_ROCM;
	desc->bank_bytes = rb->bank_bytes;
	desc->slot_stride = rb->slot_stride;
	desc->device = (uint32_t)rb->gpu;
	mc_rocm_uuid_make(rb->props.Domain, rb->props.LocationId, rb->props.DeviceId,
			  desc->device_uuid);
}

static int rocm_host_range(struct rocm_backend *rb, const void *src, size_t len, bool writable,
			   const struct mc_gpu_range **out);

static void rocm_register_host_region(struct rocm_backend *rb)
{
	const struct mc_gpu_range *r;

	if (rb->g.params.host_base && rb->g.params.host_size)
		rocm_host_range(rb, rb->g.params.host_base, rb->g.params.host_size, false, &r);
}

static int rocm_bank_create(void *priv, struct moecache_bank *desc)
{
	struct rocm_backend *rb = priv;
	struct amdgpu_bo_alloc_request req = {0};
	struct amdgpu_heap_info heap = {0};
	uint32_t shared = 0;
	uint64_t stride, bytes;
	int gpu, ret;

	if (rb->bo || rb->bank_registered)
		return -EALREADY;
	ret = mc_gpu_bank_geometry(rb->g.cfg.expert_bytes, rb->g.cfg.n_slots, ROCM_SLOT_ALIGN,
				   &stride, &bytes);
	if (ret)
		return ret;
	if (bytes > UINT64_MAX - ROCM_BANK_ALIGN)
		return -EOVERFLOW;
	bytes = (bytes + ROCM_BANK_ALIGN - 1) & ~(uint64_t)(ROCM_BANK_ALIGN - 1);
	if (!rb->bound) {
		ret = rocm_pick_gpu(rb, bytes, &gpu);
		if (!ret)
			ret = rocm_bind(rb, gpu);
		if (ret)
			return ret;
	}
	rb->slot_stride = stride;
	rb->bank_bytes = bytes;
	ret = rb->drm.amdgpu_query_heap_info(rb->dev, AMDGPU_GEM_DOMAIN_VRAM, 0, &heap);
	if (!ret && (heap.heap_size - heap.heap_usage < bytes || heap.max_allocation < bytes)) {
		snprintf(rb->g.err, sizeof(rb->g.err),
			 "GPU %d has %" PRIu64 " MiB of VRAM free (largest BO %" PRIu64
			 " MiB): a bank of %" PRIu64 " MiB does not fit",
			 rb->gpu, (heap.heap_size - heap.heap_usage) >> 20,
			 heap.max_allocation >> 20, bytes >> 20);
		rocm_log_err(rb);
		return -ENOSPC;
	}
	if (rb->g.params.budget) {
		ret = mc_gpu_budget_reserve(rb->g.params.budget, (uint32_t)rb->gpu, bytes);
		if (ret) {
			snprintf(rb->g.err, sizeof(rb->g.err),
				 "a bank of %" PRIu64
				 " MiB exceeds what is left of GPU %d's budget",
				 bytes >> 20, rb->gpu);
			rocm_log_err(rb);
			return ret;
		}
		rb->budget_bytes = bytes;
	} else if (rb->g.params.device_budget && bytes > rb->g.params.device_budget) {
		snprintf(rb->g.err, sizeof(rb->g.err),
			 "a bank of %" PRIu64 " MiB exceeds the budget of %" PRIu64 " MiB",
			 bytes >> 20, rb->g.params.device_budget >> 20);
		rocm_log_err(rb);
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
		ret = rocm_drm_fail(rb, ret, "amdgpu_bo_alloc (the bank, VRAM)");
		goto err;
	}
	ret = rb->drm.amdgpu_bo_export(rb->bo, amdgpu_bo_handle_type_dma_buf_fd, &shared);
	if (ret) {
		ret = rocm_drm_fail(rb, ret, "amdgpu_bo_export (dma-buf)");
		goto err;
	}
	rb->bank_fd = (int)shared;
	ret = rocm_map_bank(rb, rb->bank_fd);
	if (ret)
		goto err;
	rocm_fill_desc(rb, desc);
	rocm_register_host_region(rb);
	return 0;
err:
	rocm_release_bank(rb);
	return ret;
}

static int rocm_bank_adopt(void *priv, const struct moecache_bank *desc)
{
	struct rocm_backend *rb = priv;
	uint32_t domain, location;
	uint16_t device_id;
	int gpu = -1, ret;

	if (rb->bo || rb->bank_registered)
		return -EALREADY;
	if (desc->backend != MOECACHE_BACKEND_ROCM || desc->fd < 0 || !desc->slot_stride ||
	    desc->slot_stride < rb->g.cfg.expert_bytes ||
	    rb->g.cfg.n_slots > desc->bank_bytes / desc->slot_stride ||
	    mc_rocm_uuid_parse(desc->device_uuid, &domain, &location, &device_id))
		return -EPROTO;
	/* GPU indexes may change across a restart: the PCI location does not. */
	for (uint32_t i = 0; i < rb->n_gpus; i++) {
		HsaNodeProperties props;

		if (rb->kmt.hsaKmtGetNodeProperties(rb->gpu_nodes[i], &props) ==
			HSAKMT_STATUS_SUCCESS &&
		    props.Domain == domain && props.LocationId == location)
			gpu = (int)i;
	}
	if (gpu < 0) {
		snprintf(rb->g.err, sizeof(rb->g.err),
			 "the bank lives on the GPU at PCI %04x:%02x:%02x.%x, which is not visible",
			 domain, location >> 8, (location >> 3) & 0x1f, location & 7);
		rocm_log_err(rb);
		return -EPROTO;
	}
	if (rb->bound && rb->gpu != gpu)
		return -EPROTO;
	if (!rb->bound) {
		ret = rocm_bind(rb, gpu);
		if (ret)
			return ret;
	}
	rb->bank_bytes = desc->bank_bytes;
	rb->slot_stride = desc->slot_stride;
	ret = rocm_map_bank(rb, desc->fd);
	if (ret) {
		rocm_release_bank(rb);
		return ret;
	}
	if (rb->g.params.budget) {
		if (mc_gpu_budget_reserve(rb->g.params.budget, (uint32_t)gpu, rb->bank_bytes))
			agent_logf(NULL, LOG_WARNING, agent_gpu_engine_pool(&rb->g),
				   "rocm: the adopted bank exceeds GPU %d's budget", gpu);
		else
			rb->budget_bytes = rb->bank_bytes;
	}
	rb->bank_fd = desc->fd;
	rocm_register_host_region(rb);
	return 0;
}

static void *rocm_slot(void *priv, uint32_t slot)
{
	return NULL; /* VRAM: not addressable from the host */
}

uint64_t agent_rocm_backend_slot_addr(void *priv, uint32_t slot)
{
	struct rocm_backend *rb = priv;

	if (!rb || !rb->bank_mapped || slot >= rb->g.cfg.n_slots)
		return 0;
	return rb->bank_va + (uint64_t)slot * rb->slot_stride;
}

int agent_rocm_backend_device(const void *priv)
{
	const struct rocm_backend *rb = priv;

	return rb && rb->bound ? rb->gpu : -1;
}

const char *agent_rocm_backend_error(const void *priv)
{
	const struct rocm_backend *rb = priv;

	return rb ? rb->g.err : "";
}

/*
 * The GPU address of host bytes: the mapping holding them is registered
 * (a userptr) and mapped to the GPU once. No fallback: SDMA reads only
 * memory mapped into its address space.
 */
static int rocm_host_range(struct rocm_backend *rb, const void *src, size_t len, bool writable,
			   const struct mc_gpu_range **out)
{
	HsaMemMapFlags mflags = {0};
	HSAuint64 va = 0;
	HSAKMT_STATUS st;
	uintptr_t start;
	size_t size;
	int ret;

	*out = mc_gpu_ranges_find(&rb->host, src, len);
	if (*out)
		return (*out)->registered ? 0 : -EFAULT;
	if (rb->g.params.host_base && (uintptr_t)src >= (uintptr_t)rb->g.params.host_base &&
	    (uintptr_t)src - (uintptr_t)rb->g.params.host_base + len <= rb->g.params.host_size) {
		start = (uintptr_t)rb->g.params.host_base;
		size = rb->g.params.host_size;
	} else if (mc_gpu_find_mapping(src, len, &start, &size)) {
		start = (uintptr_t)src;
		size = len;
	}
	st = rb->kmt.hsaKmtRegisterMemoryToNodes((void *)start, size, 1, &rb->node);
	if (st == HSAKMT_STATUS_SUCCESS) {
		mflags.ui32.ReadOnly = !writable;
		st = rb->kmt.hsaKmtMapMemoryToGPUNodes((void *)start, size, &va, mflags, 1,
						       &rb->node);
		if (st != HSAKMT_STATUS_SUCCESS)
			rb->kmt.hsaKmtDeregisterMemory((void *)start);
	}
	if (st != HSAKMT_STATUS_SUCCESS) {
		snprintf(rb->g.err, sizeof(rb->g.err),
			 "cannot register the host pages at %#" PRIxPTR " (%zu bytes) with the "
			 "GPU: %s (the agent must map them read-write for a userptr)",
			 start, size, mc_hsakmt_status_name(st));
		rocm_log_err(rb);
		mc_gpu_ranges_add(&rb->host, start, size, 0, false);
		return -EFAULT;
	}
	ret = mc_gpu_ranges_add(&rb->host, start, size, va ? va : start, true);
	if (ret) {
		rb->kmt.hsaKmtUnmapMemoryToGPU((void *)start);
		rb->kmt.hsaKmtDeregisterMemory((void *)start);
		return ret;
	}
	*out = &rb->host.items[rb->host.n - 1];
	return 0;
}

/* The queue with the fewest copies, prefetches off queue 0. */
static struct rocm_queue *rocm_pick_queue(struct rocm_backend *rb, uint32_t flags)
{
	uint32_t first = (flags & MOECACHE_FILL_PREFETCH) && rb->n_queues > 1 ? 1 : 0;
	struct rocm_queue *best = &rb->queues[first];

	for (uint32_t i = first + 1; i < rb->n_queues; i++)
		if (rb->queues[i].len < best->len)
			best = &rb->queues[i];
	return best;
}

static int rocm_copy(void *priv, const struct agent_copy *c)
{
	struct rocm_backend *rb = priv;
	struct rocm_copy rc = {.c = *c};
	const struct mc_gpu_range *range;
	uint64_t src, dst, first, off, size = rb->g.cfg.expert_bytes;
	uint32_t max_dw = rocm_copy_dwords(size), n = 0;
	struct rocm_queue *q;
	uint32_t *dw;
	int ret;

	if (!rb->bank_mapped || !c || c->slot >= rb->g.cfg.n_slots || !c->src)
		return -EINVAL;
	dw = malloc((size_t)max_dw * 4);
	if (!dw)
		return -ENOMEM;
	pthread_mutex_lock(&rb->g.eng.lock);
	ret = rocm_host_range(rb, c->src, size, false, &range);
	if (!ret)
		ret = agent_copy_queue_reserve(&rb->g.eng.done, rb->g.eng.inflight + 1);
	if (ret)
		goto out;
	src = range->device_addr + ((uintptr_t)c->src - range->start);
	dst = rb->bank_va + (uint64_t)c->slot * rb->slot_stride;
	q = rocm_pick_queue(rb, c->flags);
	first = size;
	if (rb->g.eng.copy_delay_us && size > 1) {
		/* Half, a fence, a wait on the gate word the completion thread opens, the rest. */
		first = size / 2;
		rc.gate_seq = ++q->seq;
		rc.gate_at_ns = mc_gpu_now_ns() + (uint64_t)rb->g.eng.copy_delay_us * 1000u;
		n += mc_sdma_copy(dw + n, max_dw - n, dst, src, first);
		n += mc_sdma_fence(dw + n, q->fence_gpu, rc.gate_seq, rb->fence_mtype);
		n += mc_sdma_poll_mem(dw + n, q->gate_gpu, rc.gate_seq, 0xffffffffu,
				      MC_SDMA_POLL_FUNC_EQUAL, 10, 0xfff);
	}
	off = first == size ? 0 : first;
	n += mc_sdma_copy(dw + n, max_dw - n, dst + off, src + off, size - off);
	rc.seq = ++q->seq;
	n += mc_sdma_fence(dw + n, q->fence_gpu, rc.seq, rb->fence_mtype);
	if (rb->event)
		n += mc_sdma_trap(dw + n, rb->event->EventId);
	ret = rocm_ring_submit(q, dw, n);
	if (ret) {
		snprintf(rb->g.err, sizeof(rb->g.err), "SDMA ring full (%u copies queued)", q->len);
		rocm_log_err(rb);
		q->seq -= rc.gate_seq ? 2 : 1;
		goto out;
	}
	rc.end = q->wptr;
	ret = rocm_queue_push(q, &rc);
	if (ret) {
		/* Submitted but untracked: wait for it so the slot is not reused under it. */
		if (rc.gate_seq)
			__atomic_store_n(q->gate, rc.gate_seq, __ATOMIC_RELEASE);
		while (!rocm_seq_reached(__atomic_load_n(q->fence, __ATOMIC_ACQUIRE), rc.seq)) {
			struct timespec ts = {.tv_sec = 0, .tv_nsec = 50000};

			nanosleep(&ts, NULL);
		}
		q->consumed = rc.end;
		goto out;
	}
	rb->g.eng.inflight++;
	pthread_cond_signal(&rb->g.eng.work);
out:
	pthread_mutex_unlock(&rb->g.eng.lock);
	free(dw);
	return ret;
}

int agent_rocm_backend_read_slot(void *priv, uint32_t slot, void *dst, uint64_t bytes)
{
	struct rocm_backend *rb = priv;
	const struct mc_gpu_range *range;
	uint32_t max_dw, n, seq;
	struct rocm_queue *q;
	uint64_t deadline, end;
	uint32_t *dw;
	int ret;

	if (!rb || !rb->bank_mapped || slot >= rb->g.cfg.n_slots || !dst || !bytes ||
	    bytes > rb->slot_stride)
		return -EINVAL;
	max_dw = mc_sdma_copy_dwords(bytes) + MC_SDMA_FENCE_DW;
	dw = malloc((size_t)max_dw * 4);
	if (!dw)
		return -ENOMEM;
	pthread_mutex_lock(&rb->g.eng.lock);
	q = &rb->queues[0];
	ret = rocm_host_range(rb, dst, bytes, true, &range);
	if (ret)
		goto unlock;
	n = mc_sdma_copy(dw, max_dw, range->device_addr + ((uintptr_t)dst - range->start),
			 rb->bank_va + (uint64_t)slot * rb->slot_stride, bytes);
	seq = ++q->seq;
	n += mc_sdma_fence(dw + n, q->fence_gpu, seq, rb->fence_mtype);
	ret = rocm_ring_submit(q, dw, n);
	if (ret)
		q->seq--;
	end = q->wptr;
unlock:
	pthread_mutex_unlock(&rb->g.eng.lock);
	free(dw);
	if (ret)
		return ret;
	deadline = mc_gpu_now_ns() + 10000000000ull;
	while (!rocm_seq_reached(__atomic_load_n(q->fence, __ATOMIC_ACQUIRE), seq)) {
		struct timespec ts = {.tv_sec = 0, .tv_nsec = 50000};

		if (mc_gpu_now_ns() > deadline)
			return -ETIMEDOUT;
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&rb->g.eng.lock);
	/* No copy after it to move the ring's consumed mark: move it here. */
	if (!q->len && (int64_t)(end - q->consumed) > 0)
		q->consumed = end;
	pthread_mutex_unlock(&rb->g.eng.lock);
	return 0;
}

const struct agent_backend_ops agent_rocm_backend = {
    .name = "rocm",
    .id = MOECACHE_BACKEND_ROCM,
    .create = rocm_create,
    .destroy = rocm_destroy,
    .bank_create = rocm_bank_create,
    .bank_adopt = rocm_bank_adopt,
    .slot = rocm_slot,
    .copy = rocm_copy,
    .completion_fd = agent_copy_engine_completion_fd,
    .completions = agent_copy_engine_completions,
    .inflight = agent_copy_engine_inflight,
    .set_delay = agent_copy_engine_set_delay,
};
