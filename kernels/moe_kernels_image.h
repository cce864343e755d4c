/*
 * The device images built into build/lib/libmoekernels.a, and a reader of
 * the CUDA fatbin container that lists what an image holds.
 */
#ifndef MOE_KERNELS_IMAGE_H
#define MOE_KERNELS_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/*
 * The CUDA fatbin (sm_80, sm_90, compute_90 PTX) for cuModuleLoadData.
 * 0, or -ENOENT when the library was built without nvcc.
 */
int moe_kernels_cuda_image(const void **image, size_t *size);
/*
 * The HIP code object bundle (gfx1030, gfx1100) for hipModuleLoadData.
 * 0, or -ENOENT when the library was built without hipcc.
 */
int moe_kernels_hip_image(const void **image, size_t *size);

enum moe_fatbin_kind {
	MOE_FATBIN_PTX = 1,
	MOE_FATBIN_ELF = 2,
};

struct moe_fatbin_entry {
	uint32_t kind;	 /* enum moe_fatbin_kind, or what the container says */
	uint32_t arch;	 /* 80 for sm_80 or compute_80 */
	uint64_t offset; /* of the payload, from the start of the image */
	uint64_t size;	 /* of the payload as stored (maybe compressed) */
};

/*
 * List the entries of a fatbin (one or more containers back to back):
 * the first max go to entries, *count gets how many there are. -EINVAL if
 * the image is not a fatbin, -EBADMSG if a header points outside it.
 */
int moe_fatbin_list(const void *image, size_t size, struct moe_fatbin_entry *entries, size_t max,
		    size_t *count);

#endif /* MOE_KERNELS_IMAGE_H */
