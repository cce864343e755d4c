// SPDX-License-Identifier: MIT
/*
 * Compile-time check of lib/gpu/cuda_api.h against the toolkit's cuda.h,
 * built wherever cuda.h is installed (tests/unit/gpu/build.mk): every
 * struct offset and size, every constant, and the type of every entry
 * point resolved with dlsym must match, or this file does not compile.
 * It has no code to run.
 */
#include <stddef.h>

#include <cuda.h>

#include "lib/gpu/cuda_api.h"

#define SAME_SIZE(a, b) _Static_assert(sizeof(a) == sizeof(b), "size of " #a " vs " #b)
#define SAME_OFFSET(a, fa, b, fb)                                                                  \
	_Static_assert(offsetof(a, fa) == offsetof(b, fb), "offset of " #a "." #fa)
#define SAME_VALUE(a, b) _Static_assert((unsigned long long)(a) == (unsigned long long)(b), #a)

SAME_SIZE(cu_result, CUresult);
SAME_SIZE(cu_device, CUdevice);
SAME_SIZE(cu_deviceptr, CUdeviceptr);
SAME_SIZE(cu_mem_handle, CUmemGenericAllocationHandle);
SAME_SIZE(cu_mem_handle_type, CUmemAllocationHandleType);
SAME_SIZE(cu_granularity_flags, CUmemAllocationGranularity_flags);
SAME_SIZE(cu_capture_status, CUstreamCaptureStatus);
SAME_SIZE(cu_device_attribute, CUdevice_attribute);

SAME_SIZE(struct cu_mem_location, CUmemLocation);
SAME_OFFSET(struct cu_mem_location, type, CUmemLocation, type);
SAME_OFFSET(struct cu_mem_location, id, CUmemLocation, id);
SAME_SIZE(struct cu_mem_allocation_prop, CUmemAllocationProp);
SAME_OFFSET(struct cu_mem_allocation_prop, type, CUmemAllocationProp, type);
SAME_OFFSET(struct cu_mem_allocation_prop, requested_handle_types, CUmemAllocationProp,
	    requestedHandleTypes);
SAME_OFFSET(struct cu_mem_allocation_prop, location, CUmemAllocationProp, location);
SAME_OFFSET(struct cu_mem_allocation_prop, win32_handle_meta_data, CUmemAllocationProp,
	    win32HandleMetaData);
SAME_OFFSET(struct cu_mem_allocation_prop, alloc_flags, CUmemAllocationProp, allocFlags);
SAME_OFFSET(struct cu_mem_allocation_prop, alloc_flags.usage, CUmemAllocationProp,
	    allocFlags.usage);
SAME_SIZE(struct cu_mem_access_desc, CUmemAccessDesc);
SAME_OFFSET(struct cu_mem_access_desc, location, CUmemAccessDesc, location);
SAME_OFFSET(struct cu_mem_access_desc, flags, CUmemAccessDesc, flags);
SAME_SIZE(struct cu_uuid, CUuuid);

SAME_VALUE(MC_CU_SUCCESS, CUDA_SUCCESS);
SAME_VALUE(MC_CU_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
SAME_VALUE(MC_CU_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
SAME_VALUE(MC_CU_ERROR_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED);
SAME_VALUE(MC_CU_ERROR_DEINITIALIZED, CUDA_ERROR_DEINITIALIZED);
SAME_VALUE(MC_CU_ERROR_STUB_LIBRARY, CUDA_ERROR_STUB_LIBRARY);
SAME_VALUE(MC_CU_ERROR_CALL_REQUIRES_NEWER_DRIVER, CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER);
SAME_VALUE(MC_CU_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
SAME_VALUE(MC_CU_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE);
SAME_VALUE(MC_CU_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_CONTEXT);
SAME_VALUE(MC_CU_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_NO_BINARY_FOR_GPU);
SAME_VALUE(MC_CU_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_HANDLE);
SAME_VALUE(MC_CU_ERROR_NOT_READY, CUDA_ERROR_NOT_READY);
SAME_VALUE(MC_CU_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_ILLEGAL_ADDRESS);
SAME_VALUE(MC_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED, CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
SAME_VALUE(MC_CU_ERROR_LAUNCH_FAILED, CUDA_ERROR_LAUNCH_FAILED);
SAME_VALUE(MC_CU_ERROR_NOT_PERMITTED, CUDA_ERROR_NOT_PERMITTED);
SAME_VALUE(MC_CU_ERROR_NOT_SUPPORTED, CUDA_ERROR_NOT_SUPPORTED);
SAME_VALUE(MC_CU_ERROR_SYSTEM_DRIVER_MISMATCH, CUDA_ERROR_SYSTEM_DRIVER_MISMATCH);
SAME_VALUE(MC_CU_ERROR_STREAM_CAPTURE_UNSUPPORTED, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
SAME_VALUE(MC_CU_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_ALLOCATION_TYPE_PINNED);
SAME_VALUE(MC_CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_DEVICE);
SAME_VALUE(MC_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
SAME_VALUE(MC_CU_MEM_ACCESS_FLAGS_PROT_READ, CU_MEM_ACCESS_FLAGS_PROT_READ);
SAME_VALUE(MC_CU_MEM_ACCESS_FLAGS_PROT_READWRITE, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
SAME_VALUE(MC_CU_MEM_ALLOC_GRANULARITY_MINIMUM, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
SAME_VALUE(MC_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
SAME_VALUE(MC_CU_STREAM_CAPTURE_STATUS_NONE, CU_STREAM_CAPTURE_STATUS_NONE);
SAME_VALUE(MC_CU_STREAM_CAPTURE_STATUS_ACTIVE, CU_STREAM_CAPTURE_STATUS_ACTIVE);
SAME_VALUE(MC_CU_STREAM_CAPTURE_STATUS_INVALIDATED, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
SAME_VALUE(MC_CU_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING);
SAME_VALUE(MC_CU_EVENT_BLOCKING_SYNC, CU_EVENT_BLOCKING_SYNC);
SAME_VALUE(MC_CU_EVENT_DISABLE_TIMING, CU_EVENT_DISABLE_TIMING);
SAME_VALUE(MC_CU_MEMHOSTREGISTER_PORTABLE, CU_MEMHOSTREGISTER_PORTABLE);
SAME_VALUE(MC_CU_MEMHOSTREGISTER_DEVICEMAP, CU_MEMHOSTREGISTER_DEVICEMAP);
SAME_VALUE(MC_CU_MEMHOSTREGISTER_READ_ONLY, CU_MEMHOSTREGISTER_READ_ONLY);
SAME_VALUE(MC_CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_PORTABLE);
SAME_VALUE(MC_CU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTALLOC_DEVICEMAP);
SAME_VALUE(MC_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
SAME_VALUE(MC_CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
SAME_VALUE(MC_CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
SAME_VALUE(MC_CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT);
SAME_VALUE(MC_CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
SAME_VALUE(MC_CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
SAME_VALUE(MC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
	   CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
SAME_VALUE(MC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
	   CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
SAME_VALUE(MC_CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
	   CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
SAME_VALUE(MC_CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
	   CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);

/*
 * Prototypes: our parameter types spelled as cuda.h's, each entry point's
 * type must be exactly that of the symbol we resolve.
 */
#define cu_result CUresult
#define cu_device CUdevice
#define cu_deviceptr CUdeviceptr
#define cu_mem_handle CUmemGenericAllocationHandle
#define cu_context CUcontext
#define cu_stream CUstream
#define cu_event CUevent
#define cu_module CUmodule
#define cu_function CUfunction
#define cu_mem_handle_type CUmemAllocationHandleType
#define cu_granularity_flags CUmemAllocationGranularity_flags
#define cu_capture_status CUstreamCaptureStatus
#define cu_device_attribute CUdevice_attribute
#define cu_mem_allocation_prop CUmemAllocationProp
#define cu_mem_access_desc CUmemAccessDesc
#define cu_uuid CUuuid

#define SAME_PROTO(member, symbol, params)                                                         \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&symbol), CUresult(*) params),      \
		       "prototype of " #symbol);
MC_CUDA_FUNCS(SAME_PROTO)
