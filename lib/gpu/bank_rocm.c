// SPDX-License-Identifier: MIT
/*
 * ROCm bank import: the fd from BANK_GET is a dma-buf of the agent's VRAM
 * BO. It is imported on the bank's GPU (its render node found from the
 * PCI location in the descriptor's uuid) with amdgpu_bo_import, given a GPU
 * VA (amdgpu_va_range_alloc) and mapped there read-only
 * (amdgpu_bo_va_op_raw with AMDGPU_VM_PAGE_READABLE alone: a client reads
 * the bank and never writes it), so the slot addresses are valid in the
 * VM of that render node file: the VM of
 * work submitted through libdrm_amdgpu on the same device (Mesa, a
 * libdrm-based runtime). A HIP process computes in its KFD VM instead and
 * imports the same fd through its runtime (hipImportExternalMemory, or
 * hsa_amd_interop_map_buffer): docs/amd.md.
 *
 * libdrm_amdgpu is loaded at run time: libmoecache does not depend on it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bank.h"
#include "rocm_api.h"
#include "../mc_internal.h"

#define MC_ROCM_VA_ALIGN (2u << 20)
/* The GPU VM's page: a raw mapping's size is not rounded up for us. */
#define MC_ROCM_GPU_PAGE 4096u
/*
 * What a client's mapping of the bank allows: reads. amdgpu_bo_va_op maps
 * readable, writeable and executable, whatever it is asked.
 */
#define MC_ROCM_CLIENT_PAGE_FLAGS ((uint64_t)AMDGPU_VM_PAGE_READABLE)

struct mc_rocm_bank {
	struct mc_gpu_bank g; /* first: moecache_bank_map.base points here */
	struct mc_drm_amdgpu_api drm;
	int drm_fd;
	amdgpu_device_handle dev;
	amdgpu_bo_handle bo;
	amdgpu_va_handle va_handle;
	uint64_t va, bytes, map_bytes;
	bool mapped;
};

/* No stream or event of its own: releases go through moecache_bank_release_when. */
static const struct mc_gpu_bank_ops mc_rocm_bank_ops = {0};

static void mc_rocm_bank_free(struct mc_rocm_bank *rb)
{
	mc_gpu_bank_fini(&rb->g);
	if (rb->mapped)
		rb->drm.amdgpu_bo_va_op_raw(rb->dev, rb->bo, 0, rb->map_bytes, rb->va, 0,
					    AMDGPU_VA_OP_UNMAP);
	if (rb->va_handle)
		rb->drm.amdgpu_va_range_free(rb->va_handle);
	if (rb->bo)
		rb->drm.amdgpu_bo_free(rb->bo);
	if (rb->dev)
		rb->drm.amdgpu_device_deinitialize(rb->dev);
	if (rb->drm_fd >= 0)
		close(rb->drm_fd);
	if (rb->drm.lib)
		mc_drm_amdgpu_api_unload(&rb->drm);
	free(rb);
}

static int mc_rocm_fail(struct mc_rocm_bank *rb, int ret, const char *what)
{
	snprintf(rb->g.err, sizeof(rb->g.err), "%s: %s", what, strerror(ret < 0 ? -ret : EIO));
	return ret < 0 ? ret : -EIO;
}

static int mc_rocm_map(struct mc_rocm_bank *rb, const struct moecache_bank_map *b)
{
	struct amdgpu_bo_import_result res = {0};
	uint32_t major, minor, domain, location;
	uint16_t device_id;
	int ret;

	if (mc_rocm_uuid_parse(b->desc.device_uuid, &domain, &location, &device_id)) {
		snprintf(rb->g.err, sizeof(rb->g.err), "the bank descriptor names no AMD GPU");
		return -EPROTO;
	}
	rb->drm_fd = mc_rocm_open_render_node(NULL, domain, location);
	if (rb->drm_fd < 0) {
		snprintf(rb->g.err, sizeof(rb->g.err),
			 "no render node for the bank's GPU at PCI %04x:%02x:%02x.%x: %s", domain,
			 location >> 8, (location >> 3) & 0x1f, location & 7,
			 strerror(-rb->drm_fd));
		return rb->drm_fd;
	}
	ret = rb->drm.amdgpu_device_initialize(rb->drm_fd, &major, &minor, &rb->dev);
	if (ret) {
		rb->dev = NULL;
		return mc_rocm_fail(rb, ret, "amdgpu_device_initialize");
	}
	ret = rb->drm.amdgpu_bo_import(rb->dev, amdgpu_bo_handle_type_dma_buf_fd, (uint32_t)b->fd,
				       &res);
	if (ret)
		return mc_rocm_fail(rb, ret, "amdgpu_bo_import (the bank's dma-buf)");
	rb->bo = res.buf_handle;
	if (res.alloc_size < b->bytes) {
		snprintf(rb->g.err, sizeof(rb->g.err),
			 "the bank's dma-buf is smaller than its descriptor says");
		return -EPROTO;
	}
	rb->bytes = b->bytes;
	/* A BO is whole pages: the rounded size stays inside it. */
	rb->map_bytes = (rb->bytes + MC_ROCM_GPU_PAGE - 1) / MC_ROCM_GPU_PAGE * MC_ROCM_GPU_PAGE;
	if (rb->map_bytes > res.alloc_size) {
		snprintf(rb->g.err, sizeof(rb->g.err), "the bank's dma-buf is not whole GPU pages");
		return -EPROTO;
	}
	ret = rb->drm.amdgpu_va_range_alloc(rb->dev, amdgpu_gpu_va_range_general, rb->map_bytes,
					    MC_ROCM_VA_ALIGN, 0, &rb->va, &rb->va_handle, 0);
	if (ret) {
		rb->va_handle = NULL;
		return mc_rocm_fail(rb, ret, "amdgpu_va_range_alloc");
	}
	ret = rb->drm.amdgpu_bo_va_op_raw(rb->dev, rb->bo, 0, rb->map_bytes, rb->va,
					  MC_ROCM_CLIENT_PAGE_FLAGS, AMDGPU_VA_OP_MAP);
	if (ret)
		return mc_rocm_fail(rb, ret, "amdgpu_bo_va_op_raw (map, read-only)");
	rb->mapped = true;
	return 0;
}

int mc_rocm_bank_import(struct moecache_bank_map *b)
{
	struct mc_rocm_bank *rb;
	int ret;

	rb = calloc(1, sizeof(*rb));
	if (!rb)
		return -ENOMEM;
	rb->drm_fd = -1;
	ret = mc_gpu_bank_init(&rb->g, b, &mc_rocm_bank_ops);
	if (ret) {
		free(rb);
		mc_gpu_set_import_error("out of resources");
		return ret;
	}
	ret = mc_drm_amdgpu_api_load(&rb->drm, NULL, rb->g.err, sizeof(rb->g.err));
	if (!ret)
		ret = mc_rocm_map(rb, b);
	if (ret) {
		mc_gpu_set_import_error(rb->g.err);
		mc_rocm_bank_free(rb);
		return ret;
	}
	rb->g.dev_base = rb->va;
	b->base = rb;
	mc_gpu_set_import_error(NULL);
	return 0;
}

void mc_rocm_bank_unimport(struct moecache_bank_map *b)
{
	if (b && b->base)
		mc_rocm_bank_free(b->base);
}
