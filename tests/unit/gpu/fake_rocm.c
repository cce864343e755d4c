// SPDX-License-Identifier: MIT
/*
 * A stand-in for libhsakmt.so.1 and libdrm_amdgpu.so.1 (one library
 * exporting both), loaded by the unit tests through MOECACHE_LIBHSAKMT and
 * MOECACHE_LIBDRM_AMDGPU. The topology of a machine with a fast GPU for
 * the hot experts and eight slower ones for the cold: node 0 is the CPU,
 * node 1 a gfx1100 (W7800, GPU 0, at 0000:03:00.0, renderD128; GFX11
 * unless FAKE_ROCM_GFX says otherwise), nodes 2-9 gfx1030s (V620, GPUs
 * 1-8, at 0000:1N:00.0, renderD129-136). Every GPU has a PCIe link to the
 * CPU. Peer links (IO links between GPU nodes; libhsakmt lists the KFD's
 * p2p_links among NumIOLinks): GPUs 0-4 behind one switch reach each
 * other, GPUs 5-8 behind another reach each other; GPU 0 has a link to
 * GPU 5 flagged NoPeerToPeerDMA (a link the platform forbids DMA over);
 * no other pair has a link. VRAM BOs are memfds, dma-bufs their dups,
 * and GPU virtual addresses are the process's own addresses, so SDMA
 * packets can be executed on the host: each SDMA queue is a thread that
 * follows the doorbell and decodes COPY_LINEAR, FENCE, TRAP, POLL_REGMEM
 * and NOP from the packet layouts of the Linux amdgpu headers
 * (navi10_sdma_pkt_open.h), independently of agent/copy/sdma.c. A packet
 * that runs past the end of the ring, or an unknown opcode, stops the
 * queue and is counted (fake_rocm_live().bad_packets).
 *
 *   FAKE_ROCM_GFX=N        GPU 0's GFX major version (default 11)
 *   FAKE_ROCM_GPUS=N       only the first N GPUs exist (default 9)
 *   FAKE_ROCM_SDMA_US=N    each COPY_LINEAR takes N microseconds
 *   FAKE_ROCM_NO_EVENTS=1  hsaKmtCreateEvent fails (completions are polled)
 *   FAKE_ROCM_VGEM=NODE    VRAM BOs are dumb buffers of the vgem device NODE
 *                          (/dev/dri/cardN) and their fds real dma-bufs, which
 *                          the driver's BANK_SET of a ROCm bank requires (the
 *                          VM tests: a ROCm pool served by moecached)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <sys/ioctl.h>

#include <amdgpu.h>
#include <drm.h>
#include <drm_mode.h>
#include <amdgpu_drm.h>
#include <hsakmt.h>

struct fake_rocm_counts {
	int queues, events, allocations, registrations, mappings, bos, va_ranges, devices;
	int bad_packets;
	uint64_t copies;
};

static struct fake_rocm_counts fake_live;
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

void fake_rocm_live(struct fake_rocm_counts *out);
void fake_rocm_live(struct fake_rocm_counts *out)
{
	pthread_mutex_lock(&fake_lock);
	*out = fake_live;
	pthread_mutex_unlock(&fake_lock);
}

static void fake_count(int *counter, int delta)
{
	pthread_mutex_lock(&fake_lock);
	*counter += delta;
	pthread_mutex_unlock(&fake_lock);
}

static int fake_env_int(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : dflt;
}

/* ---- KFD ---- */

HSAKMT_STATUS HSAKMTAPI hsaKmtOpenKFD(void)
{
	return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtCloseKFD(void)
{
	return HSAKMT_STATUS_SUCCESS;
}

#define FAKE_MAX_GPUS 9

static uint32_t fake_gpus(void)
{
	int n = fake_env_int("FAKE_ROCM_GPUS", FAKE_MAX_GPUS);

	return n < 0 ? 0 : n > FAKE_MAX_GPUS ? FAKE_MAX_GPUS : (uint32_t)n;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtAcquireSystemProperties(HsaSystemProperties *p)
{
	memset(p, 0, sizeof(*p));
	p->NumNodes = 1 + fake_gpus();
	return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtReleaseSystemProperties(void)
{
	return HSAKMT_STATUS_SUCCESS;
}

/* The switch a GPU sits behind (GPU index = node - 1). */
static int fake_switch(uint32_t gpu)
{
	return gpu <= 4 ? 0 : 1;
}

/*
 * The IO links of a node, into out (may be NULL); returns how many. A GPU:
 * the CPU, then the GPUs behind its switch, then the forbidden link 0-5.
 */
static uint32_t fake_links(uint32_t node, HsaIoLinkProperties *out)
{
	uint32_t n = 0, gpus = fake_gpus();
	HsaIoLinkProperties l;

	if (node == 0 || node > gpus)
		return 0;
	memset(&l, 0, sizeof(l));
	l.IoLinkType = HSA_IOLINKTYPE_PCIEXPRESS;
	l.NodeFrom = node;
	l.NodeTo = 0;
	l.Weight = 20;
	if (out)
		out[n] = l;
	n++;
	for (uint32_t peer = 1; peer <= gpus; peer++) {
		bool same = fake_switch(peer - 1) == fake_switch(node - 1);
		bool forbidden = (node == 1 && peer == 6) || (node == 6 && peer == 1);

		if (peer == node || (!same && !forbidden))
			continue;
		l.NodeTo = peer;
		l.Weight = same ? 15 : 40;
		l.Flags.LinkProperty = 0;
		l.Flags.ui32.Override = 1;
		l.Flags.ui32.NoPeerToPeerDMA = forbidden;
		if (out)
			out[n] = l;
		n++;
	}
	return n;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtGetNodeProperties(HSAuint32 node, HsaNodeProperties *p)
{
	uint32_t gpu = node - 1;

	if (node > fake_gpus())
		return HSAKMT_STATUS_INVALID_NODE_UNIT;
	memset(p, 0, sizeof(*p));
	if (node == 0) {
		p->NumCPUCores = 4;
		return HSAKMT_STATUS_SUCCESS;
	}
	p->NumFComputeCores = gpu ? 72 : 96;
	p->EngineId.ui32.Major = gpu ? 10 : (unsigned int)fake_env_int("FAKE_ROCM_GFX", 11);
	p->EngineId.ui32.Minor = gpu ? 3 : 0;
	p->VendorId = 0x1002;
	p->DeviceId = gpu ? 0x73a1 : 0x744c;
	p->Domain = 0;
	p->LocationId = (gpu ? 0x10 + gpu : 0x03) << 8;
	p->DrmRenderMinor = 128 + (int)gpu;
	p->LocalMemSize = 32ull << 30;
	p->NumSdmaEngines = 2;
	p->NumIOLinks = fake_links(node, NULL);
	return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtGetNodeIoLinkProperties(HSAuint32 node, HSAuint32 n,
						      HsaIoLinkProperties *props)
{
	HsaIoLinkProperties all[FAKE_MAX_GPUS + 1];
	uint32_t have;

	if (node > fake_gpus())
		return HSAKMT_STATUS_INVALID_NODE_UNIT;
	have = fake_links(node, all);
	if (n > have)
		return HSAKMT_STATUS_INVALID_PARAMETER;
	memcpy(props, all, n * sizeof(*props));
	return HSAKMT_STATUS_SUCCESS;
}

/* Host memory of the thunk: the GPU sees it at the same address. */
HSAKMT_STATUS HSAKMTAPI hsaKmtAllocMemory(HSAuint32 node, HSAuint64 size, HsaMemFlags flags,
					  void **addr)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return HSAKMT_STATUS_NO_MEMORY;
	*addr = p;
	fake_count(&fake_live.allocations, 1);
	return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtFreeMemory(void *addr, HSAuint64 size)
{
	munmap(addr, size);
	fake_count(&fake_live.allocations, -1);
	return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtRegisterMemoryToNodes(void *addr, HSAuint64 size, HSAuint64 n,
						    HSAuint32 *nodes)
{
	fake_count(&fake_live.registrations, 1);
	return HSAKMT_STATUS_SUCCESS;
}

/* Imported dma-bufs, mapped into this process at their "GPU" address. */
#define FAKE_MAX_IMPORTS 32
static struct {
	void *addr;
	size_t size;
} fake_imports[FAKE_MAX_IMPORTS];

HSAKMT_STATUS HSAKMTAPI hsaKmtRegisterGraphicsHandleToNodes(HSAuint64 handle,
							    HsaGraphicsResourceInfo *info,
							    HSAuint64 n, HSAuint32 *nodes)
{
	int fd = (int)handle;
	off_t size = lseek(fd, 0, SEEK_END);
	void *p;

	if (size <= 0)
		return HSAKMT_STATUS_INVALID_HANDLE;
	p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return HSAKMT_STATUS_INVALID_HANDLE;
	pthread_mutex_lock(&fake_lock);
	for (int i = 0; i < FAKE_MAX_IMPORTS; i++) {
		if (!fake_imports[i].addr) {
			fake_imports[i].addr = p;
			fake_imports[i].size = (size_t)size;
			break;
		}
	}
	fake_live.registrations++;
	pthread_mutex_unlock(&fake_lock);
	memset(info, 0, sizeof(*info));
	info->MemoryAddress = p;
	info->SizeInBytes = (HSAuint64)size;
	return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtDeregisterMemory(void *addr)
{
	pthread_mutex_lock(&fake_lock);
	for (int i = 0; i < FAKE_MAX_IMPORTS; i++) {
		if (fake_imports[i].addr == addr) {
			munmap(addr, fake_imports[i].size);
			fake_imports[i].addr = NULL;
		}
	}
	fake_live.registrations--;
	pthread_mutex_unlock(&fake_lock);
	return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtMapMemoryToGPUNodes(void *addr, HSAuint64 size, HSAuint64 *gpu_va,
						  HsaMemMapFlags flags, HSAuint64 n,
						  HSAuint32 *nodes)
{
	*gpu_va = (HSAuint64)(uintptr_t)addr;
	fake_count(&fake_live.mappings, 1);
	return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtUnmapMemoryToGPU(void *addr)
{
	fake_count(&fake_live.mappings, -1);
	return HSAKMT_STATUS_SUCCESS;
}

/* ---- events ---- */

struct fake_event {
	HsaEvent ev; /* first: the caller holds a pointer to it */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool signaled;
	bool used;
};

#define FAKE_MAX_EVENTS 16
static struct fake_event fake_events[FAKE_MAX_EVENTS];

HSAKMT_STATUS HSAKMTAPI hsaKmtCreateEvent(HsaEventDescriptor *desc, bool manual_reset,
					  bool signaled, HsaEvent **event)
{
	if (fake_env_int("FAKE_ROCM_NO_EVENTS", 0))
		return HSAKMT_STATUS_NO_MEMORY;
	pthread_mutex_lock(&fake_lock);
	for (int i = 0; i < FAKE_MAX_EVENTS; i++) {
		struct fake_event *e = &fake_events[i];

		if (e->used)
			continue;
		memset(e, 0, sizeof(*e));
		e->used = true;
		e->ev.EventId = 100 + (HSA_EVENTID)i;
		pthread_mutex_init(&e->lock, NULL);
		pthread_cond_init(&e->cond, NULL);
		*event = &e->ev;
		fake_live.events++;
		pthread_mutex_unlock(&fake_lock);
		return HSAKMT_STATUS_SUCCESS;
	}
	pthread_mutex_unlock(&fake_lock);
	return HSAKMT_STATUS_NO_MEMORY;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtDestroyEvent(HsaEvent *event)
{
	struct fake_event *e = (struct fake_event *)event;

	pthread_mutex_lock(&fake_lock);
	e->used = false;
	fake_live.events--;
	pthread_mutex_unlock(&fake_lock);
	return HSAKMT_STATUS_SUCCESS;
}

static void fake_signal(uint32_t id)
{
	for (int i = 0; i < FAKE_MAX_EVENTS; i++) {
		struct fake_event *e = &fake_events[i];

		if (e->used && e->ev.EventId == id) {
			pthread_mutex_lock(&e->lock);
			e->signaled = true;
			pthread_cond_broadcast(&e->cond);
			pthread_mutex_unlock(&e->lock);
		}
	}
}

HSAKMT_STATUS HSAKMTAPI hsaKmtWaitOnEvent(HsaEvent *event, HSAuint32 ms)
{
	struct fake_event *e = (struct fake_event *)event;
	struct timespec until;
	HSAKMT_STATUS st = HSAKMT_STATUS_SUCCESS;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += (long)ms * 1000000L;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&e->lock);
	while (!e->signaled && st == HSAKMT_STATUS_SUCCESS)
		if (pthread_cond_timedwait(&e->cond, &e->lock, &until))
			st = HSAKMT_STATUS_WAIT_TIMEOUT;
	e->signaled = false; /* auto reset */
	pthread_mutex_unlock(&e->lock);
	return st;
}

/* ---- SDMA queues, executed on the host ---- */

struct fake_queue {
	uint64_t rptr, wptr, doorbell; /* bytes, monotonic */
	uint32_t *ring;
	uint64_t size;
	pthread_t thread;
	bool stop;
};

static bool fake_poll_ok(uint32_t v, uint32_t ref, uint32_t func)
{
	switch (func) {
	case 0:
		return true;
	case 1:
		return v < ref;
	case 2:
		return v <= ref;
	case 3:
		return v == ref;
	case 4:
		return v != ref;
	case 5:
		return v >= ref;
	case 6:
		return v > ref;
	default:
		return false;
	}
}

static uint64_t fake_addr(uint32_t lo, uint32_t hi)
{
	return (uint64_t)lo | (uint64_t)hi << 32;
}

/* Executes the packet at q->rptr; returns its size in bytes, 0 for a bad one. */
static uint64_t fake_execute(struct fake_queue *q)
{
	uint64_t off = q->rptr & (q->size - 1);
	const uint32_t *dw = q->ring + off / 4;
	uint32_t op = dw[0] & 0xff, sub_op = (dw[0] >> 8) & 0xff;
	uint64_t len;

	switch (op) {
	case 0: /* NOP: count 29:16 more dwords */
		len = 4 * (1 + ((dw[0] >> 16) & 0x3fff));
		break;
	case 1: /* COPY, LINEAR: count 21:0 is bytes - 1 */
		len = 28;
		break;
	case 5: /* FENCE */
		len = 16;
		break;
	case 6: /* TRAP */
		len = 8;
		break;
	case 8: /* POLL_REGMEM */
		len = 24;
		break;
	default:
		return 0;
	}
	if (off + len > q->size)
		return 0; /* a packet across the end of the ring */
	if (op == 1) {
		int us = fake_env_int("FAKE_ROCM_SDMA_US", 0);

		if (sub_op != 0)
			return 0;
		if (us > 0)
			usleep((useconds_t)us);
		memcpy((void *)(uintptr_t)fake_addr(dw[5], dw[6]),
		       (const void *)(uintptr_t)fake_addr(dw[3], dw[4]), (dw[1] & 0x3fffff) + 1);
		pthread_mutex_lock(&fake_lock);
		fake_live.copies++;
		pthread_mutex_unlock(&fake_lock);
	} else if (op == 5) {
		__atomic_store_n((uint32_t *)(uintptr_t)fake_addr(dw[1], dw[2]), dw[3],
				 __ATOMIC_RELEASE);
	} else if (op == 6) {
		fake_signal(dw[1] & 0x0fffffff);
	} else if (op == 8) {
		const uint32_t *p = (const uint32_t *)(uintptr_t)fake_addr(dw[1], dw[2]);

		if (!(dw[0] >> 31))
			return 0; /* register polls are not for user queues */
		while (!fake_poll_ok(__atomic_load_n(p, __ATOMIC_ACQUIRE) & dw[4], dw[3],
				     (dw[0] >> 28) & 7) &&
		       !__atomic_load_n(&q->stop, __ATOMIC_ACQUIRE))
			usleep(10);
	}
	return len;
}

static void *fake_queue_thread(void *arg)
{
	struct fake_queue *q = arg;

	while (!__atomic_load_n(&q->stop, __ATOMIC_ACQUIRE)) {
		uint64_t bell = __atomic_load_n(&q->doorbell, __ATOMIC_ACQUIRE);

		if (q->rptr == bell) {
			usleep(20);
			continue;
		}
		while (q->rptr < bell) {
			uint64_t len = fake_execute(q);

			if (!len) {
				pthread_mutex_lock(&fake_lock);
				fake_live.bad_packets++;
				pthread_mutex_unlock(&fake_lock);
				return NULL; /* a hung engine: nothing after it runs */
			}
			__atomic_store_n(&q->rptr, q->rptr + len, __ATOMIC_RELEASE);
		}
	}
	return NULL;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtCreateQueue(HSAuint32 node, HSA_QUEUE_TYPE type, HSAuint32 pct,
					  HSA_QUEUE_PRIORITY prio, void *ring, HSAuint64 size,
					  HsaEvent *event, HsaQueueResource *res)
{
	struct fake_queue *q;

	if (type != HSA_QUEUE_SDMA || !ring || size < 1024 || (size & (size - 1)))
		return HSAKMT_STATUS_INVALID_PARAMETER;
	q = calloc(1, sizeof(*q));
	if (!q)
		return HSAKMT_STATUS_NO_MEMORY;
	q->ring = ring;
	q->size = size;
	if (pthread_create(&q->thread, NULL, fake_queue_thread, q)) {
		free(q);
		return HSAKMT_STATUS_NO_MEMORY;
	}
	memset(res, 0, sizeof(*res));
	res->QueueId = (HSA_QUEUEID)(uintptr_t)q;
	res->Queue_DoorBell_aql = &q->doorbell;
	res->Queue_write_ptr_aql = &q->wptr;
	res->Queue_read_ptr_aql = &q->rptr;
	fake_count(&fake_live.queues, 1);
	return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtDestroyQueue(HSA_QUEUEID id)
{
	struct fake_queue *q = (struct fake_queue *)(uintptr_t)id;

	__atomic_store_n(&q->stop, true, __ATOMIC_RELEASE);
	pthread_join(q->thread, NULL);
	free(q);
	fake_count(&fake_live.queues, -1);
	return HSAKMT_STATUS_SUCCESS;
}

/* ---- libdrm_amdgpu ---- */

struct amdgpu_device {
	int fd;
};

struct amdgpu_bo {
	int memfd;
	uint64_t size;
};

struct amdgpu_va {
	uint64_t addr, size;
};

int amdgpu_device_initialize(int fd, uint32_t *major, uint32_t *minor, amdgpu_device_handle *dev)
{
	*dev = calloc(1, sizeof(**dev));
	if (!*dev)
		return -ENOMEM;
	(*dev)->fd = fd;
	*major = 3;
	*minor = 49;
	fake_count(&fake_live.devices, 1);
	return 0;
}

int amdgpu_device_deinitialize(amdgpu_device_handle dev)
{
	free(dev);
	fake_count(&fake_live.devices, -1);
	return 0;
}

int amdgpu_query_heap_info(amdgpu_device_handle dev, uint32_t heap, uint32_t flags,
			   struct amdgpu_heap_info *info)
{
	memset(info, 0, sizeof(*info));
	info->heap_size = 16ull << 30;
	info->max_allocation = 12ull << 30;
	return 0;
}

int amdgpu_query_gpu_info(amdgpu_device_handle dev, struct amdgpu_gpu_info *info)
{
	memset(info, 0, sizeof(*info));
	return 0;
}

/* A dma-buf of at least size bytes: a vgem dumb buffer exported by PRIME. */
static int fake_vgem_dmabuf(const char *node, uint64_t size)
{
	struct drm_mode_create_dumb dumb = {.width = 4096, .bpp = 8};
	struct drm_prime_handle prime = {.flags = DRM_CLOEXEC | DRM_RDWR};
	struct drm_gem_close gem_close = {0};
	int card, ret;

	dumb.height = (uint32_t)((size + 4095) / 4096);
	card = open(node, O_RDWR | O_CLOEXEC);
	if (card < 0)
		return -errno;
	ret = ioctl(card, DRM_IOCTL_MODE_CREATE_DUMB, &dumb) ? -errno : 0;
	if (!ret) {
		prime.handle = dumb.handle;
		ret = ioctl(card, DRM_IOCTL_PRIME_HANDLE_TO_FD, &prime) ? -errno : prime.fd;
		gem_close.handle = dumb.handle;
		ioctl(card, DRM_IOCTL_GEM_CLOSE, &gem_close);
	}
	close(card);
	return ret;
}

int amdgpu_bo_alloc(amdgpu_device_handle dev, struct amdgpu_bo_alloc_request *req,
		    amdgpu_bo_handle *out)
{
	struct amdgpu_bo *bo = calloc(1, sizeof(*bo));
	const char *vgem = getenv("FAKE_ROCM_VGEM");

	if (!bo || req->preferred_heap != AMDGPU_GEM_DOMAIN_VRAM)
		goto fail;
	if (vgem && *vgem) {
		bo->memfd = fake_vgem_dmabuf(vgem, req->alloc_size);
		if (bo->memfd < 0)
			goto fail;
	} else {
		bo->memfd = memfd_create("fake-vram", MFD_CLOEXEC);
		if (bo->memfd < 0 || ftruncate(bo->memfd, (off_t)req->alloc_size))
			goto fail;
	}
	bo->size = req->alloc_size;
	*out = bo;
	fake_count(&fake_live.bos, 1);
	return 0;
fail:
	if (bo && bo->memfd > 0)
		close(bo->memfd);
	free(bo);
	return -ENOMEM;
}

int amdgpu_bo_export(amdgpu_bo_handle bo, enum amdgpu_bo_handle_type type, uint32_t *shared)
{
	int fd;

	if (type != amdgpu_bo_handle_type_dma_buf_fd)
		return -EINVAL;
	fd = fcntl(bo->memfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	*shared = (uint32_t)fd;
	return 0;
}

int amdgpu_bo_import(amdgpu_device_handle dev, enum amdgpu_bo_handle_type type, uint32_t shared,
		     struct amdgpu_bo_import_result *res)
{
	struct amdgpu_bo *bo;
	off_t size;

	if (type != amdgpu_bo_handle_type_dma_buf_fd)
		return -EINVAL;
	size = lseek((int)shared, 0, SEEK_END);
	if (size <= 0)
		return -EINVAL;
	bo = calloc(1, sizeof(*bo));
	if (!bo)
		return -ENOMEM;
	bo->memfd = fcntl((int)shared, F_DUPFD_CLOEXEC, 0);
	bo->size = (uint64_t)size;
	res->buf_handle = bo;
	res->alloc_size = bo->size;
	fake_count(&fake_live.bos, 1);
	return 0;
}

int amdgpu_bo_free(amdgpu_bo_handle bo)
{
	close(bo->memfd);
	free(bo);
	fake_count(&fake_live.bos, -1);
	return 0;
}

int amdgpu_va_range_alloc(amdgpu_device_handle dev, enum amdgpu_gpu_va_range type, uint64_t size,
			  uint64_t align, uint64_t required, uint64_t *va, amdgpu_va_handle *handle,
			  uint64_t flags)
{
	struct amdgpu_va *v = calloc(1, sizeof(*v));
	void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (!v || p == MAP_FAILED) {
		free(v);
		return -ENOMEM;
	}
	v->addr = (uintptr_t)p;
	v->size = size;
	*va = v->addr;
	*handle = v;
	fake_count(&fake_live.va_ranges, 1);
	return 0;
}

int amdgpu_va_range_free(amdgpu_va_handle v)
{
	munmap((void *)(uintptr_t)v->addr, v->size);
	free(v);
	fake_count(&fake_live.va_ranges, -1);
	return 0;
}

/* The page flags of the last AMDGPU_VA_OP_MAP (fake_rocm_va_flags()). */
static uint64_t fake_va_flags;

uint64_t fake_rocm_va_flags(void);
uint64_t fake_rocm_va_flags(void)
{
	return __atomic_load_n(&fake_va_flags, __ATOMIC_ACQUIRE);
}

/* The GPU VA is a host address: mapped with the page flags asked for. */
int amdgpu_bo_va_op_raw(amdgpu_device_handle dev, amdgpu_bo_handle bo, uint64_t offset,
			uint64_t size, uint64_t addr, uint64_t flags, uint32_t ops)
{
	int prot = 0;
	void *p;

	(void)dev;
	if (ops == AMDGPU_VA_OP_MAP) {
		__atomic_store_n(&fake_va_flags, flags, __ATOMIC_RELEASE);
		if (flags & AMDGPU_VM_PAGE_READABLE)
			prot |= PROT_READ;
		if (flags & AMDGPU_VM_PAGE_WRITEABLE)
			prot |= PROT_WRITE;
		p = mmap((void *)(uintptr_t)addr, size, prot, MAP_SHARED | MAP_FIXED, bo->memfd,
			 (off_t)offset);
	} else {
		p = mmap((void *)(uintptr_t)addr, size, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	}
	return p == MAP_FAILED ? -errno : 0;
}

/* As libdrm's: readable, writeable and executable. */
int amdgpu_bo_va_op(amdgpu_bo_handle bo, uint64_t offset, uint64_t size, uint64_t addr,
		    uint64_t flags, uint32_t ops)
{
	(void)flags;
	return amdgpu_bo_va_op_raw(
	    NULL, bo, offset, size, addr,
	    AMDGPU_VM_PAGE_READABLE | AMDGPU_VM_PAGE_WRITEABLE | AMDGPU_VM_PAGE_EXECUTABLE, ops);
}
