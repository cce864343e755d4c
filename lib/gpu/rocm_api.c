// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rocm_api.h"

static void *mc_rocm_dlopen(const char *path, const char *env, const char *dflt, char *err,
			    size_t errlen, const char **used)
{
	const char *name = path;
	void *lib;

	if (!name || !*name)
		name = getenv(env);
	if (!name || !*name)
		name = dflt;
	*used = name;
	lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *why = dlerror();

		snprintf(err, errlen, "cannot load %s (%s): is ROCm's %s installed?", name,
			 why ? why : "not found", dflt);
	}
	return lib;
}

#define MC_ROCM_RESOLVE(fn)                                                                        \
	sym = dlsym(api->lib, #fn);                                                                \
	if (!sym) {                                                                                \
		snprintf(err, errlen, "%s has no %s: too old", name, #fn);                         \
		goto missing;                                                                      \
	}                                                                                          \
	memcpy(&api->fn, &sym, sizeof(sym));

int mc_hsakmt_api_load(struct mc_hsakmt_api *api, const char *path, char *err, size_t errlen)
{
	const char *name;
	void *sym;

	memset(api, 0, sizeof(*api));
	api->lib =
	    mc_rocm_dlopen(path, MC_HSAKMT_LIBRARY_ENV, MC_HSAKMT_LIBRARY, err, errlen, &name);
	if (!api->lib)
		return -ENOENT;
	MC_HSAKMT_FUNCS(MC_ROCM_RESOLVE)
	return 0;
missing:
	mc_hsakmt_api_unload(api);
	return -ENOSYS;
}

void mc_hsakmt_api_unload(struct mc_hsakmt_api *api)
{
	if (api->lib)
		dlclose(api->lib);
	memset(api, 0, sizeof(*api));
}

int mc_drm_amdgpu_api_load(struct mc_drm_amdgpu_api *api, const char *path, char *err,
			   size_t errlen)
{
	const char *name;
	void *sym;

	memset(api, 0, sizeof(*api));
	api->lib = mc_rocm_dlopen(path, MC_DRM_AMDGPU_LIBRARY_ENV, MC_DRM_AMDGPU_LIBRARY, err,
				  errlen, &name);
	if (!api->lib)
		return -ENOENT;
	MC_DRM_AMDGPU_FUNCS(MC_ROCM_RESOLVE)
	return 0;
missing:
	mc_drm_amdgpu_api_unload(api);
	return -ENOSYS;
}

#undef MC_ROCM_RESOLVE

void mc_drm_amdgpu_api_unload(struct mc_drm_amdgpu_api *api)
{
	if (api->lib)
		dlclose(api->lib);
	memset(api, 0, sizeof(*api));
}

int mc_hsakmt_errno(HSAKMT_STATUS st)
{
	switch (st) {
	case HSAKMT_STATUS_SUCCESS:
		return 0;
	case HSAKMT_STATUS_NO_MEMORY:
	case HSAKMT_STATUS_OUT_OF_RESOURCES:
		return -ENOMEM;
	case HSAKMT_STATUS_INVALID_PARAMETER:
	case HSAKMT_STATUS_INVALID_HANDLE:
	case HSAKMT_STATUS_MEMORY_ALIGNMENT:
	case HSAKMT_STATUS_BUFFER_TOO_SMALL:
		return -EINVAL;
	case HSAKMT_STATUS_INVALID_NODE_UNIT:
	case HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED:
	case HSAKMT_STATUS_DRIVER_MISMATCH:
		return -ENODEV;
	case HSAKMT_STATUS_NOT_IMPLEMENTED:
	case HSAKMT_STATUS_NOT_SUPPORTED:
		return -EOPNOTSUPP;
	case HSAKMT_STATUS_UNAVAILABLE:
		return -EAGAIN;
	case HSAKMT_STATUS_WAIT_TIMEOUT:
		return -ETIMEDOUT;
	case HSAKMT_STATUS_MEMORY_ALREADY_REGISTERED:
		return -EEXIST;
	default:
		return -EIO;
	}
}

const char *mc_hsakmt_status_name(HSAKMT_STATUS st)
{
	switch (st) {
	case HSAKMT_STATUS_SUCCESS:
		return "HSAKMT_STATUS_SUCCESS";
	case HSAKMT_STATUS_DRIVER_MISMATCH:
		return "HSAKMT_STATUS_DRIVER_MISMATCH";
	case HSAKMT_STATUS_INVALID_PARAMETER:
		return "HSAKMT_STATUS_INVALID_PARAMETER";
	case HSAKMT_STATUS_INVALID_HANDLE:
		return "HSAKMT_STATUS_INVALID_HANDLE";
	case HSAKMT_STATUS_INVALID_NODE_UNIT:
		return "HSAKMT_STATUS_INVALID_NODE_UNIT";
	case HSAKMT_STATUS_NO_MEMORY:
		return "HSAKMT_STATUS_NO_MEMORY";
	case HSAKMT_STATUS_NOT_SUPPORTED:
		return "HSAKMT_STATUS_NOT_SUPPORTED";
	case HSAKMT_STATUS_OUT_OF_RESOURCES:
		return "HSAKMT_STATUS_OUT_OF_RESOURCES";
	case HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED:
		return "HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED";
	case HSAKMT_STATUS_KERNEL_COMMUNICATION_ERROR:
		return "HSAKMT_STATUS_KERNEL_COMMUNICATION_ERROR";
	case HSAKMT_STATUS_WAIT_TIMEOUT:
		return "HSAKMT_STATUS_WAIT_TIMEOUT";
	default:
		return "HSAKMT_STATUS_ERROR";
	}
}

static void mc_put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t mc_get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void mc_rocm_uuid_make(uint32_t domain, uint32_t location_id, uint16_t device_id, uint8_t uuid[16])
{
	memset(uuid, 0, 16);
	memcpy(uuid, "AMDG", 4);
	mc_put_le32(uuid + 4, domain);
	mc_put_le32(uuid + 8, location_id);
	uuid[12] = (uint8_t)device_id;
	uuid[13] = (uint8_t)(device_id >> 8);
}

int mc_rocm_uuid_parse(const uint8_t uuid[16], uint32_t *domain, uint32_t *location_id,
		       uint16_t *device_id)
{
	if (memcmp(uuid, "AMDG", 4) || uuid[14] || uuid[15])
		return -EINVAL;
	*domain = mc_get_le32(uuid + 4);
	*location_id = mc_get_le32(uuid + 8);
	*device_id = (uint16_t)(uuid[12] | uuid[13] << 8);
	return 0;
}

static const char *mc_env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);

	return v && *v ? v : dflt;
}

const char *mc_rocm_kfd_path(void)
{
	return mc_env_or(MC_KFD_DEVICE_ENV, MC_KFD_DEVICE);
}

int mc_rocm_open_render_minor(int minor)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/renderD%d", mc_env_or(MC_DRI_DIR_ENV, "/dev/dri"), minor);
	fd = open(path, O_RDWR | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int mc_rocm_open_render_node(const char *sysfs_root, uint32_t domain, uint32_t location_id)
{
	char path[512], link[512];
	struct dirent *de;
	int fd = -ENODEV;
	DIR *dir;

	if (!sysfs_root)
		sysfs_root = mc_env_or(MC_SYSFS_ROOT_ENV, "/sys");
	snprintf(path, sizeof(path), "%s/class/drm", sysfs_root);
	dir = opendir(path);
	if (!dir)
		return -ENODEV;
	while ((de = readdir(dir))) {
		unsigned int d, bus, dev, fn, minor;
		const char *base;
		ssize_t n;

		if (sscanf(de->d_name, "renderD%u", &minor) != 1)
			continue;
		snprintf(path, sizeof(path), "%s/class/drm/%s/device", sysfs_root, de->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		base = strrchr(link, '/');
		base = base ? base + 1 : link;
		if (sscanf(base, "%x:%x:%x.%x", &d, &bus, &dev, &fn) != 4)
			continue;
		if (d != domain || (bus << 8 | dev << 3 | fn) != location_id)
			continue;
		fd = mc_rocm_open_render_minor((int)minor);
		break;
	}
	closedir(dir);
	return fd;
}
