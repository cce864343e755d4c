// SPDX-License-Identifier: MIT
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_api.h"

int mc_cuda_api_load(struct mc_cuda_api *api, const char *path, char *err, size_t errlen)
{
	const char *name = path;
	void *sym;

	memset(api, 0, sizeof(*api));
	if (!name || !*name)
		name = getenv(MC_CUDA_LIBRARY_ENV);
	if (!name || !*name)
		name = MC_CUDA_LIBRARY;
	api->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!api->lib) {
		const char *why = dlerror();

		snprintf(err, errlen,
			 "cannot load the CUDA driver library %s (%s): is the NVIDIA driver "
			 "installed?",
			 name, why ? why : "not found");
		return -ENOENT;
	}
#define MC_CUDA_RESOLVE(member, symbol, params)                                                    \
	sym = dlsym(api->lib, #symbol);                                                            \
	if (!sym) {                                                                                \
		snprintf(err, errlen,                                                              \
			 "%s has no %s: the NVIDIA driver is too old (CUDA 11.4 or later needed)", \
			 name, #symbol);                                                           \
		mc_cuda_api_unload(api);                                                           \
		return -ENOSYS;                                                                    \
	}                                                                                          \
	memcpy(&api->member, &sym, sizeof(sym));
	MC_CUDA_FUNCS(MC_CUDA_RESOLVE)
#undef MC_CUDA_RESOLVE
	return 0;
}

void mc_cuda_api_unload(struct mc_cuda_api *api)
{
	if (api->lib)
		dlclose(api->lib);
	memset(api, 0, sizeof(*api));
}

int mc_cuda_errno(cu_result res)
{
	switch (res) {
	case MC_CU_SUCCESS:
		return 0;
	case MC_CU_ERROR_OUT_OF_MEMORY:
		return -ENOMEM;
	case MC_CU_ERROR_NO_DEVICE:
	case MC_CU_ERROR_INVALID_DEVICE:
	case MC_CU_ERROR_STUB_LIBRARY:
	case MC_CU_ERROR_CALL_REQUIRES_NEWER_DRIVER:
	case MC_CU_ERROR_SYSTEM_DRIVER_MISMATCH:
	case MC_CU_ERROR_NOT_INITIALIZED:
	case MC_CU_ERROR_DEINITIALIZED:
		return -ENODEV;
	case MC_CU_ERROR_INVALID_VALUE:
	case MC_CU_ERROR_INVALID_HANDLE:
	case MC_CU_ERROR_INVALID_CONTEXT:
		return -EINVAL;
	case MC_CU_ERROR_NOT_READY:
		return -EAGAIN;
	case MC_CU_ERROR_NOT_SUPPORTED:
	case MC_CU_ERROR_NO_BINARY_FOR_GPU:
		return -EOPNOTSUPP;
	case MC_CU_ERROR_NOT_PERMITTED:
		return -EPERM;
	case MC_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
		return -EEXIST;
	case MC_CU_ERROR_STREAM_CAPTURE_UNSUPPORTED:
		return -EBUSY;
	default:
		return -EIO;
	}
}

const char *mc_cuda_error_name(const struct mc_cuda_api *api, cu_result res)
{
	const char *name = NULL;

	if (api && api->cuGetErrorName && api->cuGetErrorName(res, &name) == MC_CU_SUCCESS && name)
		return name;
	return "CUDA_ERROR_UNKNOWN";
}

int mc_cuda_fail(const struct mc_cuda_api *api, cu_result res, const char *what, char *err,
		 size_t errlen)
{
	const char *text = NULL;

	if (!api || !api->cuGetErrorString || api->cuGetErrorString(res, &text) != MC_CU_SUCCESS)
		text = NULL;
	snprintf(err, errlen, "%s: %s (%u%s%s)", what, mc_cuda_error_name(api, res), res,
		 text ? ": " : "", text ? text : "");
	return mc_cuda_errno(res) ? mc_cuda_errno(res) : -EIO;
}

int mc_cuda_init(struct mc_cuda_api *api, char *err, size_t errlen)
{
	cu_result res = api->cuInit(0);
	int count = 0;

	if (res == MC_CU_SUCCESS)
		res = api->cuDeviceGetCount(&count);
	if (res == MC_CU_SUCCESS && count > 0)
		return 0;
	if (res == MC_CU_SUCCESS || res == MC_CU_ERROR_NO_DEVICE) {
		snprintf(err, errlen,
			 "no CUDA device: the driver sees no GPU (check nvidia-smi "
			 "and CUDA_VISIBLE_DEVICES)");
		return -ENODEV;
	}
	if (res == MC_CU_ERROR_STUB_LIBRARY) {
		snprintf(err, errlen,
			 "the CUDA library found is the toolkit's stub, not a "
			 "driver: install the NVIDIA driver");
		return -ENODEV;
	}
	return mc_cuda_fail(api, res, "cuInit", err, errlen);
}

int mc_cuda_device_by_uuid(const struct mc_cuda_api *api, const uint8_t uuid[16], cu_device *out)
{
	int count = 0;

	if (api->cuDeviceGetCount(&count) != MC_CU_SUCCESS)
		return -ENODEV;
	for (int i = 0; i < count; i++) {
		cu_device dev;
		cu_uuid u;

		if (api->cuDeviceGet(&dev, i) != MC_CU_SUCCESS ||
		    api->cuDeviceGetUuid(&u, dev) != MC_CU_SUCCESS)
			continue;
		if (!memcmp(u.bytes, uuid, sizeof(u.bytes))) {
			*out = dev;
			return 0;
		}
	}
	return -ENODEV;
}

void mc_cuda_uuid_format(const uint8_t uuid[16], char out[41])
{
	static const int dash_after[] = {3, 5, 7, 9};
	char *p = out;

	p += sprintf(p, "GPU-");
	for (int i = 0; i < 16; i++) {
		p += sprintf(p, "%02x", uuid[i]);
		for (size_t d = 0; d < sizeof(dash_after) / sizeof(dash_after[0]); d++)
			if (i == dash_after[d])
				*p++ = '-';
	}
	*p = '\0';
}
