/* SPDX-License-Identifier: MIT */
/*
 * libhsakmt (the KFD thunk) and libdrm_amdgpu, loaded at run time with
 * dlopen. The prototypes are those of the installed headers (Debian's
 * libhsakmt-dev and libdrm-dev): every table entry has the type of the
 * declared function, so a mismatch is a compile error, yet neither
 * library is needed to build, link or run anything on a machine without
 * an AMD GPU (libmoecache stays free of them for CPU and CUDA users).
 */
#ifndef MOECACHE_GPU_ROCM_API_H
#define MOECACHE_GPU_ROCM_API_H

#include <stddef.h>
#include <stdint.h>

#include <amdgpu.h>
#include <amdgpu_drm.h>
#include <hsakmt.h>

#define MC_HSAKMT_FUNCS(X)                                                                         \
	X(hsaKmtOpenKFD)                                                                           \
	X(hsaKmtCloseKFD)                                                                          \
	X(hsaKmtAcquireSystemProperties)                                                           \
	X(hsaKmtReleaseSystemProperties)                                                           \
	X(hsaKmtGetNodeProperties)                                                                 \
	X(hsaKmtGetNodeIoLinkProperties)                                                           \
	X(hsaKmtAllocMemory)                                                                       \
	X(hsaKmtFreeMemory)                                                                        \
	X(hsaKmtRegisterMemoryToNodes)                                                             \
	X(hsaKmtRegisterGraphicsHandleToNodes)                                                     \
	X(hsaKmtDeregisterMemory)                                                                  \
	X(hsaKmtMapMemoryToGPUNodes)                                                               \
	X(hsaKmtUnmapMemoryToGPU)                                                                  \
	X(hsaKmtCreateQueue)                                                                       \
	X(hsaKmtDestroyQueue)                                                                      \
	X(hsaKmtCreateEvent)                                                                       \
	X(hsaKmtDestroyEvent)                                                                      \
	X(hsaKmtWaitOnEvent)

#define MC_DRM_AMDGPU_FUNCS(X)                                                                     \
	X(amdgpu_device_initialize)                                                                \
	X(amdgpu_device_deinitialize)                                                              \
	X(amdgpu_query_heap_info)                                                                  \
	X(amdgpu_query_gpu_info)                                                                   \
	X(amdgpu_bo_alloc)                                                                         \
	X(amdgpu_bo_export)                                                                        \
	X(amdgpu_bo_import)                                                                        \
	X(amdgpu_bo_free)                                                                          \
	X(amdgpu_va_range_alloc)                                                                   \
	X(amdgpu_va_range_free)                                                                    \
	X(amdgpu_bo_va_op)                                                                         \
	X(amdgpu_bo_va_op_raw)

#define MC_ROCM_MEMBER(fn) __typeof__(fn) *fn;

struct mc_hsakmt_api {
	void *lib;
	MC_HSAKMT_FUNCS(MC_ROCM_MEMBER)
};

struct mc_drm_amdgpu_api {
	void *lib;
	MC_DRM_AMDGPU_FUNCS(MC_ROCM_MEMBER)
};

#undef MC_ROCM_MEMBER

#define MC_HSAKMT_LIBRARY "libhsakmt.so.1"
#define MC_DRM_AMDGPU_LIBRARY "libdrm_amdgpu.so.1"
/* Name other libraries (tests), as the agent and the client read them. */
#define MC_HSAKMT_LIBRARY_ENV "MOECACHE_LIBHSAKMT"
#define MC_DRM_AMDGPU_LIBRARY_ENV "MOECACHE_LIBDRM_AMDGPU"
/* The KFD device node; its absence means no amdgpu driver with compute support. */
#define MC_KFD_DEVICE "/dev/kfd"
/*
 * Test hooks: another KFD node, folder of render nodes, and sysfs root
 * (the unit tests run the backend on fake libraries and a fake tree).
 */
#define MC_KFD_DEVICE_ENV "MOECACHE_KFD_DEVICE"
#define MC_DRI_DIR_ENV "MOECACHE_DRI_DIR"
#define MC_SYSFS_ROOT_ENV "MOECACHE_SYSFS_ROOT"

/* $MOECACHE_KFD_DEVICE or /dev/kfd. */
const char *mc_rocm_kfd_path(void);
/* Opens render node minor (O_RDWR | O_CLOEXEC) in $MOECACHE_DRI_DIR or /dev/dri: fd or -errno. */
int mc_rocm_open_render_minor(int minor);

/* -ENOENT: no such library; -ENOSYS: an entry point is missing. err says which. */
int mc_hsakmt_api_load(struct mc_hsakmt_api *api, const char *path, char *err, size_t errlen);
void mc_hsakmt_api_unload(struct mc_hsakmt_api *api);
int mc_drm_amdgpu_api_load(struct mc_drm_amdgpu_api *api, const char *path, char *err,
			   size_t errlen);
void mc_drm_amdgpu_api_unload(struct mc_drm_amdgpu_api *api);

/* A -errno for an HSAKMT_STATUS. */
int mc_hsakmt_errno(HSAKMT_STATUS st);
const char *mc_hsakmt_status_name(HSAKMT_STATUS st);

/*
 * The identity of an AMD GPU in struct moecache_bank's device_uuid:
 * "AMDG", PCI domain (le32), bus/device/function as KFD's LocationId
 * (bus << 8 | device << 3 | function, le32), PCI device id (le16), 0, 0.
 * It survives a restart of the agent and matches the GPU's render node.
 */
void mc_rocm_uuid_make(uint32_t domain, uint32_t location_id, uint16_t device_id, uint8_t uuid[16]);
/* 0 and the fields, or -EINVAL if uuid is not one mc_rocm_uuid_make wrote. */
int mc_rocm_uuid_parse(const uint8_t uuid[16], uint32_t *domain, uint32_t *location_id,
		       uint16_t *device_id);
/*
 * Opens the render node of the GPU at PCI (domain, location_id) read-write
 * (O_CLOEXEC), found through /sys/class/drm (sysfs_root: NULL for
 * $MOECACHE_SYSFS_ROOT or "/sys"). Returns the fd, -ENODEV if no render
 * node has that location, or the -errno of opening it.
 */
int mc_rocm_open_render_node(const char *sysfs_root, uint32_t domain, uint32_t location_id);

#endif /* MOECACHE_GPU_ROCM_API_H */
