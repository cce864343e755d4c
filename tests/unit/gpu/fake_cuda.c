// SPDX-License-Identifier: MIT
/*
 * A stand-in for libcuda.so.1 on machines without a GPU, loaded by the
 * unit tests through MOECACHE_LIBCUDA. "Device memory" is host memory:
 * cuMemCreate makes a memfd, cuMemMap maps it at the reserved address,
 * the exported handle is a dup of the memfd, so an import in another
 * process sees the same bytes. Each stream is a thread that runs its
 * copies and event records in order, so completions really are
 * asynchronous. The environment steers it:
 *
 *   FAKE_CUDA_DEVICES=N        devices (default 1; 0: CUDA_ERROR_NO_DEVICE)
 *   FAKE_CUDA_STUB=1           cuInit answers CUDA_ERROR_STUB_LIBRARY
 *   FAKE_CUDA_NO_VMM=1         no virtual memory management support
 *   FAKE_CUDA_FAIL=NAME        that entry point fails with out of memory
 *   FAKE_CUDA_ASYNC_FAIL=1     copies fail on the stream (events report it)
 *   FAKE_CUDA_COPY_US=N        each copy takes N microseconds on its stream
 *   FAKE_CUDA_CAPTURING=1      every stream is capturing a graph
 *   FAKE_CUDA_PEER_GROUP=N     devices d and e can access each other's memory
 *                              when d / N == e / N (default 2: 0-1, 2-3, ...;
 *                              0: no peer access at all)
 *
 * Memory knows the device it lives on: cuMemSetAccess for another device
 * fails unless cuDeviceCanAccessPeer says that device can reach it, as a
 * peer mapping fails on hardware without peer access.
 *
 * fake_cuda_live() tells the tests how many allocations, mappings,
 * registrations, streams and events are alive.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/gpu/cuda_api.h"

#define FAKE_GRANULARITY (2u << 20)
#define FAKE_MAX_DEVICES 8

/* What the fake counts as alive, for leak tests. */
struct fake_cuda_counts {
	int allocations; /* cuMemCreate/import handles not released */
	int mappings;	 /* cuMemMap not unmapped */
	int reservations;
	int registrations;
	int streams;
	int events;
	int contexts; /* primary context retains */
};

static struct fake_cuda_counts fake_live;
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread cu_context fake_current;

struct cu_ctx_opaque {
	int device;
};
static struct cu_ctx_opaque fake_ctx[FAKE_MAX_DEVICES];

struct fake_handle {
	int memfd;
	size_t size;
	int device; /* where the memory lives */
};

/* Allocations by the inode of their memfd: an import finds the device of an export. */
#define FAKE_MAX_ALLOCS 256
static struct {
	ino_t ino;
	int device;
} fake_allocs[FAKE_MAX_ALLOCS];

/* Mappings by address: cuMemSetAccess finds the memory's device. */
#define FAKE_MAX_MAPS 256
static struct {
	uintptr_t base;
	size_t size;
	int device;
} fake_maps[FAKE_MAX_MAPS];

struct cu_event_opaque {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned long recorded, reached; /* record count, and how many were reached */
	cu_result status;
};

enum fake_op_kind { FAKE_OP_COPY, FAKE_OP_EVENT };

struct fake_op {
	enum fake_op_kind kind;
	void *dst;
	const void *src;
	size_t bytes;
	cu_event event;
	unsigned long record;
	struct fake_op *next;
};

struct cu_stream_opaque {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fake_op *head, *tail;
	bool busy, stop;
	cu_result sticky;
};

static void fake_count(int *counter, int delta)
{
	pthread_mutex_lock(&fake_lock);
	*counter += delta;
	pthread_mutex_unlock(&fake_lock);
}

void fake_cuda_live(struct fake_cuda_counts *out);
void fake_cuda_live(struct fake_cuda_counts *out)
{
	pthread_mutex_lock(&fake_lock);
	*out = fake_live;
	pthread_mutex_unlock(&fake_lock);
}

static bool fake_env(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0");
}

static bool fake_fails(const char *fn)
{
	const char *v = getenv("FAKE_CUDA_FAIL");

	return v && !strcmp(v, fn);
}

static int fake_devices(void)
{
	const char *v = getenv("FAKE_CUDA_DEVICES");
	int n = v ? atoi(v) : 1;

	return n < 0 ? 0 : n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n;
}

#define FAKE_CHECK(fn)                                                                             \
	do {                                                                                       \
		if (fake_fails(fn))                                                                \
			return MC_CU_ERROR_OUT_OF_MEMORY;                                          \
	} while (0)

cu_result cuInit(unsigned int flags);
cu_result cuInit(unsigned int flags)
{
	FAKE_CHECK("cuInit");
	if (fake_env("FAKE_CUDA_STUB"))
		return MC_CU_ERROR_STUB_LIBRARY;
	return fake_devices() ? MC_CU_SUCCESS : MC_CU_ERROR_NO_DEVICE;
}

cu_result cuDriverGetVersion(int *version);
cu_result cuDriverGetVersion(int *version)
{
	*version = 13000;
	return MC_CU_SUCCESS;
}

static const char *fake_error_name(cu_result e)
{
	switch (e) {
	case MC_CU_SUCCESS:
		return "CUDA_SUCCESS";
	case MC_CU_ERROR_INVALID_VALUE:
		return "CUDA_ERROR_INVALID_VALUE";
	case MC_CU_ERROR_OUT_OF_MEMORY:
		return "CUDA_ERROR_OUT_OF_MEMORY";
	case MC_CU_ERROR_NO_DEVICE:
		return "CUDA_ERROR_NO_DEVICE";
	case MC_CU_ERROR_NOT_READY:
		return "CUDA_ERROR_NOT_READY";
	case MC_CU_ERROR_ILLEGAL_ADDRESS:
		return "CUDA_ERROR_ILLEGAL_ADDRESS";
	default:
		return NULL;
	}
}

cu_result cuGetErrorName(cu_result error, const char **str);
cu_result cuGetErrorName(cu_result error, const char **str)
{
	*str = fake_error_name(error);
	return *str ? MC_CU_SUCCESS : MC_CU_ERROR_INVALID_VALUE;
}

cu_result cuGetErrorString(cu_result error, const char **str);
cu_result cuGetErrorString(cu_result error, const char **str)
{
	*str = fake_error_name(error) ? "fake driver error" : NULL;
	return *str ? MC_CU_SUCCESS : MC_CU_ERROR_INVALID_VALUE;
}

cu_result cuDeviceGetCount(int *count);
cu_result cuDeviceGetCount(int *count)
{
	*count = fake_devices();
	return MC_CU_SUCCESS;
}

cu_result cuDeviceGet(cu_device *device, int ordinal);
cu_result cuDeviceGet(cu_device *device, int ordinal)
{
	if (ordinal < 0 || ordinal >= fake_devices())
		return MC_CU_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return MC_CU_SUCCESS;
}

cu_result cuDeviceGetName(char *name, int len, cu_device dev);
cu_result cuDeviceGetName(char *name, int len, cu_device dev)
{
	snprintf(name, (size_t)len, "Fake GPU %d", dev);
	return MC_CU_SUCCESS;
}

cu_result cuDeviceGetUuid_v2(cu_uuid *uuid, cu_device dev);
cu_result cuDeviceGetUuid_v2(cu_uuid *uuid, cu_device dev)
{
	for (int i = 0; i < 16; i++)
		uuid->bytes[i] = (char)(0xd0 + dev + i);
	return MC_CU_SUCCESS;
}

cu_result cuDeviceGetAttribute(int *value, cu_device_attribute attrib, cu_device dev);
cu_result cuDeviceGetAttribute(int *value, cu_device_attribute attrib, cu_device dev)
{
	switch (attrib) {
	case MC_CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
	case MC_CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
		*value = !fake_env("FAKE_CUDA_NO_VMM");
		break;
	case MC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		*value = 9;
		break;
	case MC_CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
		*value = 2;
		break;
	default:
		*value = 1;
	}
	return MC_CU_SUCCESS;
}

static int fake_peer_group(void)
{
	const char *v = getenv("FAKE_CUDA_PEER_GROUP");

	return v && *v ? atoi(v) : 2;
}

cu_result cuDeviceCanAccessPeer(int *can, cu_device dev, cu_device peer);
cu_result cuDeviceCanAccessPeer(int *can, cu_device dev, cu_device peer)
{
	int group = fake_peer_group();

	if (dev < 0 || dev >= fake_devices() || peer < 0 || peer >= fake_devices())
		return MC_CU_ERROR_INVALID_DEVICE;
	*can = dev != peer && group > 0 && dev / group == peer / group;
	return MC_CU_SUCCESS;
}

/* Can a mapping for device accessor reach memory on device owner? */
static bool fake_reaches(int accessor, int owner)
{
	int can = 0;

	return accessor == owner || (cuDeviceCanAccessPeer(&can, accessor, owner) == MC_CU_SUCCESS &&
				     can);
}

static void fake_alloc_note(int memfd, int device)
{
	struct stat st;

	if (fstat(memfd, &st))
		return;
	pthread_mutex_lock(&fake_lock);
	for (int i = 0; i < FAKE_MAX_ALLOCS; i++) {
		if (!fake_allocs[i].ino || fake_allocs[i].ino == st.st_ino) {
			fake_allocs[i].ino = st.st_ino;
			fake_allocs[i].device = device;
			break;
		}
	}
	pthread_mutex_unlock(&fake_lock);
}

static int fake_alloc_device(int memfd)
{
	struct stat st;
	int device = 0;

	if (fstat(memfd, &st))
		return 0;
	pthread_mutex_lock(&fake_lock);
	for (int i = 0; i < FAKE_MAX_ALLOCS; i++)
		if (fake_allocs[i].ino == st.st_ino)
			device = fake_allocs[i].device;
	pthread_mutex_unlock(&fake_lock);
	return device;
}

static void fake_map_note(uintptr_t base, size_t size, int device)
{
	pthread_mutex_lock(&fake_lock);
	for (int i = 0; i < FAKE_MAX_MAPS; i++) {
		if (!fake_maps[i].size) {
			fake_maps[i].base = base;
			fake_maps[i].size = size;
			fake_maps[i].device = device;
			break;
		}
	}
	pthread_mutex_unlock(&fake_lock);
}

static void fake_map_forget(uintptr_t base)
{
	pthread_mutex_lock(&fake_lock);
	for (int i = 0; i < FAKE_MAX_MAPS; i++)
		if (fake_maps[i].size && fake_maps[i].base == base)
			fake_maps[i].size = 0;
	pthread_mutex_unlock(&fake_lock);
}

/* The device the memory mapped at p lives on, or -1. */
static int fake_map_device(uintptr_t p)
{
	int device = -1;

	pthread_mutex_lock(&fake_lock);
	for (int i = 0; i < FAKE_MAX_MAPS; i++)
		if (fake_maps[i].size && p >= fake_maps[i].base &&
		    p - fake_maps[i].base < fake_maps[i].size)
			device = fake_maps[i].device;
	pthread_mutex_unlock(&fake_lock);
	return device;
}

cu_result cuDeviceTotalMem_v2(size_t *bytes, cu_device dev);
cu_result cuDeviceTotalMem_v2(size_t *bytes, cu_device dev)
{
	*bytes = (size_t)80 << 30;
	return MC_CU_SUCCESS;
}

cu_result cuDevicePrimaryCtxRetain(cu_context *ctx, cu_device dev);
cu_result cuDevicePrimaryCtxRetain(cu_context *ctx, cu_device dev)
{
	FAKE_CHECK("cuDevicePrimaryCtxRetain");
	if (dev < 0 || dev >= fake_devices())
		return MC_CU_ERROR_INVALID_DEVICE;
	fake_ctx[dev].device = dev;
	*ctx = &fake_ctx[dev];
	fake_count(&fake_live.contexts, 1);
	return MC_CU_SUCCESS;
}

cu_result cuDevicePrimaryCtxRelease_v2(cu_device dev);
cu_result cuDevicePrimaryCtxRelease_v2(cu_device dev)
{
	fake_count(&fake_live.contexts, -1);
	return MC_CU_SUCCESS;
}

cu_result cuCtxSetCurrent(cu_context ctx);
cu_result cuCtxSetCurrent(cu_context ctx)
{
	fake_current = ctx;
	return MC_CU_SUCCESS;
}

cu_result cuCtxGetCurrent(cu_context *ctx);
cu_result cuCtxGetCurrent(cu_context *ctx)
{
	*ctx = fake_current;
	return MC_CU_SUCCESS;
}

cu_result cuCtxGetDevice(cu_device *dev);
cu_result cuCtxGetDevice(cu_device *dev)
{
	if (!fake_current)
		return MC_CU_ERROR_INVALID_CONTEXT;
	*dev = fake_current->device;
	return MC_CU_SUCCESS;
}

cu_result cuCtxSynchronize(void);
cu_result cuCtxSynchronize(void)
{
	return MC_CU_SUCCESS;
}

cu_result cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes);
cu_result cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
	*free_bytes = (size_t)70 << 30;
	*total_bytes = (size_t)80 << 30;
	return MC_CU_SUCCESS;
}

cu_result cuMemAlloc_v2(cu_deviceptr *dptr, size_t bytes);
cu_result cuMemAlloc_v2(cu_deviceptr *dptr, size_t bytes)
{
	void *p = calloc(1, bytes);

	if (!p)
		return MC_CU_ERROR_OUT_OF_MEMORY;
	*dptr = (cu_deviceptr)(uintptr_t)p;
	return MC_CU_SUCCESS;
}

cu_result cuMemFree_v2(cu_deviceptr dptr);
cu_result cuMemFree_v2(cu_deviceptr dptr)
{
	free((void *)(uintptr_t)dptr);
	return MC_CU_SUCCESS;
}

cu_result cuMemHostAlloc(void **p, size_t bytes, unsigned int flags);
cu_result cuMemHostAlloc(void **p, size_t bytes, unsigned int flags)
{
	*p = calloc(1, bytes);
	return *p ? MC_CU_SUCCESS : MC_CU_ERROR_OUT_OF_MEMORY;
}

cu_result cuMemFreeHost(void *p);
cu_result cuMemFreeHost(void *p)
{
	free(p);
	return MC_CU_SUCCESS;
}

cu_result cuMemHostGetDevicePointer_v2(cu_deviceptr *dptr, void *p, unsigned int flags);
cu_result cuMemHostGetDevicePointer_v2(cu_deviceptr *dptr, void *p, unsigned int flags)
{
	*dptr = (cu_deviceptr)(uintptr_t)p;
	return MC_CU_SUCCESS;
}

#define FAKE_MAX_REGISTERED 64
static struct {
	uintptr_t start;
	size_t size;
} fake_registered[FAKE_MAX_REGISTERED];

cu_result cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags);
cu_result cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags)
{
	uintptr_t a = (uintptr_t)p;
	cu_result res = MC_CU_ERROR_OUT_OF_MEMORY;

	FAKE_CHECK("cuMemHostRegister");
	pthread_mutex_lock(&fake_lock);
	for (int i = 0; i < FAKE_MAX_REGISTERED; i++) {
		if (fake_registered[i].size &&
		    a < fake_registered[i].start + fake_registered[i].size &&
		    fake_registered[i].start < a + bytes) {
			res = MC_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
			goto out;
		}
	}
	for (int i = 0; i < FAKE_MAX_REGISTERED; i++) {
		if (!fake_registered[i].size) {
			fake_registered[i].start = a;
			fake_registered[i].size = bytes;
			fake_live.registrations++;
			res = MC_CU_SUCCESS;
			break;
		}
	}
out:
	pthread_mutex_unlock(&fake_lock);
	return res;
}

cu_result cuMemHostUnregister(void *p);
cu_result cuMemHostUnregister(void *p)
{
	cu_result res = MC_CU_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&fake_lock);
	for (int i = 0; i < FAKE_MAX_REGISTERED; i++) {
		if (fake_registered[i].size && fake_registered[i].start == (uintptr_t)p) {
			fake_registered[i].size = 0;
			fake_live.registrations--;
			res = MC_CU_SUCCESS;
		}
	}
	pthread_mutex_unlock(&fake_lock);
	return res;
}

cu_result cuMemcpyHtoD_v2(cu_deviceptr dst, const void *src, size_t bytes);
cu_result cuMemcpyHtoD_v2(cu_deviceptr dst, const void *src, size_t bytes)
{
	memcpy((void *)(uintptr_t)dst, src, bytes);
	return MC_CU_SUCCESS;
}

cu_result cuMemcpyDtoH_v2(void *dst, cu_deviceptr src, size_t bytes);
cu_result cuMemcpyDtoH_v2(void *dst, cu_deviceptr src, size_t bytes)
{
	memcpy(dst, (const void *)(uintptr_t)src, bytes);
	return MC_CU_SUCCESS;
}

cu_result cuMemsetD8_v2(cu_deviceptr dst, unsigned char value, size_t n);
cu_result cuMemsetD8_v2(cu_deviceptr dst, unsigned char value, size_t n)
{
	memset((void *)(uintptr_t)dst, value, n);
	return MC_CU_SUCCESS;
}

/* ---- virtual memory management ---- */

cu_result cuMemGetAllocationGranularity(size_t *granularity, const cu_mem_allocation_prop *prop,
					cu_granularity_flags option);
cu_result cuMemGetAllocationGranularity(size_t *granularity, const cu_mem_allocation_prop *prop,
					cu_granularity_flags option)
{
	if (prop->location.type != MC_CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
	    prop->location.id >= fake_devices())
		return MC_CU_ERROR_INVALID_VALUE;
	*granularity = FAKE_GRANULARITY;
	return MC_CU_SUCCESS;
}

cu_result cuMemCreate(cu_mem_handle *handle, size_t size, const cu_mem_allocation_prop *prop,
		      unsigned long long flags);
cu_result cuMemCreate(cu_mem_handle *handle, size_t size, const cu_mem_allocation_prop *prop,
		      unsigned long long flags)
{
	struct fake_handle *h;

	FAKE_CHECK("cuMemCreate");
	if (!size || size % FAKE_GRANULARITY || prop->type != MC_CU_MEM_ALLOCATION_TYPE_PINNED ||
	    prop->requested_handle_types != MC_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return MC_CU_ERROR_INVALID_VALUE;
	h = calloc(1, sizeof(*h));
	if (!h)
		return MC_CU_ERROR_OUT_OF_MEMORY;
	h->memfd = memfd_create("fake-cuda", MFD_CLOEXEC);
	if (h->memfd < 0 || ftruncate(h->memfd, (off_t)size)) {
		if (h->memfd >= 0)
			close(h->memfd);
		free(h);
		return MC_CU_ERROR_OUT_OF_MEMORY;
	}
	h->size = size;
	h->device = prop->location.id;
	fake_alloc_note(h->memfd, h->device);
	*handle = (cu_mem_handle)(uintptr_t)h;
	fake_count(&fake_live.allocations, 1);
	return MC_CU_SUCCESS;
}

cu_result cuMemRelease(cu_mem_handle handle);
cu_result cuMemRelease(cu_mem_handle handle)
{
	struct fake_handle *h = (struct fake_handle *)(uintptr_t)handle;

	close(h->memfd);
	free(h);
	fake_count(&fake_live.allocations, -1);
	return MC_CU_SUCCESS;
}

cu_result cuMemExportToShareableHandle(void *shareable, cu_mem_handle handle,
				       cu_mem_handle_type type, unsigned long long flags);
cu_result cuMemExportToShareableHandle(void *shareable, cu_mem_handle handle,
				       cu_mem_handle_type type, unsigned long long flags)
{
	struct fake_handle *h = (struct fake_handle *)(uintptr_t)handle;
	int fd;

	FAKE_CHECK("cuMemExportToShareableHandle");
	if (type != MC_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return MC_CU_ERROR_INVALID_VALUE;
	fd = fcntl(h->memfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return MC_CU_ERROR_OUT_OF_MEMORY;
	memcpy(shareable, &fd, sizeof(fd));
	return MC_CU_SUCCESS;
}

cu_result cuMemImportFromShareableHandle(cu_mem_handle *handle, void *os_handle,
					 cu_mem_handle_type type);
cu_result cuMemImportFromShareableHandle(cu_mem_handle *handle, void *os_handle,
					 cu_mem_handle_type type)
{
	int fd = (int)(intptr_t)os_handle;
	struct fake_handle *h;
	off_t size;

	FAKE_CHECK("cuMemImportFromShareableHandle");
	if (type != MC_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return MC_CU_ERROR_INVALID_VALUE;
	size = lseek(fd, 0, SEEK_END);
	if (size <= 0)
		return MC_CU_ERROR_INVALID_HANDLE;
	h = calloc(1, sizeof(*h));
	if (!h)
		return MC_CU_ERROR_OUT_OF_MEMORY;
	h->memfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	h->size = (size_t)size;
	h->device = fake_alloc_device(h->memfd);
	*handle = (cu_mem_handle)(uintptr_t)h;
	fake_count(&fake_live.allocations, 1);
	return MC_CU_SUCCESS;
}

cu_result cuMemAddressReserve(cu_deviceptr *ptr, size_t size, size_t alignment, cu_deviceptr addr,
			      unsigned long long flags);
cu_result cuMemAddressReserve(cu_deviceptr *ptr, size_t size, size_t alignment, cu_deviceptr addr,
			      unsigned long long flags)
{
	size_t align = alignment ? alignment : FAKE_GRANULARITY;
	uintptr_t p, aligned;

	FAKE_CHECK("cuMemAddressReserve");
	/* Over-reserve, then trim to an aligned window. */
	p = (uintptr_t)mmap(NULL, size + align, PROT_NONE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if ((void *)p == MAP_FAILED)
		return MC_CU_ERROR_OUT_OF_MEMORY;
	aligned = (p + align - 1) & ~(uintptr_t)(align - 1);
	if (aligned > p)
		munmap((void *)p, aligned - p);
	munmap((void *)(aligned + size), p + align - aligned);
	*ptr = aligned;
	fake_count(&fake_live.reservations, 1);
	return MC_CU_SUCCESS;
}

cu_result cuMemAddressFree(cu_deviceptr ptr, size_t size);
cu_result cuMemAddressFree(cu_deviceptr ptr, size_t size)
{
	munmap((void *)(uintptr_t)ptr, size);
	fake_count(&fake_live.reservations, -1);
	return MC_CU_SUCCESS;
}

cu_result cuMemMap(cu_deviceptr ptr, size_t size, size_t offset, cu_mem_handle handle,
		   unsigned long long flags);
cu_result cuMemMap(cu_deviceptr ptr, size_t size, size_t offset, cu_mem_handle handle,
		   unsigned long long flags)
{
	struct fake_handle *h = (struct fake_handle *)(uintptr_t)handle;
	void *p;

	FAKE_CHECK("cuMemMap");
	if (offset + size > h->size)
		return MC_CU_ERROR_INVALID_VALUE;
	/* No access until cuMemSetAccess, as on a GPU. */
	p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->memfd,
		 (off_t)offset);
	if (p == MAP_FAILED)
		return MC_CU_ERROR_INVALID_VALUE;
	fake_map_note((uintptr_t)ptr, size, h->device);
	fake_count(&fake_live.mappings, 1);
	return MC_CU_SUCCESS;
}

cu_result cuMemUnmap(cu_deviceptr ptr, size_t size);
cu_result cuMemUnmap(cu_deviceptr ptr, size_t size)
{
	mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	fake_map_forget((uintptr_t)ptr);
	fake_count(&fake_live.mappings, -1);
	return MC_CU_SUCCESS;
}

cu_result cuMemSetAccess(cu_deviceptr ptr, size_t size, const cu_mem_access_desc *desc,
			 size_t count);
cu_result cuMemSetAccess(cu_deviceptr ptr, size_t size, const cu_mem_access_desc *desc,
			 size_t count)
{
	int prot = PROT_NONE, owner = fake_map_device((uintptr_t)ptr);

	FAKE_CHECK("cuMemSetAccess");
	for (size_t i = 0; i < count; i++) {
		if (desc[i].location.type != MC_CU_MEM_LOCATION_TYPE_DEVICE)
			return MC_CU_ERROR_INVALID_VALUE;
		if (owner >= 0 && !fake_reaches(desc[i].location.id, owner))
			return MC_CU_ERROR_INVALID_DEVICE;
		if (desc[i].flags == MC_CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			prot = PROT_READ | PROT_WRITE;
		else if (desc[i].flags == MC_CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE)
			prot = PROT_READ;
	}
	return mprotect((void *)(uintptr_t)ptr, size, prot) ? MC_CU_ERROR_INVALID_VALUE
							    : MC_CU_SUCCESS;
}

/* ---- streams and events ---- */

static void fake_event_reach(cu_event ev, unsigned long record, cu_result status)
{
	pthread_mutex_lock(&ev->lock);
	if (record > ev->reached) {
		ev->reached = record;
		ev->status = status;
	}
	pthread_cond_broadcast(&ev->cond);
	pthread_mutex_unlock(&ev->lock);
}

static void *fake_stream_thread(void *arg)
{
	cu_stream s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct fake_op *op;

		while (!s->head && !s->stop)
			pthread_cond_wait(&s->cond, &s->lock);
		if (!s->head)
			break;
		op = s->head;
		s->busy = true;
		pthread_mutex_unlock(&s->lock);
		if (op->kind == FAKE_OP_COPY) {
			const char *us = getenv("FAKE_CUDA_COPY_US");

			if (us && atoi(us) > 0)
				usleep((useconds_t)atoi(us));
			if (fake_env("FAKE_CUDA_ASYNC_FAIL"))
				s->sticky = MC_CU_ERROR_ILLEGAL_ADDRESS;
			else
				memcpy(op->dst, op->src, op->bytes);
		} else {
			fake_event_reach(op->event, op->record, s->sticky);
		}
		pthread_mutex_lock(&s->lock);
		s->head = op->next;
		if (!s->head)
			s->tail = NULL;
		s->busy = false;
		free(op);
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void fake_stream_push(cu_stream s, struct fake_op *op)
{
	pthread_mutex_lock(&s->lock);
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

cu_result cuStreamCreate(cu_stream *stream, unsigned int flags);
cu_result cuStreamCreate(cu_stream *stream, unsigned int flags)
{
	cu_stream s;

	FAKE_CHECK("cuStreamCreate");
	s = calloc(1, sizeof(*s));
	if (!s)
		return MC_CU_ERROR_OUT_OF_MEMORY;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	if (pthread_create(&s->thread, NULL, fake_stream_thread, s)) {
		free(s);
		return MC_CU_ERROR_OUT_OF_MEMORY;
	}
	*stream = s;
	fake_count(&fake_live.streams, 1);
	return MC_CU_SUCCESS;
}

cu_result cuStreamSynchronize(cu_stream stream);
cu_result cuStreamSynchronize(cu_stream stream)
{
	cu_result res;

	if (!stream)
		return MC_CU_SUCCESS;
	pthread_mutex_lock(&stream->lock);
	while (stream->head)
		pthread_cond_wait(&stream->cond, &stream->lock);
	res = stream->sticky;
	pthread_mutex_unlock(&stream->lock);
	return res;
}

cu_result cuStreamDestroy_v2(cu_stream stream);
cu_result cuStreamDestroy_v2(cu_stream stream)
{
	cuStreamSynchronize(stream);
	pthread_mutex_lock(&stream->lock);
	stream->stop = true;
	pthread_cond_broadcast(&stream->cond);
	pthread_mutex_unlock(&stream->lock);
	pthread_join(stream->thread, NULL);
	pthread_mutex_destroy(&stream->lock);
	pthread_cond_destroy(&stream->cond);
	free(stream);
	fake_count(&fake_live.streams, -1);
	return MC_CU_SUCCESS;
}

cu_result cuStreamIsCapturing(cu_stream stream, cu_capture_status *st);
cu_result cuStreamIsCapturing(cu_stream stream, cu_capture_status *st)
{
	*st = fake_env("FAKE_CUDA_CAPTURING") ? MC_CU_STREAM_CAPTURE_STATUS_ACTIVE
					      : MC_CU_STREAM_CAPTURE_STATUS_NONE;
	return MC_CU_SUCCESS;
}

cu_result cuStreamWaitEvent(cu_stream stream, cu_event event, unsigned int flags);
cu_result cuStreamWaitEvent(cu_stream stream, cu_event event, unsigned int flags)
{
	return MC_CU_ERROR_NOT_SUPPORTED;
}

cu_result cuMemcpyHtoDAsync_v2(cu_deviceptr dst, const void *src, size_t bytes, cu_stream stream);
cu_result cuMemcpyHtoDAsync_v2(cu_deviceptr dst, const void *src, size_t bytes, cu_stream stream)
{
	struct fake_op *op;

	FAKE_CHECK("cuMemcpyHtoDAsync");
	if (!stream) {
		memcpy((void *)(uintptr_t)dst, src, bytes);
		return MC_CU_SUCCESS;
	}
	op = calloc(1, sizeof(*op));
	if (!op)
		return MC_CU_ERROR_OUT_OF_MEMORY;
	*op = (struct fake_op){
	    .kind = FAKE_OP_COPY, .dst = (void *)(uintptr_t)dst, .src = src, .bytes = bytes};
	fake_stream_push(stream, op);
	return MC_CU_SUCCESS;
}

cu_result cuMemcpyDtoDAsync_v2(cu_deviceptr dst, cu_deviceptr src, size_t bytes, cu_stream stream);
cu_result cuMemcpyDtoDAsync_v2(cu_deviceptr dst, cu_deviceptr src, size_t bytes, cu_stream stream)
{
	FAKE_CHECK("cuMemcpyDtoDAsync");
	if (fake_map_device(dst) < 0 || fake_map_device(src) < 0)
		return MC_CU_ERROR_INVALID_VALUE;
	return cuMemcpyHtoDAsync_v2(dst, (const void *)(uintptr_t)src, bytes, stream);
}

cu_result cuEventCreate(cu_event *event, unsigned int flags);
cu_result cuEventCreate(cu_event *event, unsigned int flags)
{
	cu_event ev;

	FAKE_CHECK("cuEventCreate");
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return MC_CU_ERROR_OUT_OF_MEMORY;
	pthread_mutex_init(&ev->lock, NULL);
	pthread_cond_init(&ev->cond, NULL);
	*event = ev;
	fake_count(&fake_live.events, 1);
	return MC_CU_SUCCESS;
}

cu_result cuEventDestroy_v2(cu_event event);
cu_result cuEventDestroy_v2(cu_event event)
{
	pthread_mutex_destroy(&event->lock);
	pthread_cond_destroy(&event->cond);
	free(event);
	fake_count(&fake_live.events, -1);
	return MC_CU_SUCCESS;
}

cu_result cuEventRecord(cu_event event, cu_stream stream);
cu_result cuEventRecord(cu_event event, cu_stream stream)
{
	struct fake_op *op;
	unsigned long record;

	pthread_mutex_lock(&event->lock);
	record = ++event->recorded;
	pthread_mutex_unlock(&event->lock);
	if (!stream) {
		fake_event_reach(event, record, MC_CU_SUCCESS);
		return MC_CU_SUCCESS;
	}
	op = calloc(1, sizeof(*op));
	if (!op)
		return MC_CU_ERROR_OUT_OF_MEMORY;
	*op = (struct fake_op){.kind = FAKE_OP_EVENT, .event = event, .record = record};
	fake_stream_push(stream, op);
	return MC_CU_SUCCESS;
}

cu_result cuEventQuery(cu_event event);
cu_result cuEventQuery(cu_event event)
{
	cu_result res;

	pthread_mutex_lock(&event->lock);
	res = event->reached < event->recorded ? MC_CU_ERROR_NOT_READY : event->status;
	pthread_mutex_unlock(&event->lock);
	return res;
}

cu_result cuEventSynchronize(cu_event event);
cu_result cuEventSynchronize(cu_event event)
{
	cu_result res;

	pthread_mutex_lock(&event->lock);
	while (event->reached < event->recorded)
		pthread_cond_wait(&event->cond, &event->lock);
	res = event->status;
	pthread_mutex_unlock(&event->lock);
	return res;
}

/* ---- modules: kernels are accepted and do nothing (host-side smoke tests) ---- */

struct cu_module_opaque {
	int unused;
};
static struct cu_module_opaque fake_module;

cu_result cuModuleLoadData(cu_module *module, const void *image);
cu_result cuModuleLoadData(cu_module *module, const void *image)
{
	FAKE_CHECK("cuModuleLoadData");
	*module = &fake_module;
	return MC_CU_SUCCESS;
}

cu_result cuModuleUnload(cu_module module);
cu_result cuModuleUnload(cu_module module)
{
	return MC_CU_SUCCESS;
}

cu_result cuModuleGetFunction(cu_function *fn, cu_module module, const char *name);
cu_result cuModuleGetFunction(cu_function *fn, cu_module module, const char *name)
{
	*fn = (cu_function)(uintptr_t)name;
	return MC_CU_SUCCESS;
}

cu_result cuLaunchKernel(cu_function fn, unsigned int grid_x, unsigned int grid_y,
			 unsigned int grid_z, unsigned int block_x, unsigned int block_y,
			 unsigned int block_z, unsigned int shared_bytes, cu_stream stream,
			 void **params, void **extra);
cu_result cuLaunchKernel(cu_function fn, unsigned int grid_x, unsigned int grid_y,
			 unsigned int grid_z, unsigned int block_x, unsigned int block_y,
			 unsigned int block_z, unsigned int shared_bytes, cu_stream stream,
			 void **params, void **extra)
{
	FAKE_CHECK("cuLaunchKernel");
	return MC_CU_SUCCESS;
}
