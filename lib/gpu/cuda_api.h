/* SPDX-License-Identifier: MIT */
/*
 * The part of the CUDA driver API that moecache uses, loaded at run time
 * with dlopen("libcuda.so.1"), so that nothing in the build needs the CUDA
 * toolkit and a machine without the NVIDIA driver gets a clear error
 * instead of a failed program start.
 *
 * The types and constants below follow the public driver API reference
 * (cuda.h of CUDA 11.4 and later): same sizes, layouts and values, under
 * our own names so that this header and cuda.h can be compiled together.
 * tests/unit/gpu/cuda_abi_check.c does exactly that wherever cuda.h is
 * installed and checks every struct offset, constant and prototype.
 */
#ifndef MOECACHE_GPU_CUDA_API_H
#define MOECACHE_GPU_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

/* CUresult: an enum in cuda.h, unsigned int in the C ABI. */
typedef unsigned int cu_result;
typedef int cu_device;
typedef unsigned long long cu_deviceptr;
typedef unsigned long long cu_mem_handle; /* CUmemGenericAllocationHandle */
typedef struct cu_ctx_opaque *cu_context;
typedef struct cu_stream_opaque *cu_stream;
typedef struct cu_event_opaque *cu_event;
typedef struct cu_module_opaque *cu_module;
typedef struct cu_function_opaque *cu_function;
/* Enum parameters, as the unsigned int the C ABI passes. */
typedef unsigned int cu_mem_handle_type;   /* CUmemAllocationHandleType */
typedef unsigned int cu_granularity_flags; /* CUmemAllocationGranularity_flags */
typedef unsigned int cu_capture_status;	   /* CUstreamCaptureStatus */
typedef unsigned int cu_device_attribute;  /* CUdevice_attribute */

/* CUresult values we act on. */
#define MC_CU_SUCCESS 0u
#define MC_CU_ERROR_INVALID_VALUE 1u
#define MC_CU_ERROR_OUT_OF_MEMORY 2u
#define MC_CU_ERROR_NOT_INITIALIZED 3u
#define MC_CU_ERROR_DEINITIALIZED 4u
#define MC_CU_ERROR_STUB_LIBRARY 34u
#define MC_CU_ERROR_CALL_REQUIRES_NEWER_DRIVER 36u
#define MC_CU_ERROR_NO_DEVICE 100u
#define MC_CU_ERROR_INVALID_DEVICE 101u
#define MC_CU_ERROR_INVALID_CONTEXT 201u
#define MC_CU_ERROR_NO_BINARY_FOR_GPU 209u
#define MC_CU_ERROR_INVALID_HANDLE 400u
#define MC_CU_ERROR_NOT_READY 600u
#define MC_CU_ERROR_ILLEGAL_ADDRESS 700u
#define MC_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712u
#define MC_CU_ERROR_LAUNCH_FAILED 719u
#define MC_CU_ERROR_NOT_PERMITTED 800u
#define MC_CU_ERROR_NOT_SUPPORTED 801u
#define MC_CU_ERROR_SYSTEM_DRIVER_MISMATCH 803u
#define MC_CU_ERROR_STREAM_CAPTURE_UNSUPPORTED 900u

/* CUmemAllocationType, CUmemLocationType, CUmemAllocationHandleType, CUmemAccess_flags */
#define MC_CU_MEM_ALLOCATION_TYPE_PINNED 1u
#define MC_CU_MEM_LOCATION_TYPE_DEVICE 1u
#define MC_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR 1u
#define MC_CU_MEM_ACCESS_FLAGS_PROT_READ 1u
#define MC_CU_MEM_ACCESS_FLAGS_PROT_READWRITE 3u
/* CUmemAllocationGranularity_flags */
#define MC_CU_MEM_ALLOC_GRANULARITY_MINIMUM 0u
#define MC_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED 1u
/* CUstreamCaptureStatus */
#define MC_CU_STREAM_CAPTURE_STATUS_NONE 0u
#define MC_CU_STREAM_CAPTURE_STATUS_ACTIVE 1u
#define MC_CU_STREAM_CAPTURE_STATUS_INVALIDATED 2u
/* cuStreamCreate, cuEventCreate, cuMemHostRegister, cuMemHostAlloc flags */
#define MC_CU_STREAM_NON_BLOCKING 0x1u
#define MC_CU_EVENT_BLOCKING_SYNC 0x1u
#define MC_CU_EVENT_DISABLE_TIMING 0x2u
#define MC_CU_MEMHOSTREGISTER_PORTABLE 0x1u
#define MC_CU_MEMHOSTREGISTER_DEVICEMAP 0x2u
#define MC_CU_MEMHOSTREGISTER_READ_ONLY 0x8u
#define MC_CU_MEMHOSTALLOC_PORTABLE 0x1u
#define MC_CU_MEMHOSTALLOC_DEVICEMAP 0x2u
/* CUdevice_attribute values we read. */
#define MC_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16u
#define MC_CU_DEVICE_ATTRIBUTE_PCI_BUS_ID 33u
#define MC_CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID 34u
#define MC_CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT 40u
#define MC_CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING 41u
#define MC_CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID 50u
#define MC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75u
#define MC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76u
#define MC_CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED 102u
#define MC_CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED 103u

/* CUmemLocation */
struct cu_mem_location {
	unsigned int type; /* CUmemLocationType */
	int id;
};

/* CUmemAllocationProp */
struct cu_mem_allocation_prop {
	unsigned int type;		     /* CUmemAllocationType */
	unsigned int requested_handle_types; /* CUmemAllocationHandleType */
	struct cu_mem_location location;
	void *win32_handle_meta_data;
	struct {
		unsigned char compression_type;
		unsigned char gpu_direct_rdma_capable;
		unsigned short usage;
		unsigned char reserved[4];
	} alloc_flags;
};

/* CUmemAccessDesc */
struct cu_mem_access_desc {
	struct cu_mem_location location;
	unsigned int flags; /* CUmemAccess_flags */
};

/* CUuuid */
struct cu_uuid {
	char bytes[16];
};

typedef struct cu_mem_allocation_prop cu_mem_allocation_prop;
typedef struct cu_mem_access_desc cu_mem_access_desc;
typedef struct cu_uuid cu_uuid;

/*
 * X(member, exported symbol, parameter list): the member has the name the
 * API reference uses; the symbol is the versioned name cuda.h maps it to
 * (without per-thread default stream), which is what the library exports.
 */
#define MC_CUDA_FUNCS(X)                                                                           \
	X(cuInit, cuInit, (unsigned int flags))                                                    \
	X(cuDriverGetVersion, cuDriverGetVersion, (int *version))                                  \
	X(cuGetErrorString, cuGetErrorString, (cu_result error, const char **str))                 \
	X(cuGetErrorName, cuGetErrorName, (cu_result error, const char **str))                     \
	X(cuDeviceGet, cuDeviceGet, (cu_device * device, int ordinal))                             \
	X(cuDeviceGetCount, cuDeviceGetCount, (int *count))                                        \
	X(cuDeviceGetName, cuDeviceGetName, (char *name, int len, cu_device dev))                  \
	X(cuDeviceGetUuid, cuDeviceGetUuid_v2, (cu_uuid * uuid, cu_device dev))                    \
	X(cuDeviceGetAttribute, cuDeviceGetAttribute,                                              \
	  (int *value, cu_device_attribute attrib, cu_device dev))                                 \
	X(cuDeviceTotalMem, cuDeviceTotalMem_v2, (size_t * bytes, cu_device dev))                  \
	X(cuDeviceCanAccessPeer, cuDeviceCanAccessPeer,                                           \
	  (int *can_access, cu_device dev, cu_device peer))                                        \
	X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, (cu_context * ctx, cu_device dev))   \
	X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, (cu_device dev))                \
	X(cuCtxSetCurrent, cuCtxSetCurrent, (cu_context ctx))                                      \
	X(cuCtxGetCurrent, cuCtxGetCurrent, (cu_context * ctx))                                    \
	X(cuCtxGetDevice, cuCtxGetDevice, (cu_device * dev))                                       \
	X(cuCtxSynchronize, cuCtxSynchronize, (void))                                              \
	X(cuMemGetInfo, cuMemGetInfo_v2, (size_t * free_bytes, size_t * total_bytes))              \
	X(cuMemAlloc, cuMemAlloc_v2, (cu_deviceptr * dptr, size_t bytes))                          \
	X(cuMemFree, cuMemFree_v2, (cu_deviceptr dptr))                                            \
	X(cuMemHostAlloc, cuMemHostAlloc, (void **p, size_t bytes, unsigned int flags))            \
	X(cuMemFreeHost, cuMemFreeHost, (void *p))                                                 \
	X(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer_v2,                                 \
	  (cu_deviceptr * dptr, void *p, unsigned int flags))                                      \
	X(cuMemHostRegister, cuMemHostRegister_v2, (void *p, size_t bytes, unsigned int flags))    \
	X(cuMemHostUnregister, cuMemHostUnregister, (void *p))                                     \
	X(cuMemcpyHtoD, cuMemcpyHtoD_v2, (cu_deviceptr dst, const void *src, size_t bytes))        \
	X(cuMemcpyDtoH, cuMemcpyDtoH_v2, (void *dst, cu_deviceptr src, size_t bytes))              \
	X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2,                                                 \
	  (cu_deviceptr dst, const void *src, size_t bytes, cu_stream stream))                     \
	X(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2,                                                 \
	  (cu_deviceptr dst, cu_deviceptr src, size_t bytes, cu_stream stream))                    \
	X(cuMemsetD8, cuMemsetD8_v2, (cu_deviceptr dst, unsigned char value, size_t n))            \
	X(cuMemAddressReserve, cuMemAddressReserve,                                                \
	  (cu_deviceptr * ptr, size_t size, size_t alignment, cu_deviceptr addr,                   \
	   unsigned long long flags))                                                              \
	X(cuMemAddressFree, cuMemAddressFree, (cu_deviceptr ptr, size_t size))                     \
	X(cuMemCreate, cuMemCreate,                                                                \
	  (cu_mem_handle * handle, size_t size, const cu_mem_allocation_prop *prop,                \
	   unsigned long long flags))                                                              \
	X(cuMemRelease, cuMemRelease, (cu_mem_handle handle))                                      \
	X(cuMemMap, cuMemMap,                                                                      \
	  (cu_deviceptr ptr, size_t size, size_t offset, cu_mem_handle handle,                     \
	   unsigned long long flags))                                                              \
	X(cuMemUnmap, cuMemUnmap, (cu_deviceptr ptr, size_t size))                                 \
	X(cuMemSetAccess, cuMemSetAccess,                                                          \
	  (cu_deviceptr ptr, size_t size, const cu_mem_access_desc *desc, size_t count))           \
	X(cuMemExportToShareableHandle, cuMemExportToShareableHandle,                              \
	  (void *shareable, cu_mem_handle handle, cu_mem_handle_type type,                         \
	   unsigned long long flags))                                                              \
	X(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle,                          \
	  (cu_mem_handle * handle, void *os_handle, cu_mem_handle_type type))                      \
	X(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity,                            \
	  (size_t * granularity, const cu_mem_allocation_prop *prop, cu_granularity_flags option)) \
	X(cuStreamCreate, cuStreamCreate, (cu_stream * stream, unsigned int flags))                \
	X(cuStreamDestroy, cuStreamDestroy_v2, (cu_stream stream))                                 \
	X(cuStreamSynchronize, cuStreamSynchronize, (cu_stream stream))                            \
	X(cuStreamIsCapturing, cuStreamIsCapturing, (cu_stream stream, cu_capture_status * st))    \
	X(cuStreamWaitEvent, cuStreamWaitEvent,                                                    \
	  (cu_stream stream, cu_event event, unsigned int flags))                                  \
	X(cuEventCreate, cuEventCreate, (cu_event * event, unsigned int flags))                    \
	X(cuEventDestroy, cuEventDestroy_v2, (cu_event event))                                     \
	X(cuEventRecord, cuEventRecord, (cu_event event, cu_stream stream))                        \
	X(cuEventQuery, cuEventQuery, (cu_event event))                                            \
	X(cuEventSynchronize, cuEventSynchronize, (cu_event event))                                \
	X(cuModuleLoadData, cuModuleLoadData, (cu_module * module, const void *image))             \
	X(cuModuleUnload, cuModuleUnload, (cu_module module))                                      \
	X(cuModuleGetFunction, cuModuleGetFunction,                                                \
	  (cu_function * fn, cu_module module, const char *name))                                  \
	X(cuLaunchKernel, cuLaunchKernel,                                                          \
	  (cu_function fn, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,          \
	   unsigned int block_x, unsigned int block_y, unsigned int block_z,                       \
	   unsigned int shared_bytes, cu_stream stream, void **params, void **extra))

#define MC_CUDA_MEMBER(member, symbol, params) cu_result(*member) params;

/* One loaded copy of the driver library: a table of its entry points. */
struct mc_cuda_api {
	void *lib; /* dlopen handle */
	MC_CUDA_FUNCS(MC_CUDA_MEMBER)
};

#undef MC_CUDA_MEMBER

/* What the backends and the client import dlopen when nothing else is named. */
#define MC_CUDA_LIBRARY "libcuda.so.1"
/* Names another library (tests: a fake driver), as the agent and the client read it. */
#define MC_CUDA_LIBRARY_ENV "MOECACHE_LIBCUDA"

/*
 * Opens the driver library (path NULL: $MOECACHE_LIBCUDA, else libcuda.so.1)
 * and resolves every entry point. -ENOENT when the library is not there
 * (no NVIDIA driver), -ENOSYS when it lacks an entry point (a driver older
 * than CUDA 11.4); err says which. Does not call cuInit.
 */
int mc_cuda_api_load(struct mc_cuda_api *api, const char *path, char *err, size_t errlen);
void mc_cuda_api_unload(struct mc_cuda_api *api);
/*
 * cuInit(0), and -ENODEV with a clear message when there is no usable
 * device (CUDA_ERROR_NO_DEVICE, a stub library, a driver/kernel module
 * mismatch).
 */
int mc_cuda_init(struct mc_cuda_api *api, char *err, size_t errlen);

/* A -errno for a CUresult: 0, -ENOMEM, -ENODEV, -EINVAL, -EAGAIN (not ready), -EIO... */
int mc_cuda_errno(cu_result res);
/* "CUDA_ERROR_X: text" for messages; never NULL. */
const char *mc_cuda_error_name(const struct mc_cuda_api *api, cu_result res);
/* Formats "what: CUDA_ERROR_X (text)" into err and returns mc_cuda_errno(res). */
int mc_cuda_fail(const struct mc_cuda_api *api, cu_result res, const char *what, char *err,
		 size_t errlen);

/* The ordinal of the device with this uuid; -ENODEV if none is visible. */
int mc_cuda_device_by_uuid(const struct mc_cuda_api *api, const uint8_t uuid[16], cu_device *out);
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" as nvidia-smi prints it (41 bytes with NUL). */
void mc_cuda_uuid_format(const uint8_t uuid[16], char out[41]);

#endif /* MOECACHE_GPU_CUDA_API_H */
